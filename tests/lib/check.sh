# Sourced by the test scripts: ok MESSAGE (a check passed, counted by tests/run.sh from its
# "  ok:" lines) and die MESSAGE (the script fails with that reason).
ok() { echo "  ok: $*"; }
die() {
	echo "FAIL: $*" >&2
	exit 1
}
