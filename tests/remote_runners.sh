#!/usr/bin/env bash
# remote_runners.sh SBX [IMAGES]: the kubectl:POD[/C][@NS] and ssh:[USER@]HOST[:PORT] runners
# end to end, as root, without a cluster: a fake `kubectl` first on PATH checks its argv
# (`exec -i [-n NS] POD [-c C] -- CMD...`, never -t), records it, and runs CMD in a throwaway
# "pod" (a copy of build/images/busybox-x86_64 entered with unshare -m + chroot, its own /proc
# and a tmpfs /dev); a private sshd on 127.0.0.1 (throwaway keys, its own mount namespace with
# a private /tmp and /run) stands for a machine reached by ssh. Checks argv construction,
# injection in one exec and by the older streaming (0755, HELLO's SHA-256), reuse without a
# copy (same inode), stale
# agents replaced, noexec /tmp, no shell, and exec/sh/transfers/TCP forwarding through both. Everything it
# made (temp folders, sshd) goes on exit.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root
sbx=$(realpath "$1")
imgdir=$(realpath "${2:-$top/build/images}")
for img in busybox-x86_64 noshell-x86_64; do
	[ -d "$imgdir/$img" ] || die "no $imgdir/$img (make images)"
done
# sshd's files live outside /tmp: its mount namespace gets a private /tmp.
sw=$(mktemp -d /var/tmp/sbx-remote-ssh-XXXXXX)
sshd_pid=
stop_sshd() {
	if [ -n "$sshd_pid" ]; then
		kill "$sshd_pid" 2>/dev/null || true
		wait "$sshd_pid" 2>/dev/null || true
	fi
	rm -rf "$sw"
}
on_exit stop_sshd
agent=$top/build/agent/x86_64/sbx-agent
sha=$(sha256sum "$agent" | cut -d' ' -f1)
fname=.sbx-agent-${sha:0:12}
export SBX_AGENT_DIR=$top/build/agent

# The Python package over the libsbx.so beside SBX (tests/lib/py_san.sh when it is SAN=1).
. "$top/tests/lib/py_san.sh"
# Regression: the words must come every time (a pipe into grep -q made a SAN build look plain
# now and then under pipefail); the same number as ldd says, 50 times over.
want=0
case $(ldd "$(dirname "$sbx")/libsbx.so") in *libasan*) want=2 ;; esac
for i in $(seq 50); do
	[ "$(py_san_env "$(dirname "$sbx")/libsbx.so" | wc -l)" = $want ] || die "py_san_env: not $want words on call $i"
done
py_provider() { # RUNNER TARGET
	local lib
	lib=$(dirname "$sbx")/libsbx.so
	env PYTHONPATH="$top/python" SBX_LIB="$lib" $(py_san_env "$lib") \
		python3 "$top/tests/lib/py_provider.py" "$1" "$2" "$w/pytree" | grep -qx ok
}
. "$top/tests/lib/fwd_loop.sh"
fwd_loop_serve
mkdir -p "$w/pytree/d" && echo py >"$w/pytree/d/f" && chmod 0640 "$w/pytree/d/f" && ln -s d/f "$w/pytree/l"
mkdir -p "$w/task/sub/deep" "$w/task/empty"
echo hello >"$w/task/a.txt"
printf 'x%.0s' $(seq 1 5000) >"$w/task/sub/big"
# Lines starting with ~. (an ssh escape where one is active) and every byte value.
printf 'a\n~.\n~?\n' >"$w/task/tilde"
python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 64)' >"$w/task/bytes"
echo deep >"$w/task/sub/deep/f"
chmod 0751 "$w/task/sub"
chmod 0600 "$w/task/a.txt"
chmod 0700 "$w/task/empty"
ln -s a.txt "$w/task/link"
roundtrip() { # RUNNER DIR-INSIDE WHAT
	"$sbx" --runner "$1" upload-dir "$w/task" "$2" >/dev/null || die "$3: upload-dir"
	rm -rf "$w/back"
	"$sbx" --runner "$1" download-dir "$2" "$w/back" >/dev/null || die "$3: download-dir"
	diff -r --no-dereference "$w/task" "$w/back" || die "$3: round trip differs"
	[ "$(stat -c %a "$w/back/sub")" = 751 ] && [ "$(stat -c %a "$w/back/a.txt")" = 600 ] &&
		[ "$(stat -c %a "$w/back/empty")" = 700 ] && [ "$(readlink "$w/back/link")" = a.txt ] ||
		die "$3: modes or links"
}

