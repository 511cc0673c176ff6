#!/bin/bash
# engine_host.sh SBX: where the podman and docker engines are, as sbx sees it. For each engine
# (docker when one answers): its socket given as $CONTAINER_HOST / $DOCKER_HOST = unix://PATH
# (a podman service of our own; the docker engine of tests/lib/docker.sh) is a local engine:
# the first use is the resident agent, the exec way moves to the direct socket. The same
# engine reached through tcp:// (a forwarder of our own) is remote: create and every use work
# through exec alone, no PID asked. A local socket whose engine gives a PID that is not the
# container's (a socket forwarding to another machine) is not taken for local: neither socket.
# Shown able to fail: with engine_local() back to the old rule (any $DOCKER_HOST /
# $CONTAINER_HOST is remote) the unix:// checks see "channel exec".
. "$(dirname "$0")/lib/suite.sh"
suite_begin root podman
sbx=$(realpath "$1")
imgdir=$top/build/images
export SBX_PODMAN_DIR=$w/hints
p=eh$$
engines=podman
docker info >/dev/null 2>&1 && engines="podman docker"
cleanup() {
	local e
	for e in $engines; do eng=$e podman_cleanup "$p"; done
	[ -z "${svc:-}" ] || kill "$svc" 2>/dev/null || true
	[ -z "${fwd:-}" ] || kill "$fwd" 2>/dev/null || true
}
. "$top/tests/lib/podman.sh"
on_exit cleanup
ln -s "$imgdir/busybox-x86_64.tar" "$w/$p-busybox-x86_64.tar"
ln -s "$imgdir/busybox-x86_64" "$w/$p-busybox-x86_64"

# A podman service of our own (runc, cgroupfs: what this machine needs).
podman --runtime runc --cgroup-manager cgroupfs system service --time=0 "unix://$w/podman.sock" \
	>"$w/service.log" 2>&1 &
svc=$!
for i in $(seq 1 50); do [ -S "$w/podman.sock" ] && break; sleep 0.1; done
[ -S "$w/podman.sock" ] || die "podman system service: $(cat "$w/service.log")"

# A TCP forwarder to a unix socket (the engine seen as remote): port to $w/port.
cat >"$w/fwd.py" <<'PY'
import socket, sys, threading
target = sys.argv[1]
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(64)
open(sys.argv[2], "w").write(str(ls.getsockname()[1]))
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d: break
            b.sendall(d)
    except OSError: pass
    for s in (a, b):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
while True:
    c, _ = ls.accept()
    u = socket.socket(socket.AF_UNIX); u.connect(target)
    threading.Thread(target=pump, args=(c, u), daemon=True).start()
    threading.Thread(target=pump, args=(u, c), daemon=True).start()
PY

channel() { "$sbx" --runner "$1" hello | sed -n 's/^channel //p'; }

for e in $engines; do
	if [ "$e" = podman ]; then var=CONTAINER_HOST sock=$w/podman.sock; else var=DOCKER_HOST sock=${DOCKER_HOST#unix://}; fi
	[ -S "$sock" ] || die "$e: no socket at $sock (DOCKER_HOST=${DOCKER_HOST:-})"
	n=$p-$e-l
	export "$var=unix://$sock"
	"$sbx" sandbox create --runner "$e" --image "$w/$p-busybox-x86_64.tar" --name "$n" >/dev/null || die "$e: create (local)"
	[ "$(channel "$e:$n")" = resident ] || die "$e: $var=unix://$sock: first use $(channel "$e:$n")"
	[ "$(SBX_RESIDENT=0 channel "$e:$n")" = direct ] || die "$e: the exec way did not move to the direct socket"
	ok "$e: $var=unix://PATH of this machine is a local engine: the resident agent first, the exec way moves to the direct socket"

	# The same engine through tcp://: remote.
	rm -f "$w/port"
	python3 "$w/fwd.py" "$sock" "$w/port" &
	fwd=$!
	for i in $(seq 1 50); do [ -s "$w/port" ] && break; sleep 0.1; done
	export "$var=tcp://127.0.0.1:$(cat "$w/port")"
	n=$p-$e-r
	"$sbx" sandbox create --runner "$e" --image "sbx-$p-busybox-x86_64" --name "$n" >/dev/null || die "$e: create (remote)"
	[ ! -e "$SBX_PODMAN_DIR/$e-$n.pid" ] || die "$e: a remote engine's PID was remembered"
	[ "$(channel "$e:$n")" = exec ] || die "$e: remote: first use $(channel "$e:$n")"
	echo '{"id":1,"op":"hello"}' | "$sbx" --runner "$e:$n" session >"$w/s" || die "$e: remote session"
	grep -q '"channel":"exec"' "$w/s" || die "$e: remote session: $(cat "$w/s")"
	[ "$(SBX_RESIDENT=0 channel "$e:$p-$e-l")" = exec ] || die "$e: remote: a container made locally is still reached through exec"
	[ "$("$sbx" --runner "$e:$n" exec -- echo hi)" = hi ] || die "$e: remote exec"
	ok "$e: $var=tcp://... is a remote engine: create, hello, a session and exec all through $e exec (no PID remembered)"
	kill "$fwd"
	wait "$fwd" 2>/dev/null || true
	fwd=

	# A local socket whose engine answers a PID that is not the container's.
	export "$var=unix://$sock"
	mkdir -p "$w/bin-$e"
	cat >"$w/bin-$e/$e" <<SH
#!/bin/sh
case "\$1 \${5:-}" in "inspect {{.State.Pid}}"*) $(command -v "$e") "\$@" | sed 's/^[0-9]* /1 /'; exit ;; esac
exec $(command -v "$e") "\$@"
SH
	chmod 0755 "$w/bin-$e/$e"
	n=$p-$e-f
	PATH="$w/bin-$e:$PATH" "$sbx" sandbox create --runner "$e" --image "sbx-$p-busybox-x86_64" --name "$n" >/dev/null ||
		die "$e: create (foreign PID)"
	[ ! -e "$SBX_PODMAN_DIR/$e-$n.pid" ] || die "$e: a PID outside the container was remembered"
	[ "$(PATH="$w/bin-$e:$PATH" SBX_RESIDENT=0 channel "$e:$n")" = exec ] || die "$e: a foreign PID was used"
	echo '{"id":1,"op":"hello"}' | PATH="$w/bin-$e:$PATH" "$sbx" --runner "$e:$n" session >"$w/s"
	grep -q '"channel":"exec"' "$w/s" || die "$e: foreign PID: session $(cat "$w/s")"
	ok "$e: an engine on a local socket whose PID is not the container's (PID 1 of this machine): neither socket is used, exec only"
	unset "$var"
	[ "$e" = podman ] || export DOCKER_HOST="unix://$sock"
	for x in l r f; do "$sbx" sandbox rm "$e:$p-$e-$x" >/dev/null || die "$e: rm"; done
done
