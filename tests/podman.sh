#!/usr/bin/env bash
# podman.sh SBX: the podman:NAME runner end to end, as root, with real OCI containers (runc,
# cgroupfs). Imports build/images/{busybox,debian,noshell}-x86_64.tar under names of its own;
# for each: create, first use injects (HELLO's SHA-256 is the local agent's), probes, exec, an
# upload-dir/download-dir round trip with modes, a supervised run with a signed receipt
# (images with a shell). Injection cases: missing, stale (garbage and another agent at the
# expected path), noexec /tmp, streaming without `podman cp`, no shell. Measures injection +
# first HELLO against `podman exec N true`, and 1000 kind probes over one session against
# `podman exec N sh -c '[ -d /tmp ]'`. Every container and image it made is removed on exit.
set -euo pipefail
[ "${SBX_TRACE:-}" = 1 ] && set -x
sbx=$(realpath "$1")
top=$(cd "$(dirname "$0")/.." && pwd)
imgdir=$(realpath "${2:-$top/build/images}")
[ "$(id -u)" = 0 ] || { echo "podman.sh: needs root" >&2; exit 1; }
command -v podman >/dev/null || { echo "podman.sh: no podman (toolchain/deps.sh installs it)" >&2; exit 1; }
w=$(mktemp -d /tmp/sbx-podman-XXXXXX)
export SBX_PODMAN_DIR=$w/hints
p=t$$ # prefix of every container and image made here
. "$(dirname "$0")/lib/podman.sh"
cleanup() {
	podman_cleanup "$p"
	rm -rf "$w"
}
trap cleanup EXIT
ok() { echo "  ok: $*"; }
die() {
	echo "FAIL: $*" >&2
	exit 1
}
S() { # S NAME ARGS...: sbx through podman exec
	local n=$1
	shift
	"$sbx" --runner "podman:$n" "$@"
}
now() { date +%s.%N; }
calc() { python3 -c "print($*)"; }
agent=$top/build/agent/x86_64/sbx-agent
sha=$(sha256sum "$agent" | cut -d' ' -f1)
fname=.sbx-agent-${sha:0:12}
hint() { cut -d' ' -f2 "$SBX_PODMAN_DIR/podman-$1"; }

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
	[ "$("$sbx" sandbox create --runner podman --image "$w/$p-$img.tar" --name "$n")" = "podman:$n" ] ||
		die "$img: create"
	"$sbx" sandbox status "podman:$n" | grep -q "^podman:$n running arch x86_64 " || die "$img: status"
	ok "$img: imported as sbx-$p-$img, container $n created and running (init is the agent)"
	S "$n" hello >"$w/hello" || die "$img: hello"
	grep -qx "sha256 $sha" "$w/hello" || die "$img: HELLO's sha256 is not the local agent's: $(cat "$w/hello")"
	[ "$(hint "$n")" = "/tmp/$fname" ] || die "$img: agent at $(hint "$n")"
	[ "$(S "$n" stat "/tmp/$fname" | cut -d' ' -f2-3)" = "file 0755" ] || die "$img: agent mode"
	ok "$img: first use injected /tmp/$fname (0755); HELLO's sha256 is the local agent's"
	[ "$(S "$n" kind /etc)" = dir ] && [ "$(S "$n" kind /nonexistent)" = absent ] &&
		[ "$(S "$n" resolve /proc/self/..)" = /proc ] || die "$img: probes"
	ok "$img: probes (kind dir/absent, resolve)"
	if [ "$img" = noshell-x86_64 ]; then
		S "$n" exec -- /hello >"$w/out" || die "$img: exec /hello"
		rc=0
		S "$n" sh 'true' 2>/dev/null || rc=$?
		[ $rc = 127 ] || die "$img: sh should not start (exit $rc)"
		ok "$img: exec /hello works; sh is not there (127)"
	else
		[ "$(S "$n" exec -- sh -c 'echo $((6*7)); echo err >&2' 2>/dev/null)" = 42 ] || die "$img: exec"
		rc=0
		S "$n" exec -- sh -c 'exit 7' || rc=$?
		[ $rc = 7 ] || die "$img: exit status $rc"
		ok "$img: exec (stdout, exit status 7)"
	fi
	S "$n" upload-dir "$w/task" /work/task >/dev/null || die "$img: upload-dir"
	rm -rf "$w/back"
	S "$n" download-dir /work/task "$w/back" >/dev/null || die "$img: download-dir"
	diff -r --no-dereference "$w/task" "$w/back" || die "$img: round trip differs"
	[ "$(stat -c %a "$w/back/sub")" = 751 ] && [ "$(stat -c %a "$w/back/a.txt")" = 600 ] &&
		[ "$(stat -c %a "$w/back/empty")" = 700 ] && [ "$(readlink "$w/back/link")" = a.txt ] ||
		die "$img: modes or links"
	ok "$img: upload-dir / download-dir round trip (contents, modes 751/600/700, symlink)"
	if [ "$img" != noshell-x86_64 ]; then
		S "$n" run --session /tmp/s1 --timeout 5 -- sh -c 'sleep 100 & exit 0' >"$w/receipt" ||
			die "$img: run"
		grep -q '"termination_witnessed":true' "$w/receipt" && grep -q '"residual":\[\]' "$w/receipt" ||
			die "$img: receipt $(cat "$w/receipt")"
		S "$n" receipt --session /tmp/s1 >/dev/null || die "$img: the receipt does not verify"
		[ "$(S "$n" exec -- sh -c 'ps -o comm 2>/dev/null | grep -c "^sleep" || true')" = 0 ] ||
			die "$img: the background sleep survived"
		ok "$img: run --session (sleep 100 & exit 0): signed receipt verifies, termination witnessed, nothing left"
	fi
