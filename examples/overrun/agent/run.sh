#!/bin/sh
# A harness that overruns its deadline: it writes a first step, then never finishes. The
# supervisor ends it at the deadline (the receipt says timed_out); what it wrote before is
# still collected, and the verifier gives no reward for an unfinished answer.
echo "step 1 of 2" >/logs/artifacts/progress.txt
sleep 3600
echo done >/logs/artifacts/done.txt
