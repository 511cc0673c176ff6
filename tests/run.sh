#!/usr/bin/env bash
# run.sh HOSTDIR FUZZDIR: runs the cmocka unit tests (tests/unit/) and integration tests
# (tests/integration/; the supervision and session ones under several runners and users), the
# shell suites (tests/*.sh; the podman ones against Docker too, with a dockerd of its own when
# none answers), every agent's selftest natively and under qemu-ARCH-static, a
# session smoke test on every architecture, and the fuzz targets over their seed corpora; ends
# with one line "N passed, N failed" (exit 1 when any failed). tests/README.md: adding a test.
set -u
hostdir=$1
fuzzdir=${2:-}
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

checks() { # name, command...: a script that prints "  ok: ..." per check; each one counts
	local name=$1 n
	shift
	if "$@" >/tmp/sbx-check.$$ 2>&1; then
		n=$(grep -c '^  ok: ' /tmp/sbx-check.$$)
		passed=$((passed + n))
		grep '^  ok: ' /tmp/sbx-check.$$
		echo "ok   $name ($n checks)"
	else
		failed=$((failed + 1))
		failures+=("$name")
		echo "FAIL $name"
		sed 's/^/     /' /tmp/sbx-check.$$
	fi
}

# The Python package's tests (pytest) with the first python3 on PATH, over this build's
# libsbx.so; Debian's pytest is added to the path when that python3 has none (a pyenv or
# venv python3 of the same minor version loads it). Under SAN=1 the sanitizer runtimes are
# preloaded into the interpreter (tests/lib/py_san.sh).
py=$(command -v python3)
py_host=$(cd "$hostdir" && pwd) # pytest runs in tests/python: absolute paths only
py_env=(env "PYTHONPATH=$top/python" "SBX_LIB=$py_host/libsbx.so" "SBX_CLI=$py_host/sbx")
if ! "$py" -c 'import pytest, pytest_asyncio' 2>/dev/null; then
	py_env+=("PYTHONPATH=$top/python:/usr/lib/python3/dist-packages")
fi
. "$top/tests/lib/py_san.sh"
mapfile -t -O "${#py_env[@]}" py_env < <(py_san_env "$py_host/libsbx.so")
pytests() { # name, pytest arguments...: every test counts
	local out=/tmp/sbx-py.$$ name=$1 p f e
	shift
	(cd "$top/tests/python" && "${py_env[@]}" "$py" -m pytest -q "$@") >"$out" 2>&1
	local rc=$?
	tail -n 40 "$out" | grep -v '^\.' | grep -E 'passed|failed|error|FAILED|ERROR' | tail -n 12
	# pytest's summary ("3 failed, 40 passed, 1 skipped in 9.1s"); lines may follow it
	local sum
	sum=$(grep -E '[0-9]+ (passed|failed|errors?|skipped)' "$out" | grep -E ' in [0-9.]+s' | tail -n 1)
	p=$(echo "$sum" | grep -o '[0-9]* passed' | grep -o '[0-9]*')
	f=$(echo "$sum" | grep -o '[0-9]* failed' | grep -o '[0-9]*')
	e=$(echo "$sum" | grep -o '[0-9]* error' | grep -o '[0-9]*')
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0} + ${e:-0}))
	if [ "$rc" != 0 ] && [ $((${f:-0} + ${e:-0})) = 0 ]; then
		failed=$((failed + 1))
		failures+=("$name (exit $rc)")
		sed 's/^/     /' "$out" | tail -n 30
	elif [ $((${f:-0} + ${e:-0})) != 0 ]; then
		failures+=("$name")
		sed 's/^/     /' "$out" | tail -n 60
	fi
	echo "${p:-0} passed ($name)"
	rm -f "$out"
}

echo "== build"
# The README's first command is a bare `make`: it has to mean `make all`.
one "make with no target builds everything (.DEFAULT_GOAL all)" sh -c \
	"make -C '$top' -n -p 2>/dev/null | grep -qx '.DEFAULT_GOAL := all'"

one "docs/protocol.md names every frame type, tag and op of shared/proto.h" "$top/tests/docs_check.sh"
one "the folder graph is one-way: cli -> runner -> libsbx -> shared, archive (includes)" "$top/tests/layering.sh"

