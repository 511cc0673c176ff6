#!/bin/sh
a=/logs/artifacts
reward=0
[ -f "$a/progress.txt" ] && [ -f "$a/done.txt" ] && reward=1
echo "$reward" >/logs/verifier/reward.txt