# ---- kubectl ----

mkdir -p "$w/bin" "$w/pods"
log=$w/kubectl.log
cat >"$w/bin/kubectl" <<'FAKE'
#!/bin/bash
# A fake kubectl: `exec -i [-n NS] POD [-c C] -- CMD...` runs CMD chrooted into
# $FAKE_PODS/NS/POD (default namespace "default") in a private mount namespace with its own
# /proc and a tmpfs /dev; anything else is refused (exit 90, a BAD line in the log).
set -eu
printf 'CALL\n%s\n' "$(printf '<%s>' "$@")" >>"$FAKE_LOG"
bad() {
	echo "BAD $*" >>"$FAKE_LOG"
	echo "fake kubectl: $*" >&2
	exit 90
}
[ "${1:-}" = exec ] && [ "${2:-}" = -i ] || bad "expected 'exec -i'"
shift 2
ns=default
if [ "${1:-}" = -n ]; then
	ns=${2:?}
	shift 2
fi
case ${1:-} in '' | -*) bad "expected POD, got '${1:-}'" ;; esac
pod=$1
shift
if [ "${1:-}" = -c ]; then
	case ${2:-} in '' | -*) bad "expected a container after -c" ;; esac
	shift 2
fi
[ "${1:-}" = -- ] || bad "expected --, got '${1:-}'"
shift
[ $# -gt 0 ] || bad "no command"
root=$FAKE_PODS/$ns/$pod
if [ ! -d "$root" ]; then
	echo "Error from server (NotFound): pods \"$pod\" not found" >&2
	exit 1
fi
exec unshare -m sh -c '
	r=$1; shift
	mount -t proc proc "$r/proc" &&
	mount -t tmpfs -o size=1m,mode=0755 pod-dev "$r/dev" &&
	for d in null zero random urandom; do
		: >"$r/dev/$d" && mount --bind "/dev/$d" "$r/dev/$d" || exit 1
	done &&
	if [ -e "$r.noexec-tmp" ]; then
		mount --bind "$r/tmp" "$r/tmp" && mount -o remount,bind,noexec "$r/tmp"
	fi || exit 1
	exec chroot "$r" "$@"' pod "$root" "$@"
FAKE
chmod 0755 "$w/bin/kubectl"
export PATH=$w/bin:$PATH FAKE_LOG=$log FAKE_PODS=$w/pods
pod() { # NS POD [IMAGE]
	mkdir -p "$w/pods/$1"
	cp -a "$imgdir/${3:-busybox-x86_64}" "$w/pods/$1/$2"
}
pod default p1
pod default p2
pod team p3
pod team p4
pod default nx
touch "$w/pods/default/nx.noexec-tmp"
pod default bare noshell-x86_64
[ "$(command -v kubectl)" = "$w/bin/kubectl" ] || die "the fake kubectl is not first on PATH"

in_pod() { # SPEC ARGS...
	local spec=$1
	shift
	"$sbx" --runner "kubectl:$spec" "$@"
}
nocall() { ! grep -q "$1" "$log"; }
ncalls() { grep -c '^CALL$' "$log"; }
# Each spec form: the channel's words; one exec whose shell reports uname -m, receives the
# agent on the same stdin and execs it; never -t.
for c in "p1||" "p2|main|" "p3||team" "p4|side|team"; do
	IFS='|' read -r p ctr ns <<<"$c"
	spec=$p${ctr:+/$ctr}${ns:+@$ns}
	pre="<exec><-i>${ns:+<-n><$ns>}<$p>${ctr:+<-c><$ctr>}<-->"
	: >"$log"
	in_pod "$spec" hello >"$w/hello" || die "kubectl:$spec: hello ($(cat "$log"))"
	grep -qx "sha256 $sha" "$w/hello" || die "kubectl:$spec: HELLO's sha256: $(cat "$w/hello")"
	[ "$(ncalls)" = 1 ] && [ "$(sed -n 2p "$log")" = "$pre<sh><-c><echo \"sbx-machine:\$(uname -m)\"" ] ||
		die "kubectl:$spec: not one exec of sh -c SCRIPT: $(cat "$log")"
	nocall '<-t>' && nocall '^BAD' || die "kubectl:$spec: $(cat "$log")"
	ok "kubectl:$spec: one call 'kubectl exec -i ${ns:+-n $ns }$p ${ctr:+-c $ctr }-- sh -c SCRIPT sh' (uname -m, the agent on the same stdin, exec'd; no -t); HELLO's sha256 is the local agent's"
done

root=$w/pods/default/p1
[ "$(stat -c %a "$root/tmp/$fname")" = 755 ] && cmp -s "$agent" "$root/tmp/$fname" ||
	die "kubectl: injected file"
[ -z "$(find "$root/tmp" -name "$fname.*")" ] || die "kubectl: a temporary left"
before=$(stat -c '%i %Z' "$root/tmp/$fname")
sleep 1
: >"$log"
in_pod p1 hello | grep -qx "sha256 $sha" || die "kubectl: second hello"
[ "$(stat -c '%i %Z' "$root/tmp/$fname")" = "$before" ] || die "kubectl: the agent was copied again"
[ "$(ncalls)" = 1 ] || die "kubectl: reuse took more than one call: $(cat "$log")"
ok "kubectl: first use delivered the agent to the pod's /tmp/$fname (0755, identical bytes, no temporary left); a second use is one call that finds it (same inode and ctime)"
# The older way (SBX_NO_BOOT=1): a survey, sh -c 'cat > tmp && chmod 0755 tmp && mv -f tmp final'.
rm -f "$w/pods/default/p2/tmp/$fname"
: >"$log"
SBX_NO_BOOT=1 in_pod p2/main hello >/dev/null
grep -q "<--><sh><-c><t=.*cat > .*chmod 0755.*mv -f.*><sh></tmp/$fname>\$" "$log" &&
	grep -qF "<sh><-c><echo \"sbx-machine:\$(uname -m)\"; for f in /tmp/.sbx-agent-* " "$log" ||
	die "kubectl: the stream call: $(cat "$log")"
ok "kubectl: SBX_NO_BOOT=1: a survey exec, then streamed through 'kubectl exec -i ... -- sh -c \"cat > tmp && chmod 0755 tmp && mv -f tmp final\" sh /tmp/$fname'"

printf '#!/bin/sh\necho garbage\n' >"$root/tmp/$fname"
chmod 0755 "$root/tmp/$fname"
in_pod p1 hello | grep -qx "sha256 $sha" || die "kubectl: stale script not replaced"
cmp -s "$agent" "$root/tmp/$fname" || die "kubectl: stale script still there"
cp "$top/build/agent/i386/sbx-agent" "$root/tmp/$fname"
in_pod p1 hello | grep -qx "sha256 $sha" || die "kubectl: another agent not replaced"
cmp -s "$agent" "$root/tmp/$fname" || die "kubectl: other agent still there"
ok "kubectl: stale agents replaced: a script, and another agent (i386, a different SHA-256 in HELLO)"

[ "$(in_pod p1 exec -- sh -c 'echo $((6*7)); echo err >&2' 2>/dev/null)" = 42 ] || die "kubectl: exec"
rc=0
in_pod p1 sh 'exit 7' || rc=$?
[ $rc = 7 ] || die "kubectl: sh exit status $rc"
[ "$(in_pod p1 sh 'cat /etc/hostname 2>/dev/null; ls /'| grep -c '^proc$')" = 1 ] || die "kubectl: not in the pod"
ok "kubectl: exec and sh through the pod (stdout, exit status 7)"
roundtrip kubectl:p1 /work/task kubectl
diff -r --no-dereference "$w/task" "$root/work/task" || die "kubectl: the pod's copy differs"
ok "kubectl: upload-dir / download-dir round trip (contents, all 256 byte values, modes 751/600/700, symlink), landed in the pod"
o=$(fwd_loop 7501 kubectl:p1) || die "kubectl: forward: $o"
ok "kubectl: TCP forwarding through the pod's agent: 8 MiB in by an --in forward and out again by an --out one, the count back after the half-close ($o)"
py_provider kubectl p1 || die "kubectl: the Python provider"
ok "kubectl: sbx.providers.SbxProvider('kubectl') on target p1: exec, remote_kind, upload_dir/download_dir, connect from the serialized handle; close leaves the pod"

in_pod nx hello | grep -qx "sha256 $sha" || die "kubectl: noexec hello"
nxr=$w/pods/default/nx
[ -x "$nxr/var/tmp/$fname" ] && [ ! -e "$nxr/dev/shm" ] || die "kubectl: noexec: not in /var/tmp"
[ -z "$(ls -A "$nxr/tmp")" ] || die "kubectl: noexec: left in /tmp: $(ls -A "$nxr/tmp")"
before=$(stat -c '%i %Z' "$nxr/var/tmp/$fname")
sleep 1
: >"$log"
in_pod nx hello | grep -qx "sha256 $sha" || die "kubectl: noexec second hello"
[ "$(stat -c '%i %Z' "$nxr/var/tmp/$fname")" = "$before" ] || die "kubectl: noexec: copied again"
[ "$(ncalls)" = 1 ] || die "kubectl: noexec: reuse took more than one call"
ok "kubectl: noexec /tmp: nothing left there (a copy runs --version before taking its name); the agent runs from /var/tmp/$fname, and a later use finds it there in one call"

rc=0
in_pod bare hello 2>"$w/err" >/dev/null || rc=$?
[ $rc = 3 ] && grep -q "uname -m" "$w/err" || die "kubectl: no shell: exit $rc $(cat "$w/err")"
cp "$agent" "$w/pods/default/bare/agent"
in_pod bare --agent /agent hello | grep -qx "sha256 $sha" || die "kubectl: no shell with --agent"
in_pod bare --agent /agent exec -- /hello >/dev/null || die "kubectl: no shell: exec /hello"
rc=0
in_pod nosuchpod hello 2>"$w/err" >/dev/null || rc=$?
[ $rc = 3 ] && grep -q 'not found' "$w/err" || die "kubectl: absent pod: exit $rc $(cat "$w/err")"
rc=0
in_pod -bad hello 2>/dev/null || rc=$?
[ $rc = 2 ] || die "kubectl: a pod named like an option: exit $rc"
ok "kubectl: no shell in the image: unavailable (exit 3, says why); --agent PATH works there; an absent pod is unavailable; '-bad' is refused (usage)"

# ---- ssh ----

sshd=/usr/sbin/sshd
[ -x $sshd ] || die "no $sshd (toolchain/deps.sh installs openssh-server)"
ssh-keygen -q -t ed25519 -N '' -f "$sw/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$sw/id"
cp "$sw/id.pub" "$sw/authorized_keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$sw/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $sw/host_key
PidFile none
AuthorizedKeysFile $sw/authorized_keys
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AllowTcpForwarding no
X11Forwarding no
PrintMotd no
LogLevel ERROR
EOF
echo "[127.0.0.1]:$port $(cut -d' ' -f1-2 "$sw/host_key.pub")" >"$sw/known_hosts"
cat >"$sw/ssh_config" <<EOF
Host sbx-test-alias
	HostName 127.0.0.1
	Port $port
Host *
	User root
	IdentityFile $sw/id
	IdentitiesOnly yes
	UserKnownHostsFile $sw/known_hosts
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	LogLevel ERROR
EOF
export SBX_SSH_CONFIG=$sw/ssh_config
# sshd in its own mount namespace: a private /tmp (where the agent goes) and /run (its
# privilege separation folder), seen from here through /proc/PID/root.
unshare -m sh -c 'mount -t tmpfs -o mode=1777 sbx-ssh-tmp /tmp &&
	mount -t tmpfs -o mode=0755 sbx-ssh-run /run && mkdir -m 0755 /run/sshd &&
	exec "$0" -D -e -f "$1"' $sshd "$sw/sshd_config" 2>"$sw/sshd.log" &
sshd_pid=$!
for _ in $(seq 1 100); do
	ssh -F "$sw/ssh_config" -p "$port" -o BatchMode=yes 127.0.0.1 true 2>/dev/null && break
	kill -0 $sshd_pid 2>/dev/null || die "sshd did not start: $(cat "$sw/sshd.log")"
	sleep 0.1
done
ssh -F "$sw/ssh_config" -p "$port" -o BatchMode=yes 127.0.0.1 true || die "ssh to the private sshd: $(cat "$sw/sshd.log")"
there=/proc/$sshd_pid/root
[ -d "$there/run/sshd" ] && [ ! -e "$there/tmp/$(basename "$w")" ] || die "sshd's private /tmp"
ok "ssh: a private sshd on 127.0.0.1:$port (throwaway keys, own /tmp and /run); SBX_SSH_CONFIG=$sw/ssh_config"

sp=root@127.0.0.1:$port
in_ssh() { "$sbx" --runner "ssh:$sp" "$@"; }
in_ssh hello >"$w/hello" || die "ssh: hello"
grep -qx "sha256 $sha" "$w/hello" || die "ssh: HELLO's sha256: $(cat "$w/hello")"
[ "$(stat -c %a "$there/tmp/$fname")" = 755 ] && cmp -s "$agent" "$there/tmp/$fname" ||
	die "ssh: injected file"
ok "ssh:$sp: first use delivered the agent to /tmp/$fname (0755, identical bytes); HELLO's sha256 is the local agent's"
before=$(stat -c '%i %Z' "$there/tmp/$fname")
sleep 1
in_ssh hello | grep -qx "sha256 $sha" || die "ssh: second hello"
[ "$(stat -c '%i %Z' "$there/tmp/$fname")" = "$before" ] || die "ssh: the agent was copied again"
ok "ssh: a second use reuses the agent (same inode and ctime)"
printf '#!/bin/sh\necho garbage\n' >"$there/tmp/$fname"
in_ssh hello | grep -qx "sha256 $sha" || die "ssh: stale not replaced"
cmp -s "$agent" "$there/tmp/$fname" || die "ssh: stale file still there"
ok "ssh: a stale file at /tmp/$fname is replaced"
for spec in "127.0.0.1:$port" "[127.0.0.1]:$port" sbx-test-alias; do
	"$sbx" --runner "ssh:$spec" hello | grep -qx "sha256 $sha" || die "ssh:$spec: hello"
done
ok "ssh: the spec forms HOST:PORT (user from the config), [HOST]:PORT, and a config alias"

[ "$(in_ssh exec -- sh -c 'echo $((6*7)); echo err >&2' 2>/dev/null)" = 42 ] || die "ssh: exec"
rc=0
in_ssh sh 'exit 7' || rc=$?
[ $rc = 7 ] || die "ssh: sh exit status $rc"
[ "$(in_ssh exec -- echo 'a b' '$HOME' "it's")" = "a b \$HOME it's" ] || die "ssh: argv through the agent is not re-split"
ok "ssh: exec and sh (stdout, exit status 7; argv words with spaces, \$ and quotes arrive as they are)"
roundtrip "ssh:$sp" /tmp/work/task ssh
diff -r --no-dereference "$w/task" "$there/tmp/work/task" || die "ssh: the far copy differs"
ok "ssh: upload-dir / download-dir round trip (all 256 byte values, lines starting with ~., modes, symlink)"
o=$(fwd_loop 7502 "ssh:$sp") || die "ssh: forward: $o"
ok "ssh: TCP forwarding through the agent over ssh: 8 MiB in by an --in forward and out again by an --out one, the count back after the half-close ($o)"
py_provider ssh "$sp" || die "ssh: the Python provider"
ok "ssh: sbx.providers.SbxProvider('ssh') on target $sp: exec, remote_kind, upload_dir/download_dir, connect from the serialized handle"

# The agent's path is quoted for the remote shell: a folder with a space and a quote.
odd="/tmp/d i'r"
mkdir -p "$there$odd"
cp "$agent" "$there$odd/agent"
in_ssh --agent "$odd/agent" hello | grep -qx "sha256 $sha" || die "ssh: --agent with a space and a quote"
ok "ssh: --agent \"$odd/agent\" (space and quote) reaches the agent: the path is shell-quoted"

rc=0
"$sbx" --runner "ssh:nobody@127.0.0.1:$port" hello 2>"$w/err" >/dev/null || rc=$?
[ $rc = 3 ] && grep -q 'Permission denied' "$w/err" || die "ssh: refused login: exit $rc $(cat "$w/err")"
rc=0
"$sbx" --runner "ssh:-oProxyCommand=touch${w}/pwned" hello 2>/dev/null || rc=$?
[ $rc = 2 ] && [ ! -e "$w/pwned" ] || die "ssh: a host like an option: exit $rc"
rc=0
"$sbx" --runner "ssh:127.0.0.1:99999" hello 2>/dev/null || rc=$?
[ $rc = 2 ] || die "ssh: bad port: exit $rc"
ok "ssh: a refused login is unavailable (exit 3, ssh's message); a host like an option and a bad port are refused (usage)"

# ---- figures (ssh to 127.0.0.1: the cost of the channel itself, not of a network) ----
rm -f "$there/tmp/$fname"
t0=$(now)
ssh -F "$sw/ssh_config" -p "$port" -T -o BatchMode=yes 127.0.0.1 true
t1=$(now)
in_ssh hello >/dev/null
t2=$(now)
in_ssh hello >/dev/null
t3=$(now)
echo "  figure: ssh true $(calc "round($t1-$t0,3)") s; injection + first HELLO $(calc "round($t2-$t1,3)") s; later HELLO $(calc "round($t3-$t2,3)") s"
