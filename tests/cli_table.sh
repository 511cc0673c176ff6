#!/usr/bin/env bash
# cli_table.sh SBX: the CLI's command table (host/cli/cli.h). Every command with a JSON form is
# run both ways against the local runner, as argv with --json and as the same request on a
# line of `sbx session`, and the two answers are compared field by field (timings, pids,
# nonces and the run key left out; the two forms' own folders, $w/a and $w/j, named alike);
# every op that `sbx help session` lists must have been run. Then the help, built from the
# rows: `sbx help`, `sbx help COMMAND` and `sbx COMMAND --help` (every command and sandbox
# subcommand it lists; `sbx sandbox --help` too) exit 0 and agree, every runner kind of the
# runner table (runner/*.c) is in the usage, and an unknown command is a usage error (2).
#
# Shown able to fail: with lands_print writing "physical" only from argv (`if (!c->lines)`
# around it in host/cli/probe.c) the lands-clear check failed (".physical: argv '...' json
# '<absent>'"); with exec_json not reading the options (no cmd_opts_json) the exec and sh
# checks failed (stdout, outcome); with ssh taken out of the runner table, "sbx help does not
# name the runner kind ssh". Against the sbx before the table (main at 4467c0b) the two forms
# of run, attach, output, stop, expire, rearm and close differed, and `sbx help` was an
# unknown command.
. "$(dirname "$0")/lib/suite.sh"
suite_begin
sbx=$(realpath "$1")
S() { "$sbx" --runner local "$@"; }
mkdir -p "$w/a" "$w/j" "$w/src/sub" "$w/ko"
printf 'one\n' >"$w/src/f"
printf 'two\n' >"$w/src/sub/g"
ln -s f "$w/src/l"
ln -s ko "$w/lk" # a link that diverts into a keep_out folder
tested=" "

# same LABEL ARGV_JSON_FILE LINES_JSON_FILE: the two answers agree field by field.
same() {
	python3 - "$w" "$2" "$3" <<'EOF' || die "$1: the argv and JSON-lines forms differ"
import base64, json, re, sys
w, fa, fj = sys.argv[1:4]
# Timings, the agent's and supervisor's pids, and what is new at every run: left out.
skip = {"id", "seconds", "rtt_us", "pid", "supervisor_pid", "key", "nonce", "started_at_ns",
        "ended_at_ns", "duration_ns", "log_bytes", "log_dropped"}
def norm(v):
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items() if k not in skip}
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, str):
        v = v.replace(w + "/a/", w + "/X/").replace(w + "/j/", w + "/X/")
        if v.startswith("{"):
            try:
                return norm(json.loads(v))
            except ValueError:
                pass
    return v
def load(f):
    lines = [l for l in open(f).read().splitlines() if l.strip()]
    if len(lines) != 1:
        sys.exit("%s: %d lines: %r" % (f, len(lines), lines[:3]))
    return norm(json.loads(lines[0]))
a, j = load(fa), load(fj)
def diff(x, y, at):
    if type(x) != type(y):
        return "%s: argv %r json %r" % (at, x, y)
    if isinstance(x, dict):
        for k in list(x) + [k for k in y if k not in x]:
            if k not in x or k not in y:
                return "%s.%s: argv %r json %r" % (at, k, x.get(k, "<absent>"), y.get(k, "<absent>"))
            d = diff(x[k], y[k], at + "." + k)
            if d:
                return d
        return None
    if isinstance(x, list):
        if len(x) != len(y):
            return "%s: argv %d items, json %d" % (at, len(x), len(y))
        for i, (p, q) in enumerate(zip(x, y)):
            d = diff(p, q, "%s.%d" % (at, i))
            if d:
                return d
        return None
    return None if x == y else "%s: argv %r json %r" % (at, x, y)
d = diff(a, j, "")
if d:
    sys.exit(d)
EOF
}

