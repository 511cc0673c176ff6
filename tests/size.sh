#!/usr/bin/env bash
# size.sh ARCH...: a Markdown table of every architecture's stripped agent size; fails when
# the x86_64 agent is over its 512 KiB budget.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
limit=$((512 * 1024))
status=0
echo "| architecture | sbx-agent bytes | KiB |"
echo "|---|---:|---:|"
for a in "$@"; do
	f="$top/build/agent/$a/sbx-agent"
	b=$(stat -c %s "$f")
	printf '| %s | %d | %d |\n' "$a" "$b" $(((b + 1023) / 1024))
	if [ "$a" = x86_64 ] && [ "$b" -gt $limit ]; then
		echo "x86_64 agent is $b bytes, over the $limit-byte budget" >&2
		status=1
	fi
done
exit $status
