#!/usr/bin/env bash
# session_conc.sh SBX: `sbx session` runs requests concurrently, on ns sandboxes (root):
# answers come as operations end, each with its request's id (an exec `sleep 1` sent first is
# answered after a kind sent second); "stream": true sends the output as events that decode to
# the exact bytes; a cancel ends a running exec at once (unavailable, ECANCELED) and kills its
# process; "sandbox" sends requests to two sandboxes from one process, with and without
# --runner; a missing sandbox, a garbage line and a request without op are error lines, and the
# session goes on; a kind and a ping sent after a 64 MiB upload are answered before it. Shown able to fail: against the sbx of main before this suite (d46f439,
# requests one at a time, no events, no cancel, no "sandbox"; SBX_KEEP_GOING=1) each of the
# six fails.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root
sbx=$(realpath "$1")
export SBX_NS_DIR=$w/state
on_exit remove_sandboxes
img=$top/build/images/busybox-x86_64
[ -x "$img/bin/busybox" ] || die "no image $img (make images)"
a=$("$sbx" sandbox create --image "$img") || die "create a"
b=$("$sbx" sandbox create --image "$img") || die "create b"

# drive SCRIPT OUT SBX-ARGS...: `sbx SBX-ARGS session` driven by SCRIPT (tests/lib/
# session_drive.py: requests, `wait`, `sleep S`), every line it printed in OUT.
drive() {
	local script=$1 out=$2
	shift 2
	rm -f "$w/answers" && mkfifo "$w/answers"
	python3 "$top/tests/lib/session_drive.py" "$script" "$out" "$w/answers" |
		"$sbx" "$@" session >"$w/answers"
}
# check OUT PYTHON: PYTHON's asserts over the lines of OUT (L: parsed; ans(ID): the one answer
# of ID, at index at(ID); ev(ID, NAME): the bytes of ID's NAME events, in order).
check() {
	python3 - "$1" "$2" <<'PY' || die "$(cat "$1")"
import base64, json, sys
L = [json.loads(x) for x in open(sys.argv[1])]
def at(i):
    k = [n for n, a in enumerate(L) if a.get("id") == i and "ok" in a and a.get("op") != "cancel"]
    assert len(k) == 1, "answers of %r: %d" % (i, len(k))
    return k[0]
def ans(i):
    return L[at(i)]
def ev(i, name):
    return b"".join(base64.b64decode(a["data_b64"]) for a in L
                    if a.get("id") == i and a.get("event") == name)
exec(sys.argv[2])
PY
}

# 1: out of order
printf '%s\n' '{"id":1,"op":"exec","argv":["sh","-c","sleep 1; echo slept"]}' \
	'{"id":2,"op":"kind","path":"/tmp"}' >"$w/s1"
drive "$w/s1" "$w/o1" --runner "ns:$a" || die "session 1"
check "$w/o1" '
assert len(L) == 2, L
assert at(2) < at(1), "the kind was not answered first"
assert ans(2) == {"id": 2, "ok": True, "kind": "dir"}, ans(2)
a = ans(1)
assert a["ok"] is True and a["code"] == 0 and a["stdout"] == "slept\n", a
assert a["seconds"] >= 1, a'
ok "out of order: kind (id 2) answered before the exec sleep 1 sent first (id 1); both exact"

# 2: streaming events
printf '%s\n' '{"id":"s","op":"sh","cmd":"printf \"a\\000\\377\"; printf err >&2; sleep 0.2; printf tail","stream":true}' \
	'{"id":"c","op":"sh","cmd":"printf x"}' >"$w/s2"
drive "$w/s2" "$w/o2" --runner "ns:$a" || die "session 2"
check "$w/o2" '
assert ev("s", "stdout") == b"a\x00\xfftail", ev("s", "stdout")
assert ev("s", "stderr") == b"err", ev("s", "stderr")
a = ans("s")
assert a["ok"] is True and a["code"] == 0 and "stdout" not in a and "stderr" not in a, a
assert max(n for n, x in enumerate(L) if x.get("event")) < at("s"), "an event after the answer"
assert ans("c")["stdout"] == "x" and not ev("c", "stdout"), ans("c")'
ok "stream: stdout and stderr events decode to the exact bytes (NUL, 0xff), before the answer, none in it; unstreamed output stays in the answer"

# 3: cancel
printf '%s\n' '{"id":7,"op":"sh","cmd":"echo $$ >/tmp/p; exec sleep 30"}' 'sleep 0.5' \
	'{"op":"cancel","id":7}' wait '{"op":"cancel","id":99}' 'sleep 0.3' \
	'{"id":8,"op":"sh","cmd":"kill -0 $(cat /tmp/p) 2>/dev/null && echo alive || echo gone"}' >"$w/s3"
