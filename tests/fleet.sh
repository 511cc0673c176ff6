#!/bin/bash
# fleet.sh SBX: `sbx sandbox ls` / `rm --all` / `rm --older-than` and `sbx image ls` / `prune`
# across ns, podman and docker, with engines of its own so nothing of anyone else's is seen or
# removed: a podman service on a private storage ($CONTAINER_HOST), a dockerd of its own
# (tests/lib/docker.sh, $DOCKER_HOST), $SBX_NS_DIR under $w. Bundled
# images by name (--image busybox / noshell on every runner: build/images/NAME-ARCH). What is
# left is checked with the engines' own `ps -a` and `images`, and the ns state folder.
# Shown able to fail: with `ls` back to ns only, the first check sees one sandbox, not three.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root podman
sbx=$(realpath "$1")
. "$top/tests/lib/docker.sh"
docker_up "$w/docker" private || die "cannot start a dockerd of our own"
export SBX_PODMAN_DIR=$w/hints SBX_NS_DIR=$w/ns
podman --root "$w/storage" --runroot "$w/run" --runtime runc --cgroup-manager cgroupfs \
	system service --time=0 "unix://$w/podman.sock" >"$w/service.log" 2>&1 &
svc=$!
export CONTAINER_HOST=unix://$w/podman.sock
cleanup() {
	"$sbx" sandbox rm --all >/dev/null 2>&1
	podman ps -a -q | xargs -r podman rm -f >/dev/null 2>&1
	podman images -q | xargs -r podman rmi -f >/dev/null 2>&1
	kill "$svc" 2>/dev/null
	wait "$svc" 2>/dev/null
	docker_down "$w/docker"
	grep -o " $w/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
}
on_exit cleanup
for i in $(seq 1 50); do [ -S "$w/podman.sock" ] && break; sleep 0.1; done
[ -S "$w/podman.sock" ] || die "podman system service: $(cat "$w/service.log")"

mine() { docker ps -a --format '{{.Names}}'; }
p=fl$$
"$sbx" sandbox create --image busybox --name "$p-ns1" >/dev/null || die "ns create --image busybox"
"$sbx" sandbox create --runner podman --image busybox --name "$p-pm1" --memory-mib 96 --pids 64 >/dev/null ||
	die "podman create --image busybox"
"$sbx" sandbox create --runner docker --image noshell --name "$p-dk1" --cpu 0.5 >/dev/null ||
	die "docker create --image noshell"
[ "$("$sbx" --runner "docker:$p-dk1" kind /hello)" = file ] || die "docker --image noshell is not build/images/noshell"
"$sbx" --json sandbox ls >"$w/ls.json" || die "ls: $(cat "$w/ls.json")"
python3 - "$w/ls.json" "$p" <<'PY' || die "ls: $(cat "$w/ls.json")"
import json, sys
doc, p = json.load(open(sys.argv[1])), sys.argv[2]
got = {s["spec"]: s for s in doc["sandboxes"] if p in s["spec"]}
assert set(got) == {"ns:%s-ns1" % p, "podman:%s-pm1" % p, "docker:%s-dk1" % p}, got
for s in got.values():
    assert s["state"] == "running" and s["running"] and 0 <= s["age_s"] < 120, s
    assert s["arch"] == "x86_64" and s["image"], s
assert got["ns:%s-ns1" % p]["image"].endswith("/busybox-x86_64"), got
assert "sbx-busybox-x86_64:" in got["podman:%s-pm1" % p]["image"], got
assert "sbx-noshell-x86_64:" in got["docker:%s-dk1" % p]["image"], got
r = got["podman:%s-pm1" % p]["resources"]
assert r["memory_mib"] == 96 and r["pids"] == 64, r
assert got["docker:%s-dk1" % p]["resources"] == {"cpu": 0.5}, got
PY
"$sbx" sandbox ls >"$w/ls.txt"
grep -qE "^$p-ns1 running .* image .*/busybox-x86_64 .*age [0-9]+s" "$w/ls.txt" &&
	grep -qE "^podman:$p-pm1 running .* age [0-9]+s memory 96MiB pids 64$" "$w/ls.txt" &&
	grep -qE "^docker:$p-dk1 running .* age [0-9]+s cpu 0.5$" "$w/ls.txt" || die "ls (text): $(cat "$w/ls.txt")"
