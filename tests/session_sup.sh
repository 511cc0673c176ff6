#!/bin/sh
# session_sup.sh SBX: the supervision ops of `sbx session` (JSON lines) end to end: run, a
# receipt that verifies under the run's key and not under another, output, attach, rearm,
# close, and a run refused once the session is closing.
set -eu
sbx=$1
dir=$(mktemp -d /tmp/sbx-jsonl-XXXXXX)
trap 'rm -rf "$dir"' EXIT
# The run answers with its receipt key (derived in the sandbox's keeper, never sent): a client
# reads it before it asks for the receipt.
run=$(printf '%s\n' \
	'{"id":1,"op":"run","session":"'"$dir"'/s","argv":["sh","-c","echo hi; exit 4"]}' | "$sbx" session)
k=$(printf '%s\n' "$run" | sed -n 's/.*"key":"\([0-9a-f]*\)".*/\1/p')
[ ${#k} = 64 ] || { echo "no key in: $run" >&2; exit 1; }
printf '%s\n' '{"id":9,"op":"run","session":"'"$dir"'/t","argv":["true"],"key":"'$k'"}' |
	"$sbx" session | grep -q '"ok":false,"error":{"class":"usage".*takes no' ||
	{ echo "a run given a key was not refused" >&2; exit 1; }
out=$(printf '%s\n' "$run"; printf '%s\n' \
	'{"id":2,"op":"receipt","session":"'"$dir"'/s","wait":10,"key":"'$k'"}' \
	'{"id":3,"op":"receipt","session":"'"$dir"'/s","key":"ff"}' \
	'{"id":4,"op":"output","session":"'"$dir"'/s"}' \
	'{"id":5,"op":"attach","session":"'"$dir"'/s"}' \
	'{"id":6,"op":"rearm","session":"'"$dir"'/s"}' \
	'{"id":7,"op":"close","session":"'"$dir"'/s"}' \
	'{"id":8,"op":"run","session":"'"$dir"'/s","argv":["true"]}' | "$sbx" session)
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
