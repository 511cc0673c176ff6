#!/bin/bash
# A harness on the Debian image: bash arrays, coreutils, a report with a checksum.
set -euo pipefail
out=/logs/artifacts
words=(delta alpha charlie bravo)
printf '%s\n' "${words[@]}" | sort >"$out/sorted.txt"
sha256sum "$out/sorted.txt" | cut -d' ' -f1 >"$out/sorted.sha256"
uname -s >"$out/kernel.txt"
echo "report written"
