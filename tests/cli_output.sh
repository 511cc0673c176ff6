#!/usr/bin/env bash
# cli_output.sh SBX: the CLI's output against an impersonated agent (tests/fake/agent.py with
# the cli_* modes of tests/fake/modes_cli.py) that puts terminal escapes (ESC [ 2J, OSC 52, CSI
# as a raw byte and as U+009B, DEL, invalid UTF-8, a forged line) in every string it sends:
# in text mode nothing raw reaches stdout or stderr; every --json and JSON-lines output line
# parses and holds no raw control character. Then the bounds: `sbx output` ends against an
# agent that never stops sending and refuses an answer longer than asked; `--json exec` of
# 64 MiB stays small in memory and its JSON is exact.
#
# Shown able to fail: run against the sbx of commit 9b528a3 (before the shared escape), the
# text checks fail on the first case (hello: a raw ESC on stdout), the JSON checks on
# `attach` (hand-made printf JSON), `output` loops until its 20 s guard, and the 64 MiB exec
# peaks at 313 MB (bound here 48 MB).
. "$(dirname "$0")/lib/suite.sh"
suite_begin
sbx=$(realpath "$1")

# safe FILE [json]: strict UTF-8 with no C0 control but newline (and tab in text), no DEL and
# no C1 code point; with json, every line also parses.
safe() {
	python3 - "$@" <<'EOF'
import json, sys
raw = open(sys.argv[1], "rb").read()
try:
    text = raw.decode("utf-8")
except UnicodeDecodeError as e:
    sys.exit("invalid UTF-8 at byte %d: %r" % (e.start, raw[max(0, e.start - 20):e.start + 20]))
allowed = "\n" if len(sys.argv) > 2 else "\n\t"
for i, ch in enumerate(text):
    o = ord(ch)
    if (o < 0x20 and ch not in allowed) or 0x7f <= o <= 0x9f:
        sys.exit("raw U+%04X at char %d: %r" % (o, i, text[max(0, i - 20):i + 20]))
if len(sys.argv) > 2:
    for line in text.splitlines():
        if line.strip():
            json.loads(line)
EOF
}

# text LABEL MODE ARGS...: the command's stdout and stderr are safe, and show the escapes
# (so the hostile bytes did reach the printer).
text() {
	local label=$1 mode=$2
	shift 2
	via_fake "$mode" "$@" >"$w/out" 2>&1 || true
	safe "$w/out" || die "$label (text): $(od -c "$w/out" | head -5)"
	grep -qF -e '\x1b' -e '\u009b' "$w/out" || die "$label (text): no escape seen: $(cat "$w/out")"
	ok "$label: text escaped"
}

# json LABEL MODE ARGS...: every stdout line parses and is safe; stderr (text) is safe.
json() {
	local label=$1 mode=$2
	shift 2
	via_fake "$mode" --json "$@" >"$w/out" 2>"$w/err" || true
	safe "$w/out" json || die "$label (json): $(head -c 400 "$w/out")"
	safe "$w/err" || die "$label (json stderr): $(od -c "$w/err" | head -5)"
	grep -qF -e '\u001b' -e '\u009b' "$w/out" || die "$label (json): no escape seen: $(cat "$w/out")"
	ok "$label: JSON valid and escaped"
}

both() {
	text "$@"
	json "$@"
}

both "hello fields (arch, kernel, agent_version)" cli_hello hello
both "the agent's stderr tail in the error" cli_stderr hello
for c in "kind /x" "stat /x" "resolve /x" "lands-clear /x /y" "exec -- true" \
	"download-dir /x $w/d1" "attach --run-dir /tmp/s" "output --run-dir /tmp/s" \
	"run --run-dir /tmp/s -- true" "stop --run-dir /tmp/s --wait 0"; do
	# shellcheck disable=SC2086
	both "error message ($c)" cli_errors $c
done
both "stat: path, symlink target, error message" cli_probes stat $'/a\e[2J\xc2\x9b' /b
both "resolve" cli_probes resolve /r
both "lands-clear warning" cli_probes lands-clear /a /b
both "exec note (user fallback)" cli_exec exec -- id
both "exec not started: message" cli_exec exec -- false
both "attach: supervision state" cli_sup attach --run-dir /tmp/s
both "receipt" cli_sup receipt --run-dir /tmp/s
both "download: member name in the error" cli_member download-dir /x "$w/d2"

# JSON lines: the same strings through `sbx session`.
printf '%s\n' '{"id":1,"op":"hello"}' '{"id":2,"op":"stat","paths":["/a","/b"]}' \
	'{"id":3,"op":"resolve","path":"/r"}' '{"id":4,"op":"lands_clear","dir":"/a"}' |
	via_fake cli_hello,cli_probes session >"$w/out" 2>"$w/err" || true
safe "$w/out" json || die "session probes: $(cat "$w/out")"
[ "$(grep -c '"ok":true' "$w/out")" = 4 ] || die "session probes: $(cat "$w/out")"
printf '%s\n' '{"id":1,"op":"exec","argv":["id"]}' '{"id":2,"op":"exec","argv":["false"]}' |
	via_fake cli_exec session >"$w/out" 2>"$w/err" || true