ok "sandbox ls lists ns, podman and docker sandboxes together (runner, image, state, age, resources; JSON and text); --image busybox/noshell are build/images/NAME-x86_64 on each runner"

# The cut is the second creates' own time rounded up, plus 1 s: under load the three took more
# than the 2 s a fixed cut allowed, and the first of them was removed too.
sleep 3
t2=$(now)
"$sbx" sandbox create --image busybox --name "$p-ns2" >/dev/null &&
	"$sbx" sandbox create --runner podman --image busybox --name "$p-pm2" >/dev/null &&
	"$sbx" sandbox create --runner docker --image busybox --name "$p-dk2" >/dev/null || die "second creates"
cut=$(python3 -c 'import math, sys; print(math.ceil(float(sys.argv[2]) - float(sys.argv[1])) + 1)' "$t2" "$(now)")
"$sbx" sandbox rm --older-than "${cut}s" >"$w/rm1" || die "rm --older-than"
[ "$(grep "$p-" "$w/rm1" | LC_ALL=C sort | tr "\n" " ")" = "docker:$p-dk1 $p-ns1 podman:$p-pm1 " ] || die "rm --older-than removed: $(cat "$w/rm1")"
[ "$(podman ps -a --format '{{.Names}}')" = "$p-pm2" ] && [ "$(mine)" = "$p-dk2" ] &&
	[ "$(ls "$SBX_NS_DIR")" = "$p-ns2" ] || die "after --older-than: podman $(podman ps -a --format '{{.Names}}'), docker $(mine), ns $(ls "$SBX_NS_DIR")"
ok "sandbox rm --older-than ${cut}s removes the three made 3 s before the others, keeps the three just made (podman ps -a, docker ps -a, the ns folder)"

"$sbx" image ls >"$w/img" || die "image ls"
grep -qE "^podman:localhost/sbx-busybox-x86_64:[0-9a-f]{16} id [0-9a-f]{12} size [0-9]+ containers 1$" "$w/img" &&
	grep -qE "^docker:sbx-busybox-x86_64:[0-9a-f]{16} id .* containers 1$" "$w/img" &&
	grep -qE "^docker:sbx-noshell-x86_64:[0-9a-f]{16} id .* containers 0$" "$w/img" ||
	die "image ls: $(cat "$w/img")"
ok "image ls: the images sbx imported, on podman and docker, with how many containers each was made from"
"$sbx" image prune --runner podman >"$w/pr0" || die "prune in use"
[ -n "$(podman images -q)" ] && [ ! -s "$w/pr0" ] || die "prune removed an image in use: $(cat "$w/pr0")"
"$sbx" sandbox rm --all >"$w/rm2" || die "rm --all"
[ "$(wc -l <"$w/rm2")" -ge 3 ] && [ -z "$(podman ps -a -q)" ] && [ -z "$(mine)" ] && [ -z "$(ls "$SBX_NS_DIR")" ] &&
	[ -z "$("$sbx" sandbox ls)" ] || die "after rm --all: $(cat "$w/rm2"); podman $(podman ps -a -q); docker $(mine); ls $("$sbx" sandbox ls)"
ok "sandbox rm --all: nothing left (podman ps -a, docker ps -a, the ns folder, sandbox ls all empty)"
"$sbx" --json image prune >"$w/pr" || die "prune: $(cat "$w/pr")"
[ -z "$(podman images -q)" ] || die "podman images left: $(podman images)"
[ -z "$(docker images -q)" ] || die "docker images left: $(docker images)"
[ -z "$("$sbx" image ls)" ] || die "image ls after prune: $("$sbx" image ls)"
ok "image prune keeps an image a container uses; after rm --all it removes every sbx image (podman images, docker images empty of sbx-*)"