# both OP LABEL REQUEST ARGV...: ARGV with --json, and REQUEST as one line of `sbx session`;
# @ in either stands for that form's folder ($w/a or $w/j).
both() {
	local op=$1 label=$2 req=${3//@/$w/j} a argv=()
	shift 3
	for a in "$@"; do argv+=("${a//@/$w/a}"); done
	S --json "${argv[@]}" >"$w/out.a" 2>"$w/err.a" || true
	printf '%s\n' "$req" | S session >"$w/out.j" 2>"$w/err.j" || die "$label: sbx session failed"
	same "$label" "$w/out.a" "$w/out.j"
	! grep -q '"ok":false' "$w/out.a" || die "$label: $(cat "$w/out.a")"
	tested="$tested$op "
	ok "$label: argv and JSON lines agree"
}
hexkey() { od -An -tx1 -v "$1" | tr -d ' \n'; }

both hello "hello" '{"op":"hello"}' hello
both forward "forward --for (no connection)" '{"op":"forward","in":["0:127.0.0.1:9"],"for":0.3}' \
	forward --in 0:127.0.0.1:9 --for 0.3
both ping "ping" '{"op":"ping"}' ping
both pty_ls "pty ls" '{"op":"pty_ls"}' pty ls
both kind "kind" '{"op":"kind","path":"'"$w"'/src/sub"}' kind "$w/src/sub"
both remote_kind "kind as remote_kind (present)" '{"op":"remote_kind","path":"'"$w"'/src/f"}' \
	kind "$w/src/f"
both stat "stat (one path missing)" \
	'{"op":"stat","paths":["'"$w"'/src/f","'"$w"'/src/l","'"$w"'/nope"]}' \
	stat "$w/src/f" "$w/src/l" "$w/nope"
both resolve "resolve" '{"op":"resolve","path":"'"$w"'/src/l"}' resolve "$w/src/l"
both lands_clear "lands-clear (not clear)" \
	'{"op":"lands_clear","dir":"'"$w"'/lk/x","keep_out":["'"$w"'/ko"]}' \
	lands-clear "$w/lk/x" "$w/ko"
both exec "exec with env, env_clear, cwd and a status" \
	'{"op":"exec","argv":["/bin/sh","-c","echo ${A}$PWD; echo e >&2; exit 3"],"env":["A=b"],"env_clear":true,"cwd":"'"$w"'/src"}' \
	exec --env A=b --env-clear --cwd "$w/src" -- /bin/sh -c 'echo ${A}$PWD; echo e >&2; exit 3'
both sh "sh with a timeout" '{"op":"sh","cmd":"sleep 5","timeout":0.2}' \
	sh --timeout 0.2 'sleep 5'
both exec_as_root "sh as exec_as_root, output not UTF-8" \
	'{"op":"exec_as_root","command":"printf '"'"'\\377'"'"'"}' sh "printf '\\377'"
both upload_dir "upload-dir" '{"op":"upload_dir","source":"'"$w"'/src","target":"@/up"}' \
	upload-dir "$w/src" @/up
both download_dir "download-dir --links keep --archive-copy" \
	'{"op":"download_dir","source":"'"$w"'/src","target":"@/down","links":"keep","archive_copy":"@/kept.tar"}' \
	download-dir --links keep --archive-copy @/kept.tar "$w/src" @/down
both upload_path "upload-path" '{"op":"upload_path","source":"'"$w"'/src/f","target":"@/upf"}' \
	upload-path "$w/src/f" @/upf
both download_path "download-path (absent)" \
	'{"op":"download_path","source":"'"$w"'/nope","target":"@/dp"}' \
	download-path "$w/nope" @/dp
both upload_archive "upload-archive --keep-out (diverted)" \
	'{"op":"upload_archive","archive":"@/kept.tar","kind":"dir","target":"'"$w"'/lk/in","keep_out":["'"$w"'/ko"]}' \
	upload-archive --keep-out "$w/ko" @/kept.tar dir "$w/lk/in"
both upload_archive "upload-archive" \
	'{"op":"upload_archive","archive":"@/kept.tar","kind":"dir","target":"@/replay"}' \
	upload-archive @/kept.tar dir @/replay

# Supervision: each form gets its own run folder for what changes one; what only reads runs
# both ways on the argv form's, the request given the key from its key file.
both run "run --detach" \
	'{"op":"run","run_dir":"@/r","argv":["/bin/sh","-c","echo $A; exit 4"],"env":["A=b"]}' \
	run --detach --run-dir @/r --key-file @/r.key --env A=b -- /bin/sh -c 'echo $A; exit 4'
r=$w/a/r k=$(hexkey "$w/a/r.key")
both receipt "receipt --wait (verified)" \
	'{"op":"receipt","run_dir":"'"$r"'","wait":10,"key":"'"$k"'"}' \
	receipt --run-dir "$r" --wait 10 --key-file "$w/a/r.key"
both output "output" '{"op":"output","run_dir":"'"$r"'"}' output --run-dir "$r"
both output "output --from" '{"op":"output","run_dir":"'"$r"'","from":3}' output --run-dir "$r" --from 3
both attach "attach" '{"op":"attach","run_dir":"'"$r"'"}' attach --run-dir "$r"
for op in stop expire; do
	both run "run --detach (to $op)" '{"op":"run","run_dir":"@/'$op'","argv":["sleep","30"]}' \
		run --detach --run-dir @/$op --key-file @/$op.key -- sleep 30
	kj=$(jget key "$w/out.j")
	both $op "$op --wait (verified)" \
		'{"op":"'$op'","run_dir":"@/'$op'","wait":10,"reason":"r","key":"'"$kj"'"}' \
		$op --run-dir @/$op --wait 10 --key-file @/$op.key $([ $op = expire ] && echo --reason r)
done
both rearm "rearm" '{"op":"rearm","run_dir":"@/r"}' rearm --run-dir @/r
both close "close" '{"op":"close","run_dir":"@/r"}' close --run-dir @/r

# Every op `sbx help session` lists was run both ways.
ops=$("$sbx" help session | sed -n 's/^  \([a-z_]*\)\( or [a-z_]*\)\{0,1\}: .*/\1/p')
[ -n "$ops" ] || die "sbx help session lists no op"
for op in $ops; do
	case $tested in *" $op "*) ;; *) die "op $op has a JSON form and was not run both ways" ;; esac
