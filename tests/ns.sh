#!/usr/bin/env bash
# ns.sh SBX: the ns runner end to end, as root. Builds a tiny BusyBox root from Debian's
# busybox-static (or uses build/images/busybox-x86_64 when it exists), creates sandboxes from
# it and checks: hostname, overlay isolation (between sandboxes and from the image), the pid
# and network namespaces, /dev, the injected agent, transfers through nsenter, orphan reaping
# by init, that `sandbox rm` leaves no process, mount or state (also after escapes with
# setsid), idempotent rm, absent and stopped states, failed creates leaving nothing. Every
# sandbox and file lives under one temp folder, removed on exit. One "  ok: ..." per check.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root
sbx=$(realpath "$1")
export SBX_NS_DIR=$w/state
on_exit remove_sandboxes
init_pid() { sed -n 's/^pid=//p' "$SBX_NS_DIR/$1/state"; }
pidns_of() { stat -Lc %i "/proc/$1/ns/pid"; }
# Host pids of the live (not zombie) processes in pid namespace $1 (an inode number).
ns_procs() {
	local p st
	for p in /proc/[0-9]*; do
		[ "$(stat -Lc %i "$p/ns/pid" 2>/dev/null)" = "$1" ] || continue
		st=$(sed 's/.*) //' "$p/stat" 2>/dev/null | cut -d' ' -f1) || continue
		[ "$st" = Z ] || [ -z "$st" ] || echo "${p#/proc/}"
	done
}
no_mounts() { ! grep -q "$w" /proc/self/mountinfo; }

# ---- the image ----
img=$top/build/images/busybox-x86_64
if [ ! -x "$img/bin/busybox" ]; then
	img=$w/img
	bb=$(dpkg -L busybox-static | grep '/busybox$' | head -1)
	mkdir -p "$img"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,dev,proc,sys,run,root,home/agent}
	chmod 1777 "$img/tmp"
	cp "$bb" "$img/bin/busybox"
	for p in $("$img/bin/busybox" --list-full); do
		[ -e "$img/$p" ] || ln -s /bin/busybox "$img/$p"
	done
	printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' \
		'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' \
		'agent:x:1000:1000:agent:/home/agent:/bin/sh' >"$img/etc/passwd"
	printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' 'agent:x:1000:' >"$img/etc/group"
	chown 1000:1000 "$img/home/agent"
fi
listing() { (cd "$1" && find . -printf '%P %y %m %U:%G %s %T@ %l\n' | LC_ALL=C sort); }
listing "$img" >"$w/img.before"

# ---- create ----
[ "$("$sbx" sandbox create --image "$img" --name A)" = A ] || die "create A"
[ "$("$sbx" sandbox create --image "$img" --name B)" = B ] || die "create B"
"$sbx" sandbox status A | grep -q '^A running pid [0-9]* arch x86_64 image ' || die "status A"
"$sbx" --json sandbox status B | grep -q '"state":"running"' || die "status B"
ok "two sandboxes from one image: created and running"
# What the state folder holds besides the sandboxes' folders: the id claims (.ids, each a link
# named by its range's slot), the programs' store (.exec, runner/execstore.c) and nothing else.
left() { ls -A "$SBX_NS_DIR" | grep -vx -e '\.ids' -e '\.exec'; }
[ -z "$(left | grep '^\.' || true)" ] || die "a temporary state folder was left"
[ "$(ls "$SBX_NS_DIR/.ids" | sort | tr '\n' ' ')" = "0 1 " ] && [ "$(readlink "$SBX_NS_DIR/.ids/1")" = B ] ||
	die "id claims: $(ls -l "$SBX_NS_DIR/.ids")"
for k in pid starttime pidns image arch created_ns; do
	grep -q "^$k=." "$SBX_NS_DIR/A/state" || die "state lacks $k"
done
ok "state folder in place, nothing temporary left, state file has pid/start/image/arch/created"
gen=$("$sbx" sandbox create --image "$img")
[[ $gen =~ ^sbx-[a-z0-9]{6}$ ]] || die "generated name '$gen'"
"$sbx" sandbox rm "$gen"
ok "a generated name: $gen"
[ "$("$sbx" sandbox ls --runner ns | awk '{print $1 " " $2}' | tr '\n' ' ')" = "A running B running " ] ||
	die "ls: $("$sbx" sandbox ls --runner ns)"
