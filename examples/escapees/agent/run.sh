#!/bin/sh
# A harness that leaves processes behind every way a careless one does: its own session
# (setsid), nohup, a double fork that reparents to init, a process in its own group that
# forks itself anew. The supervisor kills all of them; the receipt says termination was
# witnessed.
echo "the answer is 42" >/logs/artifacts/answer.txt
setsid sh -c 'while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &
nohup sh -c 'trap "" HUP TERM; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &
( ( sh -c 'while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & ) & )
setsid sh -c 'f() { sh -c "sleep 0.2" & wait; f; }; f' </dev/null >/dev/null 2>&1 &
echo "harness done"
