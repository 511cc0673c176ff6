#!/bin/sh
# The hidden tests: exact modes, a hard link that is the same inode, symlinks with their
# exact targets, an empty folder that survived the replay.
a=/logs/artifacts
fail() { echo "verifier: $*"; echo 0 >/logs/verifier/reward.txt; exit 0; }
[ "$(stat -c %a "$a/bin/tool")" = 750 ] || fail "tool mode $(stat -c %a "$a/bin/tool")"
[ "$(stat -c %a "$a/private/key")" = 600 ] || fail "key mode"
[ "$(stat -c %a "$a/private")" = 700 ] || fail "private mode"
[ "$(stat -c %a "$a/README")" = 444 ] || fail "README mode"
[ "$(stat -c %a "$a/shared")" = 1777 ] || fail "shared mode"
[ "$(stat -c %i "$a/README")" = "$(stat -c %i "$a/README.hard")" ] || fail "hard link"
[ "$(readlink "$a/bin/readme-link")" = ../README ] || fail "readme-link"
[ "$(readlink "$a/tool")" = bin/tool ] || fail "tool link"
[ -d "$a/empty" ] || fail "empty folder"
[ "$("$a/tool")" = built ] || fail "tool does not run"
echo 1 >/logs/verifier/reward.txt
echo "verifier: all hidden tests passed"
