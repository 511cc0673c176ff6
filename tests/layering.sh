#!/bin/bash
# layering.sh: the folder graph is one-way, cli -> runner -> libsbx (host/) -> shared, archive
# (docs/architecture.md). Checked on the #include lines: the CLI takes only the installed
# headers (the Makefile also compiles it against a copy of them alone), runners take libsbx's
# public headers and host/channel.h but never its private session.h, libsbx takes nothing of
# runner/ or the CLI, and shared/ and archive/ nothing of the folders above them.
. "$(dirname "$0")/lib/suite.sh"
suite_begin
cd "$top"
bad=0
no() { # FILES-GLOB, a grep -E pattern of headers they must not include, why
	for f in $1; do
		if grep -nE "^#include \"($2)\"" "$f"; then
			echo "  ^ $f: $3"
			bad=1
		fi
	done
}
public='sbx\.h|sbx_runner\.h|json\.h|err\.h|utf8\.h|hex\.h|arch\.h|cli\.h'
for f in host/cli/*.c host/cli/*.h; do
	grep -hE '^#include "' "$f" | grep -vE "^#include \"($public)\"" && {
		echo "  ^ $f: the CLI includes only the installed headers"
		bad=1
	}
done
no 'runner/*.c runner/*.h' 'session\.h' 'runners use host/channel.h, not libsbx internals'
no 'host/*.c host/*.h' 'runner\.h|sbx_runner\.h|ns\.h|podman\.h|remote\.h|boot\.h|inject\.h|cli\.h' \
	'libsbx does not depend on runners or the CLI'
no 'shared/*.c shared/*.h archive/*.c archive/*.h' \
	'sbx\.h|session\.h|channel\.h|json\.h|runner\.h|sbx_runner\.h|cli\.h|serve\.h|supervise\.h' \
	'shared/ and archive/ depend on nothing above them'
exit $bad
