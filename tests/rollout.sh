#!/bin/bash
# rollout.sh SBX: `sbx rollout` end to end on the ns runner and the bundled BusyBox image:
# the example task (reward 1, the harness's escaping process terminated and witnessed, the
# artifacts replayed with the same SHA-256, both sandboxes removed); a harness past its
# deadline (trigger deadline, artifacts still collected, reward 0); a task whose verifier is
# missing (no reward, sandboxes removed); the example on podman containers. Needs root,
# `make images` and podman. With SBX_ENGINE=docker only the example runs, on docker containers.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root podman
sbx=$(realpath "$1")
export SBX_NS_DIR=$w/ns
on_exit remove_sandboxes

if [ "$eng" = podman ]; then
"$sbx" --json rollout --task "$top/examples/hello" --out "$w/r1" >"$w/r1.json" || { cat "$w/r1.json"; die "rollout"; }
[ "$(jget reward "$w/r1.json")" = 1 ] || die "reward: $(cat "$w/r1.json")"
[ "$(jget harness.termination_witnessed "$w/r1.json")" = true ] &&
	[ "$(jget harness.verified "$w/r1.json")" = true ] || die "harness receipt"
[ "$(jget harness.trigger "$w/r1.json")" = exit ] || die "harness trigger"
[ "$(jget verifier.verified "$w/r1.json")" = true ] || die "verifier receipt"
sha=$(jget artifacts.sha256 "$w/r1.json") || die "no artifacts digest: $(cat "$w/r1.json")"
[ "$sha" = "$(jget artifacts.replayed_sha256 "$w/r1.json")" ] || die "replay digest"
[ "$(sha256sum "$w/r1/artifacts.tar" | cut -d' ' -f1)" = "$sha" ] || die "kept archive"
[ -z "$("$sbx" sandbox ls --runner ns)" ] || die "sandboxes left: $("$sbx" sandbox ls --runner ns)"
[ -f "$w/r1/summary.json" ] && [ "$(cat "$w/r1/verifier/reward.txt")" = 1 ] || die "kept files"
ok "example task: reward 1, escaping process terminated (witnessed), artifacts replayed byte for byte, sandboxes removed"

mkdir -p "$w/slow/agent" "$w/slow/tests"
printf '#!/bin/sh\necho partial >/logs/artifacts/partial.txt\nsleep 100\n' >"$w/slow/agent/run.sh"
printf '#!/bin/sh\n[ -f /logs/artifacts/partial.txt ] && echo 0 >/logs/verifier/reward.txt\n' >"$w/slow/tests/verify.sh"
"$sbx" --json rollout --task "$w/slow" --timeout 1 --out "$w/r2" >"$w/r2.json" || { cat "$w/r2.json"; die "slow rollout"; }
[ "$(jget harness.trigger "$w/r2.json")" = deadline ] || die "deadline trigger: $(cat "$w/r2.json")"
[ "$(jget harness.timed_out "$w/r2.json")" = true ] &&
	[ "$(jget harness.termination_witnessed "$w/r2.json")" = true ] || die "deadline receipt"
[ "$(jget reward "$w/r2.json")" = 0 ] || die "artifacts of a timed-out harness were not collected"
ok "a harness past its deadline: trigger deadline, witnessed, its artifacts still collected and verified"

mkdir -p "$w/nover/agent" "$w/nover/tests"
printf '#!/bin/sh\necho x >/logs/artifacts/x\n' >"$w/nover/agent/run.sh"
rc=0
"$sbx" --json rollout --task "$w/nover" --out "$w/r3" >"$w/r3.json" || rc=$?
status=$(jget verifier.status "$w/r3.json") && [ "$status" != 0 ] || die "missing verifier: $(cat "$w/r3.json")"
[ "$(jget reward "$w/r3.json")" = null ] || die "a reward without a verifier"
[ -z "$("$sbx" sandbox ls --runner ns)" ] || die "sandboxes left after a failing episode"
ok "a task without its verifier: no reward, the verifier's failing status in its receipt, sandboxes removed (exit $rc)"
fi
# What the rollout leaves is what is there after it and was not before (another's containers,
# labelled the same, are not this test's).
sbx_containers() { $eng ps -a --format '{{.Names}}' --filter label=sbx.arch | grep '^sbx-' | sort || true; }
before=$(sbx_containers)
"$sbx" --json rollout --runner "$eng" --task "$top/examples/hello" --out "$w/r4" >"$w/r4.json" ||
	{ cat "$w/r4.json"; die "$eng rollout"; }
[ "$(jget reward "$w/r4.json")" = 1 ] || die "$eng reward: $(cat "$w/r4.json")"
[ "$(jget harness.termination_witnessed "$w/r4.json")" = true ] &&
	[ "$(jget harness.verified "$w/r4.json")" = true ] && sha=$(jget artifacts.sha256 "$w/r4.json") &&
	[ "$sha" = "$(jget artifacts.replayed_sha256 "$w/r4.json")" ] || die "$eng receipts/replay"
left=$(comm -13 <(echo "$before") <(sbx_containers) | grep . || true)
[ -z "$left" ] || die "$eng containers left: $left"
ok "the example task on $eng (runc) containers: reward 1, witnessed, replayed byte for byte, containers removed"
