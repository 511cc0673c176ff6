#!/usr/bin/env bash
# podman.sh SBX: the podman:NAME runner (docker:NAME with SBX_ENGINE=docker) end to end, as root, with real OCI containers (runc,
# cgroupfs). Imports build/images/{busybox,debian,noshell}-x86_64.tar under names of its own;
# for each: create, first use is the resident agent (init's socket, no podman call; HELLO's
# SHA-256 is the local agent's), the exec way into the same container (SBX_RESIDENT=0: init's
# own binary, then the direct socket), the socket removed inside, probes, exec, an upload-dir/download-dir round trip with modes, a supervised run with a
# signed receipt (images with a shell). Injection into containers sbx did not create: missing
# (delivered in one exec), reused, stale (garbage and another agent at the expected path),
# noexec /tmp, the older ways (streaming, `podman cp`), no shell; podman calls are counted
# through a logging wrapper. Measures injection + first HELLO against `podman exec N true`,
# and 1000 kind probes over one session against `podman exec N sh -c '[ -d /tmp ]'`. Every
# container and image it made is removed on exit.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root podman
sbx=$(realpath "$1")
imgdir=$(realpath "${2:-$top/build/images}")
export SBX_PODMAN_DIR=$w/hints
p=t$$ # prefix of every container and image made here
. "$top/tests/lib/podman.sh"
# podman names imported images localhost/NAME, docker NAME.
localhost=localhost/
[ "$eng" = podman ] || localhost=""
on_exit 'podman_cleanup "$p"'
agent=$top/build/agent/x86_64/sbx-agent
sha=$(sha256sum "$agent" | cut -d' ' -f1)
fname=.sbx-agent-${sha:0:12}
# A $eng that logs its subcommand: in_podman_logged runs sbx with it, calls prints what it
# was asked.
mkdir -p "$w/bin"
# The direct socket's background `inspect --format '{{.State.Pid}} {{.Id}}'` is logged as "pid", apart: it runs
# alongside the session's exec, so its place in the order is not fixed.
cat >"$w/bin/$eng" <<EOF
#!/bin/sh
case "\$1 \${5:-}" in "inspect {{.State.Pid}}"*) echo pid >>$w/pids ;; *) echo "\$1" >>$w/calls ;; esac
exec $(command -v $eng) "\$@"
EOF
chmod 0755 "$w/bin/$eng"
in_podman_logged() { : >"$w/calls"; : >"$w/pids"; PATH="$w/bin:$PATH" in_podman "$@"; }
calls() { paste -sd' ' "$w/calls"; }
pids() { wc -l <"$w/pids"; }
# A container sbx did not create (its PID 1 is the image's program, no agent inside).
lim() { local n; n=$(ulimit "$1"); [ "$n" = unlimited ] || [ "$n" -gt "$2" ] && n=$2; echo "$n"; }
foreign() { # NAME IMAGE [ENGINE ARGS...] -- CMD...
	local n=$1 img=$2 a=()
	shift 2
	while [ "$1" != -- ]; do a+=("$1"); shift; done
	shift
	podman_run -d --name "$n" --network none \
		--ulimit "nofile=$(lim -n 20000):$(lim -n 20000)" --ulimit "nproc=$(lim -u 1000):$(lim -u 1000)" \
		"${a[@]}" "$img" "$@" >/dev/null || die "$eng run $n"
}
inside_sha() { $eng exec "$1" sha256sum "$2" | cut -d' ' -f1; }
where() { # where the agent file is in a BusyBox container
	$eng exec "$1" sh -c "for d in /tmp /dev/shm /var/tmp /run ''; do [ -f \$d/$fname ] && echo \$d/$fname; done; true"
}

# Our own names for the tarballs (and their .sbx-image folders), so cleanup removes only ours.
for img in busybox-x86_64 debian-x86_64 noshell-x86_64; do
	[ -f "$imgdir/$img.tar" ] || die "no $imgdir/$img.tar (make images)"
	ln -s "$imgdir/$img.tar" "$w/$p-$img.tar"
	ln -s "$imgdir/$img" "$w/$p-$img"
done

mkdir -p "$w/task/sub/deep" "$w/task/empty"
echo hello >"$w/task/a.txt"
printf 'x%.0s' $(seq 1 5000) >"$w/task/sub/big"
echo deep >"$w/task/sub/deep/f"
chmod 0751 "$w/task/sub"
chmod 0600 "$w/task/a.txt"
chmod 0700 "$w/task/empty"
ln -s a.txt "$w/task/link"

