#!/bin/bash
# rollout.sh SBX: `sbx rollout` end to end on the ns runner and the bundled BusyBox image:
# the example task (reward 1, the harness's escaping process terminated and witnessed, the
# artifacts replayed with the same SHA-256, both sandboxes removed); a harness past its
# deadline (trigger deadline, artifacts still collected, reward 0); a task whose verifier is
# missing (no reward, sandboxes removed); the example on podman containers. Needs root,
# `make images` and podman.
set -euo pipefail
sbx=$(realpath "$1")
top=$(cd "$(dirname "$0")/.." && pwd)
w=$(mktemp -d /tmp/sbx-rollout-XXXXXX)
export SBX_NS_DIR=$w/ns
trap 'for n in $("$sbx" sandbox ls 2>/dev/null); do "$sbx" sandbox rm "$n" >/dev/null 2>&1; done; rm -rf "$w"' EXIT
pass=0
ok() {
	pass=$((pass + 1))
	echo "  ok: $*"
}
die() {
	echo "FAIL: $*" >&2
	exit 1
}
j() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

"$sbx" --json rollout --task "$top/examples/hello" --out "$w/r1" >"$w/r1.json" || { cat "$w/r1.json"; die "rollout"; }
[ "$(j "$w/r1.json" 'd["reward"]')" = 1 ] || die "reward: $(cat "$w/r1.json")"
[ "$(j "$w/r1.json" 'd["harness"]["termination_witnessed"] and d["harness"]["verified"]')" = True ] || die "harness receipt"
[ "$(j "$w/r1.json" 'd["harness"]["trigger"]')" = exit ] || die "harness trigger"
[ "$(j "$w/r1.json" 'd["verifier"]["verified"]')" = True ] || die "verifier receipt"
[ "$(j "$w/r1.json" 'd["artifacts"]["sha256"] == d["artifacts"]["replayed_sha256"]')" = True ] || die "replay digest"
[ "$(sha256sum "$w/r1/artifacts.tar" | cut -d' ' -f1)" = "$(j "$w/r1.json" 'd["artifacts"]["sha256"]')" ] || die "kept archive"
[ -z "$("$sbx" sandbox ls)" ] || die "sandboxes left: $("$sbx" sandbox ls)"
[ -f "$w/r1/summary.json" ] && [ "$(cat "$w/r1/verifier/reward.txt")" = 1 ] || die "kept files"
ok "example task: reward 1, escaping process terminated (witnessed), artifacts replayed byte for byte, sandboxes removed"

mkdir -p "$w/slow/agent" "$w/slow/tests"
printf '#!/bin/sh\necho partial >/logs/artifacts/partial.txt\nsleep 100\n' >"$w/slow/agent/run.sh"
printf '#!/bin/sh\n[ -f /logs/artifacts/partial.txt ] && echo 0 >/logs/verifier/reward.txt\n' >"$w/slow/tests/verify.sh"
"$sbx" --json rollout --task "$w/slow" --timeout 1 --out "$w/r2" >"$w/r2.json" || { cat "$w/r2.json"; die "slow rollout"; }
[ "$(j "$w/r2.json" 'd["harness"]["trigger"]')" = deadline ] || die "deadline trigger: $(cat "$w/r2.json")"
[ "$(j "$w/r2.json" 'd["harness"]["timed_out"] and d["harness"]["termination_witnessed"]')" = True ] || die "deadline receipt"
[ "$(j "$w/r2.json" 'd["reward"]')" = 0 ] || die "artifacts of a timed-out harness were not collected"
ok "a harness past its deadline: trigger deadline, witnessed, its artifacts still collected and verified"

mkdir -p "$w/nover/agent" "$w/nover/tests"
printf '#!/bin/sh\necho x >/logs/artifacts/x\n' >"$w/nover/agent/run.sh"
rc=0
"$sbx" --json rollout --task "$w/nover" --out "$w/r3" >"$w/r3.json" || rc=$?
[ "$(j "$w/r3.json" 'd["verifier"]["status"] != 0')" = True ] || die "missing verifier: $(cat "$w/r3.json")"
[ "$(j "$w/r3.json" 'd["reward"]')" = None ] || die "a reward without a verifier"
[ -z "$("$sbx" sandbox ls)" ] || die "sandboxes left after a failing episode"
ok "a task without its verifier: no reward, the verifier's failing status in its receipt, sandboxes removed (exit $rc)"
"$sbx" --json rollout --runner podman --task "$top/examples/hello" --out "$w/r4" >"$w/r4.json" ||
	{ cat "$w/r4.json"; die "podman rollout"; }
[ "$(j "$w/r4.json" 'd["reward"]')" = 1 ] || die "podman reward: $(cat "$w/r4.json")"
[ "$(j "$w/r4.json" 'd["harness"]["termination_witnessed"] and d["harness"]["verified"] and d["artifacts"]["sha256"] == d["artifacts"]["replayed_sha256"]')" = True ] ||
	die "podman receipts/replay"
left=$(podman ps -a --format '{{.Names}}' --filter label=sbx.arch | grep '^sbx-' || true)
[ -z "$left" ] || die "podman containers left: $left"
ok "the example task on podman (runc) containers: reward 1, witnessed, replayed byte for byte, containers removed"
echo "rollout: $pass passed"