ok "sandbox ls lists A and B"
# Every kind with Docker installed and its daemon down (a socket nobody listens on): Docker is
# left out, not an error; named, it is one. (Before: "docker: ps failed", exit 3.)
if command -v docker >/dev/null; then
	rc=0
	DOCKER_HOST=unix://$w/no-dockerd.sock "$sbx" sandbox ls >"$w/ls.out" 2>"$w/ls.err" || rc=$?
	[ $rc = 0 ] && [ ! -s "$w/ls.err" ] && [ "$(awk '{print $1}' "$w/ls.out" | tr '\n' ' ')" = "A B " ] ||
		die "ls with dockerd down: exit $rc: $(cat "$w/ls.out" "$w/ls.err")"
	rc=0
	DOCKER_HOST=unix://$w/no-dockerd.sock "$sbx" sandbox ls --runner docker >/dev/null 2>&1 || rc=$?
	[ $rc = 3 ] || die "ls --runner docker with dockerd down: exit $rc"
	ok "sandbox ls with Docker installed but its daemon down: Docker left out (exit 0, nothing on stderr); --runner docker: exit 3"
fi

# ---- what the sandbox is ----
a_pid=$(init_pid A)
b_pid=$(init_pid B)
a_ns=$(pidns_of "$a_pid")
b_ns=$(pidns_of "$b_pid")
[ "$(in_ns A exec -- hostname)" = A ] && [ "$(in_ns B exec -- hostname)" = B ] &&
	[ "$(hostname)" != A ] || die "hostnames"
ok "hostname is the sandbox's name (A, B; the host's is $(hostname))"
[ "$(in_ns A sh 'echo $$')" -lt 50 ] || die "pid namespace: \$\$ = $(in_ns A sh 'echo $$')"
[ "$(in_ns A exec -- cat /proc/1/cmdline | tr '\0' ' ')" = "sbx-agent init --serve " ] || die "PID 1"
[ "$a_ns" != "$(pidns_of self)" ] && [ "$a_ns" != "$b_ns" ] || die "pid namespaces"
ok "own pid namespace: small pids, PID 1 is 'sbx-agent init --serve' (host pid $a_pid)"
# A session is served by init itself (no nsenter, no exec): the resident agent; without it,
# through nsenter.
in_ns A hello | grep -qx 'channel resident' || die "channel: $(in_ns A hello | grep channel)"
SBX_RESIDENT=0 in_ns A hello | grep -qx 'channel exec' || die "SBX_RESIDENT=0: $(SBX_RESIDENT=0 in_ns A hello | grep channel)"
ok "sessions go to init's resident agent (channel resident), through nsenter with SBX_RESIDENT=0"
[ "$(in_ns A exec -- ls /sys/class/net)" = lo ] || die "/sys/class/net: $(in_ns A exec -- ls /sys/class/net)"
links=$(in_ns A exec -- ip -o link)
[ "$(echo "$links" | wc -l)" = 1 ] && echo "$links" | grep -q '^1: lo: <LOOPBACK,UP' ||
	die "ip link: $links"