for img in busybox-x86_64 debian-x86_64 noshell-x86_64; do
	n=$p-${img%%-*}
	[ "$("$sbx" sandbox create --runner $eng --image "$w/$p-$img.tar" --name "$n")" = "$eng:$n" ] ||
		die "$img: create"
	"$sbx" sandbox status "$eng:$n" | grep -qE "^$eng:$n running( pid [0-9]+)? arch x86_64 " || die "$img: status"
	ok "$img: imported as sbx-$p-$img, container $n created and running (init is the agent)"
	in_podman_logged "$n" hello >"$w/hello" || die "$img: hello"
	grep -qx "sha256 $sha" "$w/hello" || die "$img: HELLO's sha256 is not the local agent's: $(cat "$w/hello")"
	[ -z "$(calls)" ] && [ "$(pids)" = 0 ] && grep -qx "channel resident" "$w/hello" ||
		die "$img: first use took $eng calls: $(calls), $(pids) pid queries, $(tail -1 "$w/hello")"
	ok "$img: first use is the resident agent (init's socket, no $eng call at all); HELLO's sha256 is the local agent's"
	# The exec way into the same container (SBX_RESIDENT=0): without a shell the one-exec way
	# fails and inspect names init's binary (label sbx.agent).
	want=exec
	[ "$img" = noshell-x86_64 ] && want="exec inspect exec"
	export SBX_RESIDENT=0
	in_podman_logged "$n" hello >"$w/hello" || die "$img: hello (exec)"
	[ "$(calls)" = "$want" ] && [ "$(pids)" = 0 ] && grep -qx "channel direct" "$w/hello" ||
		die "$img: exec way: $(calls), $(pids) pid queries, $(tail -1 "$w/hello")"
	rm "$SBX_PODMAN_DIR/$eng-$n.pid"
	in_podman_logged "$n" hello >"$w/hello"
	[ "$(calls)" = "$want" ] && [ "$(pids)" = 0 ] && grep -qx "channel exec" "$w/hello" ||
		die "$img: one-shot, PID forgotten: $(calls), $(pids) pid queries, $(tail -1 "$w/hello")"
	echo '{"id":1,"op":"hello"}' | in_podman_logged "$n" session >"$w/hello"
	[ "$(calls)" = "$want" ] && [ "$(pids)" = 1 ] && grep -q '"channel":"direct"' "$w/hello" ||
		die "$img: session: $(calls), $(pids) pid queries, $(cat "$w/hello")"
	in_podman_logged "$n" hello >"$w/hello"
	[ "$(calls)" = "$want" ] && [ "$(pids)" = 0 ] && grep -qx "channel direct" "$w/hello" ||
		die "$img: a later use: $(calls), $(pids) pid queries, $(tail -1 "$w/hello")"
	[ "$(SBX_DIRECT=0 in_podman "$n" hello | tail -1)" = "channel exec" ] || die "$img: SBX_DIRECT=0"
	[ "$(in_podman "$n" kind "/$fname")" = file ] && [ "$(in_podman "$n" kind "/tmp/$fname")" = absent ] ||
		die "$img: the agent should run from init's /$fname, nothing copied"
	unset SBX_RESIDENT
	ok "$img: the exec way (SBX_RESIDENT=0) runs init's own binary /$fname (nothing copied) with $eng calls: $want, then moves to the direct socket; with the PID forgotten a one-shot stays on $eng exec and a session asks for it once (alongside the exec); SBX_DIRECT=0 stays on $eng exec"
	[ "$(in_podman "$n" hello | tail -1)" = "channel resident" ] || die "$img: resident again"
	if [ "$img" != noshell-x86_64 ]; then
		$eng exec "$n" rm /.sbx-serve/s
		in_podman_logged "$n" hello >"$w/hello"
		[ "$(calls)" = exec ] && grep -qx "channel direct" "$w/hello" ||
			die "$img: socket removed: $(calls), $(tail -1 "$w/hello")"
		ok "$img: the resident socket removed inside the container: one $eng exec, then the direct socket"
	fi
	[ "$(in_podman "$n" kind /etc)" = dir ] && [ "$(in_podman "$n" kind /nonexistent)" = absent ] &&
		[ "$(in_podman "$n" resolve /proc/self/..)" = /proc ] || die "$img: probes"
	ok "$img: probes (kind dir/absent, resolve)"
	if [ "$img" = noshell-x86_64 ]; then
		in_podman "$n" exec -- /hello >"$w/out" || die "$img: exec /hello"
		rc=0
		in_podman "$n" sh 'true' 2>/dev/null || rc=$?
		[ $rc = 127 ] || die "$img: sh should not start (exit $rc)"
		ok "$img: exec /hello works; sh is not there (127)"
	else
		[ "$(in_podman "$n" exec -- sh -c 'echo $((6*7)); echo err >&2' 2>/dev/null)" = 42 ] || die "$img: exec"
		rc=0
		in_podman "$n" exec -- sh -c 'exit 7' || rc=$?
		[ $rc = 7 ] || die "$img: exit status $rc"
		ok "$img: exec (stdout, exit status 7)"
	fi
	in_podman "$n" upload-dir "$w/task" /work/task >/dev/null || die "$img: upload-dir"
	rm -rf "$w/back"
	in_podman "$n" download-dir /work/task "$w/back" >/dev/null || die "$img: download-dir"
	diff -r --no-dereference "$w/task" "$w/back" || die "$img: round trip differs"
	[ "$(stat -c %a "$w/back/sub")" = 751 ] && [ "$(stat -c %a "$w/back/a.txt")" = 600 ] &&
		[ "$(stat -c %a "$w/back/empty")" = 700 ] && [ "$(readlink "$w/back/link")" = a.txt ] ||
		die "$img: modes or links"
	ok "$img: upload-dir / download-dir round trip (contents, modes 751/600/700, symlink)"
	if [ "$img" = busybox-x86_64 ]; then
		# The host's side of an upload on the resident agent (no child process of sbx):
		# /proc/PID/io of a shell that reaped sbx counts read()/write() bytes, not spliced
		# ones. The archive is packed from pread data into the packing pipe and spliced on
		# to the socket; a host that reads the pipe into memory whenever its stage is full
		# (it read 20 of 72 MiB so) counts more.
		mkdir -p "$w/bulk"
		head -c $((64 << 20)) /dev/urandom >"$w/bulk/a"
		bulk=$((64 << 20))
		bash -c '"$0" --runner "$3:$1" upload-dir "$2" /tmp/bulk >/dev/null &&
			grep -E "^(rchar|wchar)" /proc/$$/io' "$sbx" "$n" "$w/bulk" "$eng" >"$w/io" ||
			die "$img: bulk upload"
		hr=$(sed -n 's/^rchar: //p' "$w/io") hw=$(sed -n 's/^wchar: //p' "$w/io")
		[ "$($eng exec "$n" sha256sum /tmp/bulk/a | cut -d' ' -f1)" = "$(sha256sum "$w/bulk/a" | cut -d' ' -f1)" ] ||
			die "$img: bulk upload differs"
		[ "$hr" -lt $((bulk + (4 << 20))) ] && [ "$hw" -lt $((bulk + (4 << 20))) ] ||
			die "$img: upload of $bulk bytes: the host read $hr and wrote $hw (a copy through its memory)"
		$eng exec "$n" rm -rf /tmp/bulk
		ok "$img: a 64 MiB upload on the resident agent: the host reads $((hr >> 20)) MiB, writes $((hw >> 20)) MiB (the files once, the pipe once; the rest spliced)"
	fi
	if [ "$img" != noshell-x86_64 ]; then
		in_podman "$n" run --run-dir /tmp/s1 --timeout 5 -- sh -c 'sleep 100 & exit 0' >"$w/receipt" ||
			die "$img: run"
		grep -q '"termination_witnessed":true' "$w/receipt" && grep -q '"residual":\[\]' "$w/receipt" ||
			die "$img: receipt $(cat "$w/receipt")"
		in_podman "$n" receipt --run-dir /tmp/s1 >/dev/null || die "$img: the receipt does not verify"
		[ "$(in_podman "$n" exec -- sh -c 'ps -o comm 2>/dev/null | grep -c "^sleep" || true')" = 0 ] ||
			die "$img: the background sleep survived"
		ok "$img: run --run-dir (sleep 100 & exit 0): signed receipt verifies, termination witnessed, nothing left"
	fi
