#!/bin/bash
# session_sup.sh SBX: the supervision ops of `sbx session` (JSON lines) end to end: run, a
# receipt that verifies under the run's key and not under another, output, attach, rearm,
# close, and a run refused once the session is closing; then every option of `sbx run` in
# JSON (a numeric user, env, env_clear, cwd, timeout, grace, log_max). Shown able to fail:
# the sbx of commit 9b528a3 dropped user, env, env_clear and log_max (the harness ran as root
# with the whole environment: lines 9-12 failed).
. "$(dirname "$0")/lib/suite.sh"
suite_begin
sbx=$1
# The run answers with its receipt key (derived in the sandbox's keeper, never sent): a client
# reads it before it asks for the receipt; a run given a key is refused.
run=$(printf '%s\n' \
	'{"id":1,"op":"run","run_dir":"'"$w"'/s","argv":["sh","-c","echo hi; exit 4"]}' | "$sbx" session)
k=$(printf '%s\n' "$run" | jget key) && [ ${#k} = 64 ] || die "no key in: $run"
printf '%s\n' '{"id":13,"op":"run","run_dir":"'"$w"'/t","argv":["true"],"key":"'$k'"}' |
	"$sbx" session | grep -q '"ok":false,"error":{"class":"usage".*takes no' ||
	die "a run given a key was not refused"
out=$(printf '%s\n' "$run"; printf '%s\n' \
	'{"id":2,"op":"receipt","run_dir":"'"$w"'/s","wait":10,"key":"'$k'"}' \
	'{"id":3,"op":"receipt","run_dir":"'"$w"'/s","key":"ff"}' \
	'{"id":4,"op":"output","run_dir":"'"$w"'/s"}' \
	'{"id":5,"op":"attach","run_dir":"'"$w"'/s"}' \
	'{"id":6,"op":"rearm","run_dir":"'"$w"'/s"}' \
	'{"id":7,"op":"close","run_dir":"'"$w"'/s"}' \
	'{"id":8,"op":"run","run_dir":"'"$w"'/s","argv":["true"]}' \
	'{"id":9,"op":"run","run_dir":"'"$w"'/e","argv":["sh","-c","id -u; id -g; echo A=$A; env; pwd; head -c 100000 /dev/zero | tr \"\\\\0\" x"],"user":65534,"env":{"A":"b c"},"env_clear":true,"cwd":"/tmp","timeout":10,"grace":1,"log_max":4096}' | "$sbx" session)
# Run 9's receipt, output and state: asked once its run was answered (a client that wants
# order waits: a receipt asked with the run in flight may come before the run folder exists).
out="$out
$(printf '%s\n' \
	'{"id":10,"op":"receipt","run_dir":"'"$w"'/e","wait":10}' \
	'{"id":11,"op":"output","run_dir":"'"$w"'/e"}' \
	'{"id":12,"op":"attach","run_dir":"'"$w"'/e"}' | "$sbx" session)"
# Answers come as operations end (sbx session runs them concurrently): each found by its id.
line() { printf '%s\n' "$out" | grep "^{\"id\":$1,"; }
line 1 | grep -q '"id":1,"ok":true,"supervisor_pid":' || die "run: $(line 1)"
line 2 | grep -q '"verified":true' && line 2 | grep -q '\\"status\\":4' || die "receipt: $(line 2)"
line 3 | grep -q '"verified":false' || die "a receipt under another key: $(line 3)"
line 4 | jget data_b64 | base64 -d | grep -qx hi || die "output: $(line 4)"
line 5 | grep -q '"state":"done","supervisor_alive":false,"has_receipt":true' || die "attach: $(line 5)"
line 6 | grep -q '"id":6,"ok":true' || die "rearm: $(line 6)"
line 7 | grep -q '"id":7,"ok":true' || die "close: $(line 7)"
line 8 | grep -q '"ok":false,"error":{"class":"usage".*closing' || die "a run on a closing session: $(line 8)"
line 9 | grep -q '"id":9,"ok":true,"supervisor_pid":' || die "run with every option: $(line 9)"
line 10 | grep -q '\\"trigger\\":\\"exit\\"' || die "its receipt: $(line 10)"
log=$(line 11 | jget data_b64 | base64 -d)
[ "$(printf '%s\n' "$log" | sed -n 2,4p | tr '\n' ' ')" = '65534 65534 A=b c ' ] ||
	die "user (gid = uid) or env: $log"
! printf '%s\n' "$log" | grep -q '^\(PATH\|HOME\)=' || die "env_clear: $log"
printf '%s\n' "$log" | grep -qx /tmp || die "cwd: $log"
bytes=$(line 12 | jget log_bytes) && [ "$bytes" -le 4096 ] || die "log_max: $(line 12)"