echo "== unit tests (cmocka)"
export SBX_AGENT_DIR="$top/build/agent" SBX_FAKE_AGENT="$top/tests/fake/agent.py"
cmocka() { # name, command...
	local out=/tmp/sbx-unit.$$ name=$1
	shift
	"$@" >"$out" 2>&1
	local rc=$?
	cat "$out"
	count_cmocka "$name" "$out" $rc
	rm -f "$out"
}
# Every test_X.c of a folder, by its program; those run specially below are skipped here.
cmocka_folder() { # folder under tests/
	local src t
	for src in "$top/tests/$1"/test_*.c; do
		t=$hostdir/tests/$(basename "$src" .c)
		case $t in */test_session | */test_supervise | */test_harness) continue ;; esac
		if [ -x "$t" ]; then
			cmocka "$(basename "$t")" "$t"
		else
			failed=$((failed + 1))
			failures+=("$(basename "$t") (not built)")
			echo "FAIL $(basename "$t"): no $t"
		fi
	done
}
cmocka_folder unit

echo "== integration tests (cmocka): real agents, the fake agent, processes"
cmocka_folder integration

echo "== supervision: adversarial harnesses"
# Hostile harnesses run in a private pid namespace (with its own /proc): whatever a regression
# lets escape dies with the namespace and never reaches the machine's init.
export SBX_HARNESS_DIR="$top/build/harness" SBX_WEAK_AGENT_DIR="$top/build/agent-weak"
confined() { unshare --pid --fork --mount-proc "$@"; }
cmocka "test_supervise (agent supervise)" confined "$hostdir/tests/test_supervise"
cmocka "test_supervise (sbx --runner local run)" confined env \
	SBX_SUP_CMD="$hostdir/sbx --runner local run" "$hostdir/tests/test_supervise"
cmocka "test_supervise (sbx --runner qemu:aarch64 run, subset)" confined env \
	SBX_SUP_CMD="$hostdir/sbx --runner qemu:aarch64 run" "$hostdir/tests/test_supervise"
# Unprivileged runs need the build to be reachable by uid 65534 (a clone under a 0700 folder
# is not): probe first, and say so when they cannot run.
nobody_ok=0
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
	setpriv --reuid 65534 --regid 65534 --clear-groups sh -c \
		"test -x '$hostdir/sbx' && test -x '$top/build/agent/x86_64/sbx-agent' && test -x '$top/build/harness/escape'"; then
	nobody_ok=1
else
	echo "note: skipping the uid 65534 runs: the build is not reachable by that user here"
fi
if [ $nobody_ok = 1 ]; then
	cmocka "test_supervise (harness as uid 65534)" confined env SBX_TEST_AS_USER=1 \
		"$hostdir/tests/test_supervise"
	# The agent and its supervisor themselves unprivileged.
	cmocka "test_supervise (supervisor as uid 65534, local runner)" confined setpriv \
		--reuid 65534 --regid 65534 --clear-groups env HOME=/tmp \
		SBX_KEY_DIR="/tmp/sbx-keys-65534-$$" SBX_SUP_CMD="$hostdir/sbx --runner local run" \
		"$hostdir/tests/test_supervise"
	rm -rf "/tmp/sbx-keys-65534-$$"
fi
# Negative control: the escape tests against a supervisor built without subreaper, /proc walk
# and nonce scan must find survivors: they pass here only because they can fail.
cmocka "test_supervise (negative control, weak build)" confined env SBX_EXPECT_ESCAPE=1 \
	"$hostdir/tests/test_supervise"
cmocka "test_harness (SandboxSession, channel loss)" confined "$hostdir/tests/test_harness"
one "sbx session: supervision ops as JSON lines" confined "$top/tests/session_sup.sh" "$hostdir/sbx"
checks "sbx output: nothing raw from an impersonated agent, bounded reads and capture" \
	"$top/tests/cli_output.sh" "$hostdir/sbx"
checks "the CLI's command table: every op argv = JSON lines; help from the rows (confined)" \
	confined "$top/tests/cli_table.sh" "$hostdir/sbx"

echo "== the host against an impersonated agent"
checks "impersonated agent (tests/fake/agent.py) against the real host (confined)" \
	"$top/tests/impostor.sh" "$hostdir/sbx"
