#!/usr/bin/env bash
# run.sh HOSTDIR: runs the cmocka unit tests, then every agent's selftest natively and under
# qemu-ARCH-static, and ends with one line "N passed, N failed" (exit 1 when any failed).
set -u
hostdir=$1
top=$(cd "$(dirname "$0")/.." && pwd)
passed=0
failed=0
failures=()

count_cmocka() { # name, output file, exit status
	local p f
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' "$2" | tail -1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below:/\1/p' "$2" | tail -1)
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	if [ "$3" != 0 ] && [ "${f:-0}" = 0 ]; then
		failed=$((failed + 1)) # crashed before cmocka could count
		failures+=("$1 (exit $3)")
	elif [ "${f:-0}" != 0 ]; then
		failures+=("$1")
	fi
}

one() { # name, command...: a check that passes when the command exits 0
	local name=$1
	shift
	if "$@" >/tmp/sbx-check.$$ 2>&1; then
		passed=$((passed + 1))
		echo "ok   $name"
	else
		failed=$((failed + 1))
		failures+=("$name")
		echo "FAIL $name"
		sed 's/^/     /' /tmp/sbx-check.$$
	fi
}

echo "== unit tests (cmocka)"
for t in "$hostdir"/tests/test_*; do
	[ -x "$t" ] || continue
	case $t in *.d) continue ;; esac
	out=/tmp/sbx-unit.$$
	"$t" >"$out" 2>&1
	rc=$?
	cat "$out"
	count_cmocka "$(basename "$t")" "$out" $rc
done
rm -f /tmp/sbx-unit.$$

echo "== agents"
. "$top/toolchain/arch.sh"
native=$(uname -m)
for a in $SBX_ARCHES; do
	agent="$top/build/agent/$a/sbx-agent"
	sbx_arch "$a"
	one "$a: agent is a static executable" sh -c "file -L '$agent' | grep -q 'statically linked'"
	if [ "$a" = "$native" ]; then
		one "$a: selftest (native)" "$agent" selftest
		one "$a: --version names $a, libarchive and BearSSL" \
			sh -c "'$agent' --version | grep -q '^sbx-agent [0-9.]* $a libarchive 3\..* BearSSL'"
	fi
	one "$a: selftest (qemu)" "$QEMU" "$agent" selftest
done
one "sbx selftest runs every agent" "$hostdir/sbx" --agent-dir "$top/build/agent" selftest all

rm -f /tmp/sbx-check.$$
echo
if [ ${#failures[@]} -gt 0 ]; then
	echo "failed:"
	printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
