#!/bin/sh
# session_sup.sh SBX: the supervision ops of `sbx session` (JSON lines) end to end: run, a
# receipt that verifies under the run's key and not under another, output, attach, rearm,
# close, and a run refused once the session is closing; then every option of `sbx run` in
# JSON (a numeric user, env, env_clear, cwd, timeout, grace, log_max). Shown able to fail:
# the sbx of commit 9b528a3 dropped user, env, env_clear and log_max (the harness ran as root
# with the whole environment: lines 9-12 failed).
set -eu
sbx=$1
dir=$(mktemp -d /tmp/sbx-jsonl-XXXXXX)
trap 'rm -rf "$dir"' EXIT
# The run answers with its receipt key (derived in the sandbox's keeper, never sent): a client
# reads it before it asks for the receipt; a run given a key is refused.
run=$(printf '%s\n' \
	'{"id":1,"op":"run","session":"'"$dir"'/s","argv":["sh","-c","echo hi; exit 4"]}' | "$sbx" session)
k=$(printf '%s\n' "$run" | sed -n 's/.*"key":"\([0-9a-f]*\)".*/\1/p')
[ ${#k} = 64 ] || { echo "no key in: $run" >&2; exit 1; }
printf '%s\n' '{"id":13,"op":"run","session":"'"$dir"'/t","argv":["true"],"key":"'$k'"}' |
	"$sbx" session | grep -q '"ok":false,"error":{"class":"usage".*takes no' ||
	{ echo "a run given a key was not refused" >&2; exit 1; }
out=$(printf '%s\n' "$run"; printf '%s\n' \
	'{"id":2,"op":"receipt","session":"'"$dir"'/s","wait":10,"key":"'$k'"}' \
	'{"id":3,"op":"receipt","session":"'"$dir"'/s","key":"ff"}' \
	'{"id":4,"op":"output","session":"'"$dir"'/s"}' \
	'{"id":5,"op":"attach","session":"'"$dir"'/s"}' \
	'{"id":6,"op":"rearm","session":"'"$dir"'/s"}' \
	'{"id":7,"op":"close","session":"'"$dir"'/s"}' \
	'{"id":8,"op":"run","session":"'"$dir"'/s","argv":["true"]}' \
	'{"id":9,"op":"run","session":"'"$dir"'/e","argv":["sh","-c","id -u; id -g; echo A=$A; env; pwd; head -c 100000 /dev/zero | tr \"\\\\0\" x"],"user":65534,"env":{"A":"b c"},"env_clear":true,"cwd":"/tmp","timeout":10,"grace":1,"log_max":4096}' \
	'{"id":10,"op":"receipt","session":"'"$dir"'/e","wait":10}' \
	'{"id":11,"op":"output","session":"'"$dir"'/e"}' \
	'{"id":12,"op":"attach","session":"'"$dir"'/e"}' | "$sbx" session)
line() { printf '%s\n' "$out" | sed -n "$1p"; }
line 1 | grep -q '"id":1,"ok":true,"supervisor_pid":'
line 2 | grep -q '"verified":true'
line 2 | grep -q '\\"status\\":4'
line 3 | grep -q '"verified":false'
line 4 | sed 's/.*"data_b64":"\([^"]*\)".*/\1/' | base64 -d | grep -qx hi
line 5 | grep -q '"state":"done","supervisor_alive":false,"has_receipt":true'
line 6 | grep -q '"id":6,"ok":true'
line 7 | grep -q '"id":7,"ok":true'
line 8 | grep -q '"ok":false,"error":{"class":"usage".*closing'
line 9 | grep -q '"id":9,"ok":true,"supervisor_pid":'
line 10 | grep -q '\\"trigger\\":\\"exit\\"'
log=$(line 11 | sed 's/.*"data_b64":"\([^"]*\)".*/\1/' | base64 -d)
printf '%s\n' "$log" | sed -n 2,4p | tr '\n' ' ' | grep -qx '65534 65534 A=b c ' # user (gid = uid), env
if printf '%s\n' "$log" | grep -q '^\(PATH\|HOME\)='; then exit 1; fi # env_clear
printf '%s\n' "$log" | grep -qx /tmp                  # cwd
bytes=$(line 12 | sed 's/.*"log_bytes":\([0-9]*\).*/\1/')
[ "$bytes" -le 4096 ] # log_max