done

# ---- injection cases (BusyBox) ----
n=$p-busybox
before=$(podman exec "$n" stat -c '%i %Z' "/tmp/$fname")
sleep 1
S "$n" hello >/dev/null
[ "$(podman exec "$n" stat -c '%i %Z' "/tmp/$fname")" = "$before" ] || die "reuse: the agent was copied again"
ok "reuse: a second connection finds the agent (hint in \$SBX_PODMAN_DIR) and does not copy"
podman exec "$n" sh -c "printf '#!/bin/sh\necho garbage\n' > /tmp/$fname; chmod 0755 /tmp/$fname"
S "$n" hello | grep -qx "sha256 $sha" || die "stale script not replaced"
[ "$(podman exec "$n" sha256sum "/tmp/$fname" | cut -d' ' -f1)" = "$sha" ] || die "stale file still there"
ok "stale: a script planted at /tmp/$fname is replaced; HELLO matches"
podman cp "$top/build/agent/i386/sbx-agent" "$n:/tmp/$fname"
[ "$(podman exec "$n" sha256sum "/tmp/$fname" | cut -d' ' -f1)" != "$sha" ] || die "plant"
S "$n" hello | grep -qx "sha256 $sha" || die "another agent not replaced"
[ "$(podman exec "$n" sha256sum "/tmp/$fname" | cut -d' ' -f1)" = "$sha" ] || die "other agent still there"
ok "stale: another agent (i386, a different SHA-256) at the expected path answers HELLO; replaced"
rm -f "$SBX_PODMAN_DIR/podman-$n"
podman exec "$n" rm -f "/tmp/$fname"
S "$n" hello | grep -qx "sha256 $sha" || die "missing agent"
ok "missing: the agent deleted inside the container (and no hint) is injected again"

n=$p-noexec
"$sbx" sandbox create --runner podman --image "sbx-$p-busybox-x86_64" --name "$n" \
	--engine-arg --tmpfs=/tmp:rw,noexec >/dev/null
