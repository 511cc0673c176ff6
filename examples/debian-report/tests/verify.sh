#!/bin/bash
# Reward 1 when the sorted list is right and its checksum matches, as computed here.
a=/logs/artifacts
reward=1
[ "$(cat "$a/sorted.txt")" = "$(printf 'alpha\nbravo\ncharlie\ndelta')" ] || reward=0
[ "$(sha256sum "$a/sorted.txt" | cut -d' ' -f1)" = "$(cat "$a/sorted.sha256")" ] || reward=0
[ "$(cat "$a/kernel.txt")" = Linux ] || reward=0
echo "$reward" >/logs/verifier/reward.txt