done

# A resident agent that is not this host's (another build: one byte more) is not used: the
# exec way delivers this host's agent.
mkdir -p "$w/other/x86_64"
{ cat "$agent"; printf x; } >"$w/other/x86_64/sbx-agent"
chmod 0755 "$w/other/x86_64/sbx-agent"
osha=$(sha256sum "$w/other/x86_64/sbx-agent" | cut -d' ' -f1)
SBX_AGENT_DIR=$w/other in_podman "$p-noshell" hello >"$w/hello"
grep -qx "sha256 $osha" "$w/hello" && ! grep -qx "channel resident" "$w/hello" ||
	die "another build: $(cat "$w/hello")"
[ "$(in_podman "$p-noshell" hello | tail -1)" = "channel resident" ] || die "another build: resident again"
ok "a host with another agent build does not take the resident agent (its digest differs): the exec way delivers its own; this host's still takes it"
n=$p-wd
"$sbx" sandbox create --runner $eng --image "sbx-$p-busybox-x86_64" --name "$n" --engine-arg --workdir=/etc >/dev/null ||
	die "workdir: create"
[ "$(in_podman "$n" hello | tail -1)" = "channel resident" ] && [ "$(in_podman "$n" exec -- pwd)" = /etc ] &&
	[ "$(SBX_RESIDENT=0 in_podman "$n" exec -- pwd)" = /etc ] || die "workdir: a command does not start in /etc"