done
ok "every op of sbx session ($(echo $ops | wc -w)) was run both ways"

# ---- help, from the rows ----
"$sbx" help >"$w/help" || die "sbx help: exit $?"
cmp -s "$w/help" <("$sbx" --help) || die "sbx help and sbx --help differ"
[ "$(rc "$sbx" 2>/dev/null)" = 2 ] || die "a bare sbx is not a usage error"
# Every runner kind: each class's name in runner/*.c, in its initializer or as the argument of
# a row macro (podman.c's ENGINE_ROW("podman")).
kinds=$(sed -n -e 's/.*sbx_runner_class sbx_runner_[a-z0-9_]* = [A-Z_]*("\([a-z]*\)").*/\1/p' \
	-e '/sbx_runner_class sbx_runner_[a-z0-9_]* = {/,/}/s/.*\.name = "\([a-z]*\)".*/\1/p' \
	"$top"/runner/*.c)
[ "$(echo $kinds | wc -w)" -ge 8 ] || die "runner kinds not found in runner/*.c: $kinds"
for k in $kinds; do
	grep -qE "(^| )$k(:| |\$)" "$w/help" || die "sbx help does not name the runner kind $k"
done
ok "sbx help names every runner kind ($(echo $kinds))"
# Every command it lists: help COMMAND and COMMAND --help agree, exit 0, show its usage.
cmds=$(sed -n '/^commands:/,/^sbx help COMMAND/s/^  \([a-z][a-z-]*\)\( [a-z-]*\)\{0,1\}.*/\1\2/p' "$w/help" |
	awk '$1 == "sandbox" { print $1 " " $2; next } { print $1 }')
n=0
while read -r c; do
	# shellcheck disable=SC2086
	"$sbx" help $c >"$w/h1" || die "sbx help $c: exit $?"
	# shellcheck disable=SC2086
	"$sbx" $c --help >"$w/h2" || die "sbx $c --help: exit $?"
	cmp -s "$w/h1" "$w/h2" || die "sbx help $c and sbx $c --help differ"
	grep -q "^usage: sbx \[OPTIONS\] $c" "$w/h1" || die "sbx help $c: $(head -3 "$w/h1")"
	[ "$(wc -l <"$w/h1")" -ge 2 ] || die "sbx help $c: no summary"
	n=$((n + 1))
done <<<"$cmds"
[ $n -ge 30 ] || die "sbx help lists only $n commands"
ok "sbx help COMMAND = sbx COMMAND --help, exit 0, for the $n commands listed"
"$sbx" sandbox --help >"$w/h1" || die "sbx sandbox --help: exit $?"
for sub in create status rm ls; do
	grep -q "sandbox $sub" "$w/h1" || die "sbx sandbox --help: no $sub"
done
ok "sbx sandbox --help: exit 0, its subcommands"
[ "$(rc "$sbx" help nope 2>/dev/null)" = 2 ] && [ "$(rc "$sbx" nope 2>/dev/null)" = 2 ] &&
	[ "$(rc "$sbx" sandbox nope 2>/dev/null)" = 2 ] || die "an unknown command is not a usage error"
msg=$("$sbx" nope 2>&1 || true)
case $msg in *"unknown command 'nope'"*) ;; *) die "sbx nope: $msg" ;; esac
ok "an unknown command (sbx nope, sbx help nope, sbx sandbox nope): exit 2"