checks "sbx forward against an impersonated agent: frames, limits, hostile OPEN/DATA/RESET (confined)" \
	"$top/tests/fwd_impostor.sh" "$hostdir/sbx"
checks "TCP forwarding end to end: the agent's side against the real host (local runner)" \
	"$top/tests/fwd_local.sh" "$hostdir/sbx"

echo "== transfers"
one "sbx-agent pack: exact against GNU tar, reproducible, unsafe members, excludes" \
	"$top/tests/pack_fidelity.sh" "$top/build/agent/x86_64/sbx-agent"
checks "sbx transfers end to end (local runner, confined)" \
	"$top/tests/transfer.sh" "$hostdir/sbx" "$top/build/harness/cutter"
# Negative control: the same hostile archives against an agent whose safe walk follows symlinks
# (SBX_WEAK_PLACEMENT) must be seen escaping: they pass above only because they can fail.
checks "hostile archives (negative control: a weak placement's escapes are seen, confined)" env \
	SBX_EXPECT_ESCAPE=1 SBX_AGENT_DIR="$top/build/agent-weak-put" \
	"$top/tests/transfer.sh" "$hostdir/sbx" "$top/build/harness/cutter"

echo "== images and the ns runner"
checks "sandbox images (busybox x6, noshell, debian)" "$top/tests/images.sh" "$top/build/images"
checks "ns runner: namespace sandboxes end to end (root)" "$top/tests/ns.sh" "$hostdir/sbx"
checks "terminal sessions on ns + BusyBox (root)" "$top/tests/pty_ns.sh" "$hostdir/sbx"
checks "TCP forwarding on ns + BusyBox and qemu:aarch64: wget, httpd x1000, nc half-close, resets, channel cut, max-conn (root)" \
	"$top/tests/forward.sh" "$hostdir/sbx" "$top/build/harness/cutter"
checks "sbx session: concurrent requests, events, cancel, many sandboxes (ns, root)" "$top/tests/session_conc.sh" "$hostdir/sbx"
checks "ns runner: limits under load (fork bomb, memory hog, disk filler, CPU burner; negative control: no limits)" \
	"$top/tests/pressure.sh" "$hostdir/sbx"
checks "transfer and supervision suites on ns + BusyBox and ns + Debian" "$top/tests/ns_suites.sh" "$hostdir/sbx"
checks "sbx rollout: the main job on ns + BusyBox" "$top/tests/rollout.sh" "$hostdir/sbx"
pytests "python: sbx.providers, sbx.transfer, sbx.session, the rollout, on ns (pytest)" .
checks "podman runner: OCI containers, agent injection (root, podman+runc)" "$top/tests/podman.sh" "$hostdir/sbx" "$top/build/images"
checks "kubectl (fake kubectl, chroot pods) and ssh (private sshd) runners (root)" "$top/tests/remote_runners.sh" "$hostdir/sbx" "$top/build/images"
checks "transfer and supervision suites on podman (BusyBox, Debian, noshell, BusyBox aarch64 under QEMU)" "$top/tests/podman_suites.sh" "$hostdir/sbx" "$top/build/images"

echo "== docker (the podman suites against Docker; a private dockerd when none answers)"
. "$top/tests/lib/docker.sh"
docker_dir=$(mktemp -d /tmp/sbx-dockerd-XXXXXX)
trap 'docker_down "$docker_dir"' EXIT
one "a Docker engine answers (toolchain/deps.sh installs docker.io; tests/lib/docker.sh)" docker_up "$docker_dir"
checks "docker runner: the podman runner's suite on docker:NAME (DOCKER_HOST a local socket)" \
	env SBX_ENGINE=docker "$top/tests/podman.sh" "$hostdir/sbx" "$top/build/images"
checks "transfer and supervision suites on docker (BusyBox, Debian, noshell, BusyBox aarch64 under QEMU)" \
	env SBX_ENGINE=docker "$top/tests/podman_suites.sh" "$hostdir/sbx" "$top/build/images"
checks "local and remote engines: unix:// sockets here are local (resident, direct), tcp:// is exec only" \
	"$top/tests/engine_host.sh" "$hostdir/sbx"
checks "ns runner: the boundary against a hostile root, beside podman and docker (negative control: --privileged, local)" \
	"$top/tests/containment.sh" "$hostdir/sbx"
