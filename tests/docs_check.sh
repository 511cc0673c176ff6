#!/bin/bash
# docs_check.sh: every frame type, field tag and operation of shared/proto.h and shared/frame.h
# appears in docs/protocol.md by its name, so the prose cannot drift from the header.
. "$(dirname "$0")/lib/suite.sh"
suite_begin
missing=0
for n in $(grep -ohE 'SBX_(T|OP|F)_[A-Z0-9_]+ = ' "$top/shared/proto.h" "$top/shared/frame.h" |
	sed -E 's/^SBX_(T|OP|F)_//; s/ = $//' | sort -u); do
	if ! grep -qw "$n" "$top/docs/protocol.md"; then
		echo "docs/protocol.md does not mention $n"
		missing=1
	fi
done
exit $missing