"$sbx" sandbox rm "$eng:$n" >/dev/null
ok "a command started through the resident agent starts in the container's working folder (--workdir /etc), as through $eng exec"

# A tarball is imported once per content: a second create from the same bytes runs no import
# (one image inspect finds sbx-BASE:SHA16); other bytes under the same basename are imported
# as an image of their own, and sbx-BASE (latest) follows the newest import.
create_logged() { : >"$w/calls"; PATH="$w/bin:$PATH" "$sbx" sandbox create --runner $eng "$@" >/dev/null; }
tsha=$(sha256sum "$imgdir/busybox-x86_64.tar" | cut -d' ' -f1)
create_logged --image "$w/$p-busybox-x86_64.tar" --name "$p-again" || die "import once: create"
! grep -qx import "$w/calls" && grep -qx image "$w/calls" || die "import once: same tarball: $(calls)"
[ "$($eng inspect --format '{{.Config.Image}}' "$p-again")" = "${localhost}sbx-$p-busybox-x86_64:${tsha:0:16}" ] ||
	die "import once: image $($eng inspect --format '{{.Config.Image}}' "$p-again")"
[ "$($eng image inspect --format '{{index .Config.Labels "sbx.tarball"}}' "sbx-$p-busybox-x86_64:${tsha:0:16}")" = "$tsha" ] ||
	die "import once: label"
[ "$(in_podman "$p-again" hello | tail -1)" = "channel resident" ] || die "import once: hello"
mkdir -p "$w/v2"
cp "$imgdir/busybox-x86_64.tar" "$w/v2/$p-busybox-x86_64.tar"
mkdir -p "$w/v2x/etc" && echo two >"$w/v2x/etc/sbx-version" && tar -C "$w/v2x" -rf "$w/v2/$p-busybox-x86_64.tar" ./etc/sbx-version
ln -s "$imgdir/busybox-x86_64" "$w/v2/$p-busybox-x86_64"
vsha=$(sha256sum "$w/v2/$p-busybox-x86_64.tar" | cut -d' ' -f1)
create_logged --image "$w/v2/$p-busybox-x86_64.tar" --name "$p-v2" || die "import once: create v2"
grep -qx import "$w/calls" || die "import once: other bytes not imported: $(calls)"
[ "$(in_podman "$p-v2" exec -- cat /etc/sbx-version)" = two ] && [ "$(in_podman "$p-again" kind /etc/sbx-version)" = absent ] ||
	die "import once: the two containers should hold their own tarball's files"
[ "$($eng image inspect --format '{{.Id}}' "sbx-$p-busybox-x86_64")" = "$($eng image inspect --format '{{.Id}}' "sbx-$p-busybox-x86_64:${vsha:0:16}")" ] ||
	die "import once: sbx-$p-busybox-x86_64 (latest) is not the newest import"
"$sbx" sandbox rm "$eng:$p-again" >/dev/null && "$sbx" sandbox rm "$eng:$p-v2" >/dev/null
ok "a tarball is imported once per content: a second create from the same bytes runs no import (sbx-BASE:SHA16 found, labelled sbx.tarball); other bytes under the same name get their own image, and sbx-BASE follows the newest"

# ---- injection into containers sbx did not create (BusyBox, shell-less) ----
bb=sbx-$p-busybox-x86_64
n=$p-f1
foreign "$n" "$bb" -- sleep 1000000
in_podman_logged "$n" hello | grep -qx "sha256 $sha" || die "missing: hello"
[ "$(calls)" = exec ] || die "missing: $eng calls: $(calls)"
[ "$(where "$n")" = "/tmp/$fname" ] && [ "$(inside_sha "$n" "/tmp/$fname")" = "$sha" ] &&
	[ "$($eng exec "$n" stat -c %a "/tmp/$fname")" = 755 ] || die "missing: agent at $(where "$n")"