in_ns A exec -- ping -c 1 -W 1 127.0.0.1 >/dev/null || die "loopback does not answer"
ok "network: only lo, up, answering"
[ "$(in_ns A sh 'echo x >/dev/null && head -c 5 /dev/zero | wc -c && head -c 5 /dev/urandom | wc -c')" = "5
5" ] || die "/dev nodes"
in_ns A exec -- ls /dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty /dev/shm >/dev/null ||
	die "/dev listing"
[ "$(in_ns A exec -- stat -c %a /dev/shm)" = 1777 ] || die "/dev/shm mode"
ok "/dev: null zero full random urandom tty, /dev/shm 1777"
[ "$(in_ns A exec -- pwd)" = / ] || die "cwd"
[ "$(in_ns A kind "$top")" = absent ] || die "the host's $top is visible"
[ "$(in_ns A exec -- ls -A / | grep -vE '^\.sbx(-keeper|-serve)?$' | LC_ALL=C sort)" = \
	"$(ls -A "$img" | LC_ALL=C sort)" ] || die "/ is not the image"
[ "$(in_ns A sh 'cd /..; pwd; ls -d /../bin')" = "/
/../bin" ] || die "cd .."
ok "the sandbox sees only the image (cwd /, no host path, / = image + /.sbx)"
agent_sha=$(sha256sum "${SBX_AGENT_DIR:-$top/build/agent}/x86_64/sbx-agent" | cut -d' ' -f1)
[ "$(in_ns A --json hello | grep -o '"sha256":"[0-9a-f]*"')" = "\"sha256\":\"$agent_sha\"" ] ||
	die "HELLO digest"
# Root inside is the sandbox's mapped uid on the host (its state's uid=).
base=$(sed -n 's/^uid=//p' "$SBX_NS_DIR/A/state")
[ -n "$base" ] && [ "$base" -ne 0 ] || die "no mapped uid in A's state"
# The agent is the host root's (a link into the shared store, runner/execstore.c): unmapped,
# so inside it is the overflow id 65534; its folder is the sandbox's root's.
[ "$(stat -c '%a %u' "$SBX_NS_DIR/A/upper/.sbx/sbx-agent" "$SBX_NS_DIR/A/upper/.sbx" | tr '\n' ' ')" = "755 0 755 $base " ] ||
	die "agent mode: $(stat -c '%a %u' "$SBX_NS_DIR/A/upper/.sbx/sbx-agent" "$SBX_NS_DIR/A/upper/.sbx")"
[ "$(in_ns A exec -- stat -c '%a %u' /.sbx/sbx-agent /.sbx | tr '\n' ' ')" = "755 65534 755 0 " ] || die "agent mode inside"
[ ! -e "$img/.sbx" ] || die "the agent landed in the image"
ok "the agent is placed in the layer (/.sbx/sbx-agent, 0755, the host root's: 65534 inside; /.sbx the sandbox's root's, uid $base on the host); HELLO's SHA-256 matches"

# ---- the overlay ----
in_ns A sh 'echo from-a >/tmp/only-a && echo changed >>/etc/passwd && rm /bin/vi'
[ "$(in_ns A exec -- cat /tmp/only-a)" = from-a ] || die "A cannot read its own file"
[ "$(in_ns B kind /tmp/only-a)" = absent ] || die "B sees A's file"
[ ! -e "$img/tmp/only-a" ] || die "the image got A's file"
[ -f "$SBX_NS_DIR/A/upper/tmp/only-a" ] || die "A's file is not in A's layer"
! in_ns B exec -- grep -q changed /etc/passwd && in_ns B kind /bin/vi | grep -q file ||
	die "B sees A's edits"
[ "$(in_ns A kind /bin/vi)" = absent ] || die "A's delete"
listing "$img" | cmp -s - "$w/img.before" || die "the image changed"
ok "overlay: A's writes and deletes are A's only (not in B, not in the image)"
in_ns A exec -- sh -c 'echo $(stat -c %a /tmp)' | grep -qx 1777 || die "/tmp mode"
ok "/tmp is the image's (1777)"
no_mounts || die "a mount of the sandbox is visible on the host"
ok "nothing of the sandboxes is mounted in the host's mount namespace"

# ---- transfers through nsenter ----
mkdir -p "$w/task/sub/deep" "$w/task/empty"
echo hello >"$w/task/a.txt"
printf 'x%.0s' $(seq 1 5000) >"$w/task/sub/big"
echo deep >"$w/task/sub/deep/f"
chmod 0751 "$w/task/sub"
chmod 0600 "$w/task/a.txt"
ln -s a.txt "$w/task/link"
in_ns A upload-dir "$w/task" /work/task >/dev/null
[ "$(in_ns A exec -- cat /work/task/sub/deep/f)" = deep ] || die "upload"
in_ns A download-dir /work/task "$w/back" >/dev/null
diff -r --no-dereference "$w/task" "$w/back" || die "round trip differs"
[ "$(stat -c %a "$w/back/sub")" = 751 ] && [ "$(stat -c %a "$w/back/a.txt")" = 600 ] &&
	[ "$(readlink "$w/back/link")" = a.txt ] || die "modes or links"
[ "$(in_ns B kind /work/task)" = absent ] || die "B sees A's upload"
ok "upload-dir / download-dir round trip through nsenter (contents, modes, symlink)"

# ---- init reaps orphans ----
in_ns A exec -- sh -c 'sleep 0.3 & setsid sleep 0.3 &'
sleep 1
zombies=$(in_ns A sh 'for s in /proc/[0-9]*/stat; do cut -d" " -f3 $s; done 2>/dev/null | grep -c Z || true')
[ "$zombies" = 0 ] || die "$zombies zombies in A"
ok "orphans are reaped by init (no zombie after escaped sleeps exit)"

# ---- rm kills everything ----
in_ns A exec -- /bin/sh -c 'sleep 1000 & setsid sleep 1000 &'
sleeps=()
for p in $(ns_procs "$a_ns"); do
	[ "$(cat "/proc/$p/comm" 2>/dev/null)" = sleep ] && sleeps+=("$p")
done
[ ${#sleeps[@]} = 2 ] || die "expected 2 sleeps in A, found ${#sleeps[*]}"
"$sbx" sandbox rm A
for p in "${sleeps[@]}" "$a_pid"; do
	if [ -e "/proc/$p" ] && [ "$(sed 's/.*) //' "/proc/$p/stat" | cut -d' ' -f1)" != Z ]; then
		die "process $p survived rm"
	fi
done
[ -z "$(ns_procs "$a_ns")" ] || die "processes left in A's pid namespace: $(ns_procs "$a_ns")"
ok "rm: the sleeps (${sleeps[*]}, one setsid) and init are gone, nothing left in the pid namespace"
[ ! -e "$SBX_NS_DIR/A" ] && [ -z "$(left | grep -v '^B$' || true)" ] && [ ! -e "$SBX_NS_DIR/.ids/0" ] ||
	die "state left: $(ls -A "$SBX_NS_DIR" "$SBX_NS_DIR/.ids")"
no_mounts || die "mounts left"
ok "rm: no state folder, layer or mount left"
"$sbx" sandbox rm A || die "rm of an absent sandbox"
ok "rm is idempotent (absent: exit 0)"
rc=0
out=$("$sbx" sandbox status A) || rc=$?
[ "$out" = "A absent" ] && [ $rc = 1 ] || die "status of absent: '$out' rc $rc"
ok "status of an absent sandbox: 'A absent', exit 1"
rc=$(rc in_ns A hello 2>"$w/err")
[ $rc = 3 ] && grep -q 'no sandbox A' "$w/err" || die "runner on absent: rc $rc $(cat "$w/err")"
ok "--runner ns:A on an absent sandbox: unavailable (exit 3)"

# ---- init killed from outside ----
kill -KILL "$b_pid"
for _ in $(seq 1 200); do
	st=$(sed 's/.*) //' "/proc/$b_pid/stat" 2>/dev/null | cut -d' ' -f1 || true)
	[ -z "$st" ] || [ "$st" = Z ] && break
	sleep 0.01
done
rc=0
out=$("$sbx" sandbox status B) || rc=$?
rc2=$(rc in_ns B hello 2>"$w/err")
[[ $out == "B stopped pid $b_pid "* ]] && [ $rc = 1 ] || die "status after kill: '$out' rc $rc"
[ $rc2 = 3 ] && grep -q 'stopped' "$w/err" || die "runner on stopped: rc $rc2 $(cat "$w/err")"
ok "init killed from outside: status 'stopped', the runner refuses (exit 3)"
"$sbx" sandbox rm B
[ ! -e "$SBX_NS_DIR/B" ] && [ -z "$(ns_procs "$b_ns")" ] || die "rm of stopped B"
ok "rm cleans a stopped sandbox"

# ---- init's signals ----
rc=$(rc timeout 5 "${SBX_AGENT_DIR:-$top/build/agent}/x86_64/sbx-agent" init 2>/dev/null)
[ $rc = 2 ] || die "sbx-agent init outside a pid namespace: rc $rc"
ok "sbx-agent init refuses to run unless it is PID 1"
"$sbx" sandbox create --image "$img" --name G >/dev/null
g_pid=$(init_pid G)
g_ns=$(pidns_of "$g_pid")
kill -HUP "$g_pid"
kill -INT "$g_pid"
kill -USR1 "$g_pid"
kill -PIPE "$g_pid"
sleep 0.1
"$sbx" sandbox status G >/dev/null || die "init died of a signal it should ignore"
in_ns G exec -- sh -c 'setsid sleep 1000 &'
[ -n "$(ns_procs "$g_ns" | grep -vx "$g_pid")" ] || die "no sleep in G"
kill -TERM "$g_pid"
for _ in $(seq 1 200); do
	[ -z "$(ns_procs "$g_ns")" ] && break
	sleep 0.01
done
[ -z "$(ns_procs "$g_ns")" ] || die "SIGTERM left $(ns_procs "$g_ns")"
[ "$(rc "$sbx" sandbox status G)" = 1 ] || die "G after SIGTERM: $("$sbx" sandbox status G)"
"$sbx" sandbox rm G
ok "init ignores HUP INT USR1 PIPE; SIGTERM kills the whole sandbox and ends it"

# ---- failed and refused creates leave nothing ----
"$sbx" sandbox create --image "$img" --name C >/dev/null
c_pid=$(init_pid C)
rc=$(rc "$sbx" sandbox create --image "$img" --name C 2>"$w/err")
[ $rc = 2 ] && grep -q 'already exists' "$w/err" || die "duplicate name: rc $rc"
[ "$(init_pid C)" = "$c_pid" ] && "$sbx" sandbox status C >/dev/null || die "C was disturbed"
ok "a taken name is refused (exit 2); the running sandbox is untouched"
rc1=$(rc "$sbx" sandbox create --image "$img" --name ../x 2>/dev/null)
rc2=$(rc "$sbx" sandbox create --image "$w/missing" --name D 2>/dev/null)
[ $rc1 = 2 ] && [ $rc2 = 2 ] || die "bad name rc $rc1, missing image rc $rc2"
ok "a bad name or a missing image: usage (exit 2)"
mkdir -p "$w/evil" "$w/outside"
ln -s "$w/outside" "$w/evil/dev" # absolute: resolved on the host before the pivot
rc=$(rc "$sbx" sandbox create --image "$w/evil" --name E 2>"$w/err")
[ $rc = 3 ] && grep -q '/dev' "$w/err" || die "evil image: rc $rc $(cat "$w/err")"
[ -z "$(ls -A "$w/outside")" ] || die "the create wrote through the image's /dev symlink"
[ -z "$(left | grep -v '^C$' || true)" ] || die "failed create left $(ls -A "$SBX_NS_DIR")"
no_mounts || die "failed create left mounts"
ok "an image whose /dev is a symlink is refused (exit 3), nothing written or left"

# ---- an image with a single static file ----
mkdir -p "$w/tiny"
cp "$img/bin/busybox" "$w/tiny/busybox"
"$sbx" sandbox create --image "$w/tiny" --name T >/dev/null
[ "$(in_ns T exec -- /busybox echo hi)" = hi ] && [ "$(in_ns T kind /proc/1)" = dir ] &&
	[ "$(in_ns T kind /tmp)" = absent ] || die "tiny image"
[ "$(ls -A "$w/tiny")" = busybox ] || die "the tiny image changed"
ok "an image without /proc /dev /sys /tmp or a shell: mount points made in the layer only"

# ---- the architecture an image declares ----
printf 'name=tiny\narch=aarch64\n' >"$w/tiny/.sbx-image"
"$sbx" sandbox create --image "$w/tiny" --name F >/dev/null
"$sbx" sandbox status F | grep -q ' arch aarch64 ' || die "F's arch: $("$sbx" sandbox status F)"
in_ns F --json hello | grep -q '"arch":"aarch64"' || die "F's agent is not aarch64"
[ "$(in_ns F exec -- /busybox cat /proc/1/cmdline | tr '\0' ' ')" = "sbx-agent init " ] || die "F's init"
ok "an image declaring arch=aarch64 gets the aarch64 agent (through the layer's qemu), a native init"
if [ -x "$top/build/images/noshell-x86_64/hello" ]; then
	"$sbx" sandbox create --image "$top/build/images/noshell-x86_64" --name N >/dev/null
	in_ns N exec -- /hello >/dev/null || die "noshell: /hello"
	"$sbx" sandbox rm N
	ok "build/images/noshell-x86_64: /hello runs"
fi

# /etc/subuid and /etc/subgid name root's ranges: sandboxes take 65536 of them each, in
# order, until none is left. The files are a copy of /etc bound over it in a private mount
# namespace only. Shown able to fail: with the files not read, the maps said 100000000.
cp -a /etc "$w/etc"
# Their sandboxes live in state folders of their own: removed at exit too, whatever failed.
on_exit 'SBX_NS_DIR=$w/sub remove_sandboxes; SBX_NS_DIR=$w/sub2 remove_sandboxes'
echo root:200000:131072 >"$w/etc/subuid"
echo root:300000:200000 >"$w/etc/subgid"
SBX_NS_DIR=$w/sub unshare --mount --propagation private sh -c 'mount --bind "$1/etc" /etc &&
	for n in S1 S2 S3; do "$2" sandbox create --image "$3" --name $n >/dev/null 2>"$1/sub.err"; done
	"$2" --runner ns:S2 exec -- cat /proc/self/uid_map /proc/self/gid_map
	"$2" sandbox rm S1 S2 S3' sh "$w" "$sbx" "$img" >"$w/sub.maps" || die "subuid: $(cat "$w/sub.err")"
[ "$(tr -s ' \n' ' ' <"$w/sub.maps")" = " 0 265536 65536 0 365536 65536 " ] ||
	die "subuid: S2's maps: $(cat "$w/sub.maps")"
grep -q 'every one of the 2 id ranges is taken' "$w/sub.err" || die "subuid: S3: $(cat "$w/sub.err")"
[ -z "$(ls "$w/sub")$(ls -A "$w/sub/.ids")" ] || die "subuid: left $(ls -A "$w/sub" "$w/sub/.ids")"
ok "/etc/subuid and /etc/subgid: root's ranges cut in 65536 ids (S2 maps to 265536 and 365536), a third sandbox refused when they are all taken"
# A stale claim (a create or rm that died half way): with every range taken, a create gives
# back the claims older than 10 minutes that no sandbox holds and no process uses; a young one
# (a create under way) and R1's stay. Shown able to fail: without the reclaim R2 is refused.
SBX_NS_DIR=$w/sub2 unshare --mount --propagation private sh -c 'mount --bind "$1/etc" /etc &&
	"$2" sandbox create --image "$3" --name R1 >/dev/null && ln -s gone "$SBX_NS_DIR/.ids/1" &&
	if "$2" sandbox create --image "$3" --name R2 >/dev/null 2>"$1/sub2.refused"; then exit 7; fi &&
	touch -h -d "2 hours ago" "$SBX_NS_DIR/.ids/0" "$SBX_NS_DIR/.ids/1" &&
	"$2" sandbox create --image "$3" --name R2 >/dev/null 2>"$1/sub2.err" &&
	readlink "$SBX_NS_DIR/.ids/0" "$SBX_NS_DIR/.ids/1" && "$2" sandbox rm R1 R2' sh "$w" "$sbx" "$img" \
	>"$w/sub2.out" || die "stale claim: exit $?: $(cat "$w/sub2.err") $(ps -eo pid,uid,gid,stat,etime,comm | awk '$2>=200000 || $3>=200000')"
[ "$(tr '\n' ' ' <"$w/sub2.out")" = "R1 R2 " ] || die "stale claim: the claims: $(cat "$w/sub2.out")"
grep -q 'every one of the 2 id ranges is taken' "$w/sub2.refused" || die "stale claim: the young one: $(cat "$w/sub2.refused")"
[ -z "$(ls "$w/sub2")$(ls -A "$w/sub2/.ids")" ] || die "stale claim: left $(ls -A "$w/sub2" "$w/sub2/.ids")"
ok "a stale id claim (older than 10 minutes, no sandbox, no process) is given back when every range is taken; a young one and a held one are kept"

"$sbx" sandbox rm C T F
[ -z "$(left)" ] && [ -z "$(ls -A "$SBX_NS_DIR/.ids")" ] || die "left: $(ls -A "$SBX_NS_DIR" "$SBX_NS_DIR/.ids")"
# The programs' store (runner/execstore.c): an entry no sandbox links goes with the last rm.
[ -z "$(ls -A "$SBX_NS_DIR/.exec")" ] || die "the store keeps: $(ls -lA "$SBX_NS_DIR/.exec")"
listing "$img" | cmp -s - "$w/img.before" || die "the image changed"
ok "all removed (the programs' store empty too); the image is unchanged"
