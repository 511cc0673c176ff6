# shellcheck shell=bash
# tests/lib/suite.sh: how every shell suite opens (tests/README.md). A suite sources it, then
# calls suite_begin; it gets strict shell options, $top, a work folder $w removed on exit, and
# the helpers below. tests/run.sh counts the "  ok: " lines a suite prints.
set -euo pipefail
[ "${SBX_TRACE:-}" = 1 ] && set -x

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The suite's own arguments (sourced without any, the file sees the caller's): a suite that
# needs a mount namespace runs itself again under unshare with them.
suite_args=("$@")
suite_name=${0##*/}
suite_name=${suite_name%.sh}
suite_tmpfs=0
suite_hooks=()
pass=0  # checks passed (ok); transfer.sh adds its sub-suite's to it
fails=0 # checks failed under SBX_KEEP_GOING=1

# ok MESSAGE: one check passed; run.sh counts this line.
ok() {
	pass=$((pass + 1))
	echo "  ok: $*"
}

# die MESSAGE: the suite fails with that reason. With SBX_KEEP_GOING=1 (a run against an older
# build, to see every failure at once) it is counted and the suite goes on, failing at its end;
# a die inside $(...) or a pipeline ends only that subshell either way.
die() {
	echo "FAIL: $*" >&2
	fails=$((fails + 1))
	[ "${SBX_KEEP_GOING:-}" = 1 ] || exit 1
}

# staged DIR...: the staging folders of transfers under DIR (none: empty). nostage DIR...: dies
# unless there are none. (Not `find | grep -q .`: under pipefail grep's early exit can SIGPIPE
# find, and the negated pipeline then says "none" when there are two.)
staged() { find "$@" -name '.sbx-stage-*' 2>/dev/null || true; }
nostage() {
	local s
	s=$(staged "$@")
	[ -z "$s" ] || die "staging folder left in $*: $s"
}
# rc COMMAND...: prints the command's exit status, without tripping set -e. Its stdout is
# dropped; its stderr is the caller's to redirect.
rc() {
	local status=0
	"$@" >/dev/null || status=$?
	echo "$status"
}

# jget KEY [FILE]: the field KEY (dotted for nested objects, a number for an array index:
# harness.trigger, residual.0) of the JSON document in FILE, or on stdin: a string as it is,
# anything else as JSON (true, null, 3, {"a":1}). Fails, saying why, when KEY is absent.
jget() {
	python3 -c '
import json, sys
key, src = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "-"
try:
    v = json.load(sys.stdin if src == "-" else open(src))
except (OSError, ValueError) as e:
    sys.exit("jget: %s: %s" % (src, e))
for k in key.split("."):
    try:
        v = v[int(k)] if isinstance(v, list) else v[k]
    except (KeyError, IndexError, ValueError, TypeError):
        sys.exit("jget: no %s in %s" % (key, src))
print(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))' "$@"
}

# on_exit COMMAND: run at exit (last registered first), before the work folder goes.
on_exit() { suite_hooks+=("$1"); }

# via_fake MODES SBX-ARGS...: $sbx through the impersonated agent (tests/fake/agent.py) in
# MODES (comma-separated). $fake_agent is that agent's command line.
fake_agent="python3 $top/tests/fake/agent.py"
via_fake() {
	local modes=$1
	shift
	"$sbx" --via "$fake_agent $modes" "$@"
}

# in_ns NAME ARGS..., in_podman NAME ARGS...: $sbx on the ns sandbox or container NAME (of
# $eng: podman, or docker with SBX_ENGINE=docker, for the suites that run on both).
eng=${SBX_ENGINE:-podman}
in_ns() {
	local n=$1
	shift
	"$sbx" --runner "ns:$n" "$@"
}
in_podman() {
	local n=$1
	shift
	"$sbx" --runner "$eng:$n" "$@"
}

# remove_sandboxes: removes every ns sandbox in $SBX_NS_DIR (an on_exit of the ns suites).
remove_sandboxes() {
	local d
	for d in "${SBX_NS_DIR:?}"/*; do
		[ -e "$d" ] || continue
		"$sbx" sandbox rm "${d##*/}" >/dev/null 2>&1 || true
	done
}

# now: seconds since the epoch, with nanoseconds; calc EXPR: Python's value of EXPR (figures).
now() { date +%s.%N; }
calc() { python3 -c "print($*)"; }

suite_end() {
	local status=$? i
	set +e
	for ((i = ${#suite_hooks[@]} - 1; i >= 0; i--)); do
		eval "${suite_hooks[$i]}"
	done
	cd /
	if [ -n "${w:-}" ] && [ -d "$w" ]; then
		if [ $suite_tmpfs = 1 ]; then
			umount -l "$w"
			rmdir "$w"
		else
			rm -rf "$w"
		fi
	fi
	if [ $status = 0 ] && [ $fails != 0 ]; then
		echo "$suite_name: $fails failed" >&2
		status=1
	fi
	exit $status
}

# suite_begin [root] [podman] [tmpfs[=SIZE]]: checks what the suite needs (root; $eng on
# PATH: podman, or docker with SBX_ENGINE=docker) and makes $w, removed on exit after the
# on_exit commands. With tmpfs the suite runs
# in a private mount namespace (it runs itself again under unshare -m) and $w is a tmpfs
# (0755, SIZE as mount takes it), so nothing it writes reaches the machine's folders.
suite_begin() {
	local need size='' missing=''
	for need in "$@"; do
		case $need in
		root) [ "$(id -u)" = 0 ] || missing="needs root" ;;
		podman) command -v "$eng" >/dev/null || missing="no $eng (toolchain/deps.sh installs it)" ;;
		tmpfs) suite_tmpfs=1 ;;
		tmpfs=*) suite_tmpfs=1 size=,size=${need#tmpfs=} ;;
		*) missing="suite_begin: unknown need '$need'" ;;
		esac
	done
	if [ -n "$missing" ]; then
		echo "FAIL: $suite_name: $missing" >&2
		exit 1
	fi
	# SBX_SUITE_NS names the suite the namespace was made for: a suite run by another gets
	# its own.
	if [ $suite_tmpfs = 1 ] && [ "${SBX_SUITE_NS:-}" != "$suite_name" ]; then
		exec unshare -m env SBX_SUITE_NS="$suite_name" bash "$0" "${suite_args[@]}"
	fi
	trap suite_end EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	w=$(mktemp -d "/tmp/sbx-$suite_name-XXXXXX")
	if [ $suite_tmpfs = 1 ]; then
		mount --make-rprivate /
		mount -t tmpfs -o "mode=0755$size" tmpfs "$w"
	fi
}