t0=$(now)
drive "$w/s3" "$w/o3" --runner "ns:$a" || die "session 3"
t1=$(now)
check "$w/o3" '
c = [a for a in L if a.get("op") == "cancel"]
assert c == [{"id": 7, "ok": True, "op": "cancel"}], c
assert ans(99)["ok"] is False and ans(99)["error"]["class"] == "usage", ans(99)
e = ans(7)
assert e["ok"] is False and e["error"]["class"] == "unavailable" and e["error"]["errno"] == 125, e
assert ans(8)["stdout"] == "gone\n", ans(8)'
[ "$(calc "$t1 - $t0 < 5")" = True ] || die "cancel took $(calc "$t1 - $t0") s"
ok "cancel: the exec ends at once (unavailable, ECANCELED), its process is gone, the cancel answered ok; a cancel of an id not in flight is an error"

# 4: two sandboxes in one process, with and without --runner
printf '%s\n' '{"id":1,"op":"sh","cmd":"touch /tmp/only-a"}' wait \
	'{"id":2,"op":"kind","path":"/tmp/only-a"}' \
	'{"id":3,"op":"kind","path":"/tmp/only-a","sandbox":"ns:'"$b"'"}' \
	'{"id":4,"op":"kind","path":"/tmp/only-a","sandbox":"ns:'"$a"'"}' >"$w/s4"
drive "$w/s4" "$w/o4" --runner "ns:$a" || die "session 4"
check "$w/o4" '
assert ans(1)["ok"] is True, ans(1)
assert ans(2)["kind"] == "file" and ans(4)["kind"] == "file", (ans(2), ans(4))
assert ans(3)["kind"] == "absent", ans(3)'
printf '%s\n' '{"id":1,"op":"sh","cmd":"hostname","sandbox":"ns:'"$a"'"}' \
	'{"id":2,"op":"sh","cmd":"hostname","sandbox":"ns:'"$b"'"}' \
	'{"id":3,"op":"kind","path":"/tmp/only-a","sandbox":"ns:'"$b"'"}' >"$w/s5"
drive "$w/s5" "$w/o5" || die "session 5"
check "$w/o5" '
h1, h2 = ans(1)["stdout"], ans(2)["stdout"]
assert h1 and h2 and h1 != h2, (h1, h2)
assert ans(3)["kind"] == "absent", ans(3)'
ok "sandbox: two ns sandboxes from one process (with --runner: the default and ns:B; without it: both by name), each request in its own"

# 5: errors are lines, and the session goes on
printf '%s\n' 'garbage' '[1,2]' '{"id":1}' '{"id":2,"op":"nope"}' \
	'{"id":3,"op":"kind","path":"/","sandbox":"ns:no-such-sandbox"}' '{"id":4,"op":"kind","path":"/","sandbox":7}' \
	'{"id":5,"op":"kind","path":"/"}' >"$w/s6"
drive "$w/s6" "$w/o6" --runner "ns:$a" || die "session 6: exit $?"
check "$w/o6" '
assert len(L) == 7, L
for a in L[:2]:
    assert a["ok"] is False and a["error"]["class"] == "usage" and "id" not in a, a
for i in 1, 2, 4:
    assert ans(i)["ok"] is False and ans(i)["error"]["class"] == "usage", ans(i)
assert "op" in ans(1)["error"]["message"], ans(1)
assert ans(3)["ok"] is False and ans(3)["error"]["class"] in ("unavailable", "usage"), ans(3)
assert ans(5) == {"id": 5, "ok": True, "kind": "dir"}, ans(5)'
ok "errors: garbage, a non-object, no op, an unknown op, a missing sandbox, a bad sandbox: error lines (with the id when there is one); the next request answered"

# 6: a probe while an upload is in flight on the same session
mkdir -p "$w/big" && head -c $((64 << 20)) /dev/urandom >"$w/big/f"
printf '%s\n' '{"id":"u","op":"upload_dir","source":"'"$w/big"'","target":"/tmp/big"}' \
	'{"id":"k","op":"kind","path":"/tmp"}' '{"id":"p","op":"ping"}' >"$w/s7"
drive "$w/s7" "$w/o7" --runner "ns:$a" || die "session 7"
check "$w/o7" '
assert at("k") < at("u") and at("p") < at("u"), L
assert ans("k")["kind"] == "dir" and ans("p")["ok"] is True, L
u = ans("u")
assert u["ok"] is True and u["files"] == 1 and u["bytes"] == 64 << 20, u'
ok "an upload of 64 MiB in flight: a kind and a ping sent after it are answered before it; the upload is whole"
