#!/bin/sh
reward=0
grep -qx 'the answer is 42' /logs/artifacts/answer.txt && reward=1
echo "$reward" >/logs/verifier/reward.txt