podman exec "$n" grep -q ' /tmp tmpfs .*noexec' /proc/mounts || die "no noexec /tmp"
S "$n" hello | grep -qx "sha256 $sha" || die "noexec: hello"
where=$(hint "$n")
case $where in /tmp/*) die "noexec: agent at $where" ;; esac
ok "noexec /tmp (--tmpfs /tmp:rw,noexec; /dev/shm is noexec too): the agent runs from $where"

n=$p-stream
"$sbx" sandbox create --runner podman --image "sbx-$p-busybox-x86_64" --name "$n" >/dev/null
SBX_PODMAN_COPY=stream S "$n" hello | grep -qx "sha256 $sha" || die "stream: hello"
[ "$(podman exec "$n" stat -c %a "/tmp/$fname")" = 755 ] || die "stream: mode"
ok "without podman cp: streamed through sh -c 'cat > tmp && chmod && mv' (0755); HELLO matches"
n=$p-noshell2
"$sbx" sandbox create --runner podman --image "sbx-$p-noshell-x86_64" --name "$n" >/dev/null
rc=0
SBX_PODMAN_COPY=stream S "$n" hello >/dev/null 2>&1 || rc=$?
[ $rc = 3 ] || die "noshell: streaming should fail without a shell (exit $rc)"
S "$n" hello | grep -qx "sha256 $sha" || die "noshell: native copy"
ok "no shell: streaming cannot work (unavailable, exit 3); the native copy (podman cp) does"

rc=0
S "$p-absent" hello 2>/dev/null || rc=$?
[ $rc = 3 ] || die "absent container: exit $rc"
podman stop -t 0 "$p-stream" >/dev/null 2>&1 || true
rc=0
S "$p-stream" hello 2>"$w/err" || rc=$?
[ $rc = 3 ] && grep -q "is exited" "$w/err" || die "stopped container: exit $rc $(cat "$w/err")"
rc=0
"$sbx" sandbox status "podman:$p-stream" >/dev/null || rc=$?
[ $rc = 1 ] || die "status of a stopped container: $rc"
ok "absent and stopped containers: unavailable (exit 3); status exits 1"

# ---- figures ----
n=$p-bench
"$sbx" sandbox create --runner podman --image "sbx-$p-busybox-x86_64" --name "$n" >/dev/null
t0=$(now)
podman exec "$n" true
t1=$(now)
S "$n" hello >/dev/null
t2=$(now)
S "$n" hello >/dev/null
t3=$(now)
echo "  figure: podman exec N true $(calc "round($t1-$t0,3)") s; injection + first HELLO $(calc "round($t2-$t1,3)") s (x$(calc "round(($t2-$t1)/($t1-$t0),1)")); later HELLO $(calc "round($t3-$t2,3)") s"
for i in $(seq 1 1000); do echo "{\"id\":$i,\"op\":\"kind\",\"path\":\"/tmp\"}"; done >"$w/probes"
t0=$(now)
S "$n" session <"$w/probes" >"$w/answers"
t1=$(now)
[ "$(grep -c '"kind":"dir"' "$w/answers")" = 1000 ] || die "1000 probes"
for i in $(seq 1 20); do podman exec "$n" sh -c '[ -d /tmp ]'; done
t2=$(now)
per_s=$(calc "($t1-$t0)/1000")
per_p=$(calc "($t2-$t1)/20")
echo "  figure: 1000 kind probes over one session $(calc "round($t1-$t0,3)") s ($(calc "round($per_s*1e6)") us each, session start included); podman exec sh -c '[ -d /tmp ]' $(calc "round($per_p*1e3,1)") ms each; x$(calc "round($per_p/$per_s)") per probe"
ok "figures measured (1000 answers, all dir)"

for c in busybox debian noshell noshell2 noexec stream bench; do "$sbx" sandbox rm "podman:$p-$c"; done
"$sbx" sandbox rm "podman:$p-busybox"
[ "$("$sbx" sandbox status "podman:$p-busybox" || true)" = "podman:$p-busybox absent" ] || die "rm"
ok "sandbox rm removes containers; rm of an absent one succeeds"