safe "$w/out" json || die "session exec: $(cat "$w/out")"
printf '%s\n' '{"id":1,"op":"attach","run_dir":"/tmp/s"}' \
	'{"id":2,"op":"receipt","run_dir":"/tmp/s"}' '{"id":3,"op":"output","run_dir":"/tmp/s"}' |
	via_fake cli_sup session >"$w/out" 2>"$w/err" || true
safe "$w/out" json || die "session supervision: $(cat "$w/out")"
printf '%s\n' '{"id":1,"op":"kind","path":"/x"}' '{"id":2,"op":"attach","run_dir":"/tmp/s"}' |
	via_fake cli_errors session >"$w/out" 2>"$w/err" || true
safe "$w/out" json || die "session errors: $(cat "$w/out")"
[ "$(grep -c '"ok":false' "$w/out")" = 2 ] || die "session errors: $(cat "$w/out")"
ok "sbx session: every answer valid JSON with nothing raw"

# Every text line of the CLI goes through host/cli/out.c: no other file prints by itself (the
# raw streams of exec and output, the receipt's newline and constant strings excepted).
left=$(grep -nE '\b(printf|fprintf|puts|vprintf)\(|fputs\([^"]' "$top"/host/cli/*.c | grep -v "host/cli/out.c:" || true)
[ -z "$left" ] || die "prints that bypass the escape: $left"
ok "no print in host/cli/*.c bypasses the escape"

# sbx output ends: an agent that always has more (the first answer says 1 MiB exists) is read
# up to that 1 MiB and no further; an answer longer than asked is a protocol error.
n=$(timeout 20 "$sbx" --via "$fake_agent cli_flood" output --run-dir /tmp/s | wc -c) || true
[ "$n" = 1048576 ] || die "output against an endless agent: $n bytes (or no end)"
status=0
timeout 20 "$sbx" --via "$fake_agent cli_flood" output --run-dir /tmp/s --max-bytes 1000 >"$w/out" 2>"$w/err" || status=$?
[ $status = 1 ] && [ "$(wc -c <"$w/out")" = 1000 ] && grep -q 'max-bytes' "$w/err" ||
	die "output --max-bytes: $(wc -c <"$w/out") bytes, $(cat "$w/err")"
status=$(rc timeout 20 "$sbx" --via "$fake_agent cli_overlong" output --run-dir /tmp/s 2>"$w/err")
[ $status = 6 ] && grep -q 'more than asked' "$w/err" || die "output: a longer answer than asked: $(cat "$w/err")"
ok "sbx output reads what exists at its start, within --max-bytes, and no more than it asked"

# --json exec capture: 64 MiB of output within a bounded memory, and exact JSON.
agent=(--agent-dir "$top/build/agent")
rss=$(/usr/bin/time -f %M "$sbx" "${agent[@]}" --json exec -- head -c 67108864 /dev/zero 2>&1 >/dev/null | tail -1) ||
	die "--json exec of 64 MiB: $rss"
[ "$rss" -lt 49152 ] || die "--json exec of 64 MiB: peak RSS $rss KiB"
head -c 12000000 /dev/urandom >"$w/rand"
"$sbx" "${agent[@]}" --json exec -i -- cat <"$w/rand" >"$w/out" || die "exec -i cat"
python3 -c '
import base64, json, sys
d = json.load(open(sys.argv[1]))
assert base64.b64decode(d["stdout_b64"], validate=True) == open(sys.argv[2], "rb").read()
assert "stdout_truncated" not in d' "$w/out" "$w/rand" || die "--json exec: stdout_b64 not exact"
"$sbx" "${agent[@]}" --json exec -- head -c 70000000 /dev/zero |
	python3 -c 'import json, sys; d = json.load(sys.stdin); assert len(d["stdout"]) == 64 << 20 and d["stdout_truncated"]' ||
	die "--json exec: not cut at 64 MiB with stdout_truncated"
ok "--json exec: 64 MiB in $rss KiB peak RSS, output exact, cut at 64 MiB and said"

# exec -i with a stdin that stays open (a FIFO held by this shell): each line is answered
# while the next has not been written. Shown able to fail: before sbx_session_stdin_fd polled
# its fd, a blocking read() of the empty pipe held the session, and nothing came back until
# the writer closed.
mkfifo "$w/in"
"$sbx" "${agent[@]}" exec -i -- sh -c 'while read l; do echo "got $l"; done' <"$w/in" >"$w/echo" 2>"$w/echo.err" &
xp=$!
exec 7>"$w/in"
echo one >&7
for _ in $(seq 100); do grep -qx "got one" "$w/echo" && break; sleep 0.05; done
grep -qx "got one" "$w/echo" || { exec 7>&-; die "exec -i: no answer to a line while stdin stays open: $(cat "$w/echo" "$w/echo.err")"; }
echo two >&7
for _ in $(seq 100); do grep -qx "got two" "$w/echo" && break; sleep 0.05; done
exec 7>&-
wait $xp || die "exec -i: exit $? after stdin closed: $(cat "$w/echo.err")"
[ "$(cat "$w/echo")" = "$(printf 'got one\ngot two')" ] || die "exec -i: $(cat "$w/echo")"
ok "exec -i: a line on a stdin that stays open is answered at once (a FIFO held open), the end of stdin ends the command"