checks "the fleet: sandbox ls / rm --all / --older-than, image ls / prune on ns, podman, docker" \
	"$top/tests/fleet.sh" "$hostdir/sbx"
checks "engine pause retried on the freezer's transient failure only (a fake docker)" \
	"$top/tests/engine_retry.sh" "$hostdir/sbx"
checks "pause and resume on ns (cgroup freezer), podman, docker: a counter that stops, sessions refused" \
	"$top/tests/pause.sh" "$hostdir/sbx"
checks "limits on ns (cgroups, tmpfs layer), podman, docker: OOM in the receipt, fork bomb, CPU quota" \
	"$top/tests/limits.sh" "$hostdir/sbx"
checks "sbx rollout --runner docker: the example task" env SBX_ENGINE=docker "$top/tests/rollout.sh" "$hostdir/sbx"
py_env+=("SBX_PY_RUNNER=docker")
pytests "python: sbx.providers and sbx.transfer on docker (pytest)" test_providers.py test_transfer.py
py_env+=("SBX_PY_RUNNER=podman")
pytests "python: sbx.providers and sbx.transfer on podman (pytest)" test_providers.py test_transfer.py
docker_down "$docker_dir"
trap - EXIT

echo "== session integration (local, qemu:aarch64)"
cmocka "test_session local" env SBX_TEST_RUNNER=local "$hostdir/tests/test_session"
cmocka "test_session qemu:aarch64" env SBX_TEST_RUNNER=qemu:aarch64 "$hostdir/tests/test_session"
if [ $nobody_ok = 1 ]; then
	# The agent as an unprivileged user: what it cannot do (switch users) is said, not hidden.
	cmocka "test_session local as uid 65534" setpriv --reuid 65534 --regid 65534 --clear-groups \
		env SBX_TEST_RUNNER=local "$hostdir/tests/test_session"
fi

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
	one "$a: session smoke (hello, kind, stat, exec)" sh -c "
		sbx='$hostdir/sbx --runner qemu:$a'
		\$sbx --json hello | grep -q '\"arch\":\"$a\"' &&
		[ \"\$(\$sbx kind /)\" = dir ] &&
		\$sbx stat /proc/self | grep -q symlink &&
		[ \"\$(\$sbx exec -- echo smoke)\" = smoke ] &&
		{ \$sbx sh 'exit 9'; [ \$? = 9 ]; }"
	# Transfers through this architecture's agent (byte order, word size): a set-uid file, a
	# symlink and a folder up and back, the same SHA-256 on both ends.
	one "$a: transfer round trip (upload-dir, download-dir --links keep)" sh -c "
		t=\$(mktemp -d /tmp/sbx-xarch-XXXXXX) && trap 'rm -rf \$t' EXIT &&
		sbx='$hostdir/sbx --runner qemu:$a' &&
		mkdir -p \$t/src/d && echo x >\$t/src/d/f && chmod 4750 \$t/src/d/f && ln -s d/f \$t/src/l &&
		\$sbx --json upload-dir \$t/src \$t/sb >\$t/up && [ \$(stat -c %a \$t/sb/d/f) = 4750 ] &&
		\$sbx --json download-dir --links keep \$t/sb \$t/back >\$t/down &&
		[ \$(readlink \$t/back/l) = d/f ] && [ \$(cat \$t/back/d/f) = x ] &&
		[ \$(sed 's/.*sha256.:.\\([0-9a-f]*\\).*/\\1/' \$t/up) = \$(sed 's/.*sha256.:.\\([0-9a-f]*\\).*/\\1/' \$t/down) ]"
done
one "sbx selftest runs every agent" "$hostdir/sbx" --agent-dir "$top/build/agent" selftest all

if [ -n "$fuzzdir" ]; then
	echo "== fuzz targets over their seed corpora"
	for f in "$fuzzdir"/fuzz_*; do
		[ -x "$f" ] || continue
		name=${f##*/fuzz_}
		one "fuzz_$name replays fuzz/corpus/$name" sh -c "'$f' '$top'/fuzz/corpus/$name/*"
	done
fi

rm -f /tmp/sbx-check.$$
echo
if [ ${#failures[@]} -gt 0 ]; then
	echo "failed:"
	printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