[ -z "$($eng exec "$n" sh -c 'ls -a /tmp | grep "^\.sbx-agent-.*\." || true')" ] || die "missing: a temporary left"
ok "missing: delivered and started in one $eng exec (sh reports uname -m, receives the agent on the same stdin): /tmp/$fname 0755, identical bytes, no temporary left"
before=$($eng exec "$n" stat -c '%i %Z' "/tmp/$fname")
sleep 1
in_podman_logged "$n" hello >/dev/null
[ "$(calls)" = exec ] && [ "$($eng exec "$n" stat -c '%i %Z' "/tmp/$fname")" = "$before" ] ||
	die "reuse: copied again or more calls: $(calls)"
ok "reuse: a second connection is one $eng exec that finds /tmp/$fname (same inode and ctime)"
$eng exec "$n" sh -c "printf '#!/bin/sh\necho garbage\n' > /tmp/$fname; chmod 0755 /tmp/$fname"
in_podman "$n" hello | grep -qx "sha256 $sha" || die "stale script not replaced"
[ "$(inside_sha "$n" "/tmp/$fname")" = "$sha" ] || die "stale file still there"
ok "stale: a script planted at /tmp/$fname (it prints garbage where frames belong) is replaced; HELLO matches"
$eng cp "$top/build/agent/i386/sbx-agent" "$n:/tmp/$fname"
[ "$(inside_sha "$n" "/tmp/$fname")" != "$sha" ] || die "plant"
in_podman "$n" hello | grep -qx "sha256 $sha" || die "another agent not replaced"
[ "$(inside_sha "$n" "/tmp/$fname")" = "$sha" ] || die "other agent still there"
ok "stale: another agent (i386, a different SHA-256) at the expected path answers HELLO; replaced"
$eng exec "$n" rm -f "/tmp/$fname"
in_podman_logged "$n" hello | grep -qx "sha256 $sha" || die "missing agent"
[ "$(calls)" = exec ] && [ "$(where "$n")" = "/tmp/$fname" ] || die "deleted: $(calls)"
ok "missing again: the agent deleted inside the container is delivered again in one exec"

