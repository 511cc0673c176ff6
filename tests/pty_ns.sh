#!/bin/bash
# pty_ns.sh SBX: tests/integration/test_pty.c against a real namespace sandbox of the BusyBox
# image (BusyBox's sh, stty, yes, setsid in a private devpts), as root. One check: the cmocka
# program's counts. It can fail as test_pty does (its comment says how each case was shown to
# fail); on ns it also failed before the escaped-process check asked inside the sandbox (the
# pid printed there is of the sandbox's pid namespace).
. "$(dirname "$0")/lib/suite.sh"
suite_begin root
sbx=$(realpath "$1")
export SBX_NS_DIR=$w/state
on_exit remove_sandboxes
img=$top/build/images/busybox-x86_64
[ -d "$img" ] || die "no image $img (make images)"
n=$("$sbx" sandbox create --image "$img")
out=$w/out
rc=0
SBX_AGENT_DIR=$top/build/agent SBX_TEST_RUNNER="ns:$n" "$(dirname "$sbx")/tests/test_pty" >"$out" 2>&1 || rc=$?
grep -q '^\[  PASSED  \] 8 test' "$out" && [ "$rc" = 0 ] || {
	cat "$out"
	die "test_pty on ns:$n failed"
}
ok "terminal sessions on ns + BusyBox: shell, replay after a cut, takeover, pipe mode, resize, escape killed, flood"
