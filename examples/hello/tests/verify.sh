#!/bin/sh
# The example task's verifier, run in a clean sandbox after the agent's artifacts were
# replayed byte for byte: reward 1 when the solution is right and the artifacts kept their
# modes and links, else 0. Writes /logs/verifier/reward.txt.
a=/logs/artifacts
reward=1
grep -q 'the answer is 42' "$a/solution.txt" || reward=0
[ -x "$a/bin/tool" ] && [ "$("$a/bin/tool")" = "tool ran" ] || reward=0
[ "$(stat -c %a "$a/bin/readonly.txt")" = 444 ] || reward=0
[ "$(readlink "$a/latest")" = solution.txt ] || reward=0
echo "$reward" >/logs/verifier/reward.txt
echo "verifier: reward $reward"