n=$p-noexec
foreign "$n" "$bb" --tmpfs=/tmp:rw,noexec -- sleep 1000000
$eng exec "$n" grep -q ' /tmp tmpfs .*noexec' /proc/mounts || die "no noexec /tmp"
in_podman_logged "$n" hello | grep -qx "sha256 $sha" || die "noexec: hello"
at=$(where "$n")
case $at in "" | /tmp/* | /dev/shm/*) die "noexec: agent at '$at'" ;; esac
[ "$(calls)" = exec ] && [ -z "$($eng exec "$n" sh -c 'ls -a /tmp /dev/shm | grep sbx-agent || true')" ] ||
	die "noexec: $(calls), or something left in /tmp or /dev/shm"
ok "noexec /tmp (--tmpfs /tmp:rw,noexec; /dev/shm is noexec too): one exec; the agent runs from $at, nothing left in /tmp or /dev/shm"

n=$p-stream
foreign "$n" "$bb" -- sleep 1000000
SBX_PODMAN_COPY=stream in_podman "$n" hello | grep -qx "sha256 $sha" || die "stream: hello"
[ "$($eng exec "$n" stat -c %a "/tmp/$fname")" = 755 ] || die "stream: mode"
ok "the older way, without $eng cp: streamed through sh -c 'cat > tmp && chmod && mv' (0755); HELLO matches"
n=$p-cp
foreign "$n" "$bb" -- sleep 1000000
: >"$w/calls"
SBX_NO_BOOT=1 PATH="$w/bin:$PATH" in_podman "$n" hello | grep -qx "sha256 $sha" || die "cp: hello"
[ "$(calls)" = "inspect image cp exec" ] && [ "$(inside_sha "$n" "/tmp/$fname")" = "$sha" ] ||
	die "cp: $eng calls: $(calls)"
ok "without the one-exec way (SBX_NO_BOOT=1): inspect, image inspect, $eng cp, exec; the agent at /tmp/$fname"

n=$p-noshell2
foreign "$n" "sbx-$p-noshell-x86_64" -- /hello --wait
rc=0
SBX_PODMAN_COPY=stream in_podman "$n" hello >/dev/null 2>&1 || rc=$?
[ $rc = 3 ] || die "noshell: streaming should fail without a shell (exit $rc)"
in_podman_logged "$n" hello | grep -qx "sha256 $sha" || die "noshell: native copy"
[ "$(calls)" = "exec inspect image cp exec" ] && [ "$(in_podman "$n" kind "/tmp/$fname")" = file ] ||
	die "noshell: $eng calls: $(calls)"
ok "no shell: the one-exec way and streaming cannot work (streaming: unavailable, exit 3); the native copy does (exec refused, inspect, image inspect, $eng cp, exec)"

# An engine that hangs when asked for the container's PID: killed (with its children) after
# SBX_PODMAN_PID_WAIT seconds; the session goes on over $eng exec.
mkdir -p "$w/hang"
cat >"$w/hang/$eng" <<EOF
#!/bin/sh
case "\$1 \${5:-}" in "inspect {{.State.Pid}}"*) echo \$\$ >$w/hang/pid; exec sleep 1000 ;; esac
exec $(command -v $eng) "\$@"
EOF
chmod 0755 "$w/hang/$eng"
n=$p-hang
foreign "$n" "$bb" -- sleep 1000000
t0=$(now)
out=$(echo '{"id":1,"op":"hello"}' | SBX_PODMAN_PID_WAIT=1 PATH="$w/hang:$PATH" in_podman "$n" session)
t1=$(now)
echo "$out" | grep -q '"channel":"exec"' || die "hang: $out"
calc "$t1 - $t0 < 10" | grep -qx True || die "hang: took $(calc "$t1 - $t0") s"
! kill -0 "$(cat "$w/hang/pid")" 2>/dev/null || die "hang: the hung inspect is still running"
ok "a hung engine asked for the PID is killed after SBX_PODMAN_PID_WAIT (1 s here, 20 by default); the session stays on $eng exec"

rc=0
in_podman "$p-absent" hello 2>/dev/null || rc=$?
[ $rc = 3 ] || die "absent container: exit $rc"
$eng stop -t 0 "$p-stream" >/dev/null 2>&1 || true
rc=0
in_podman "$p-stream" hello 2>"$w/err" || rc=$?
[ $rc = 3 ] && grep -q "is exited" "$w/err" || die "stopped container: exit $rc $(cat "$w/err")"
rc=0
"$sbx" sandbox status "$eng:$p-stream" >/dev/null || rc=$?
[ $rc = 1 ] || die "status of a stopped container: $rc"
ok "absent and stopped containers: unavailable (exit 3); status exits 1"

# ---- figures ----
n=$p-bench
foreign "$n" "$bb" -- sleep 1000000
t0=$(now)
$eng exec "$n" true
t1=$(now)
in_podman "$n" hello >/dev/null
t2=$(now)
in_podman "$n" hello >/dev/null
t3=$(now)
echo "  figure: $eng exec N true $(calc "round($t1-$t0,3)") s; injection + first HELLO $(calc "round($t2-$t1,3)") s (x$(calc "round(($t2-$t1)/($t1-$t0),1)")); later HELLO $(calc "round($t3-$t2,3)") s"
for i in $(seq 1 1000); do echo "{\"id\":$i,\"op\":\"kind\",\"path\":\"/tmp\"}"; done >"$w/probes"
t0=$(now)
in_podman "$n" session <"$w/probes" >"$w/answers"
t1=$(now)
[ "$(grep -c '"kind":"dir"' "$w/answers")" = 1000 ] || die "1000 probes"
for i in $(seq 1 20); do $eng exec "$n" sh -c '[ -d /tmp ]'; done
t2=$(now)
per_s=$(calc "($t1-$t0)/1000")
per_p=$(calc "($t2-$t1)/20")
echo "  figure: 1000 kind probes over one session $(calc "round($t1-$t0,3)") s ($(calc "round($per_s*1e6)") us each, session start included); $eng exec sh -c '[ -d /tmp ]' $(calc "round($per_p*1e3,1)") ms each; x$(calc "round($per_p/$per_s)") per probe"
ok "figures measured (1000 answers, all dir)"

for c in busybox debian noshell f1 noshell2 noexec stream cp hang bench; do "$sbx" sandbox rm "$eng:$p-$c"; done
"$sbx" sandbox rm "$eng:$p-busybox"
[ "$("$sbx" sandbox status "$eng:$p-busybox" || true)" = "$eng:$p-busybox absent" ] || die "rm"
ok "sandbox rm removes containers; rm of an absent one succeeds"
