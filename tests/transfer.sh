#!/bin/bash
# transfer.sh SBX CUTTER: transfers end to end through `sbx --runner local` (the agent runs on
# this machine, as root, so "the sandbox" is a folder here). Covers: round-trip fidelity
# (modes 0000..7777, 0555 folders holding files, owners 1001/2002, symlinks relative/absolute/
# dangling, hard links, empty folders, names with spaces, newlines and non-UTF-8 bytes,
# 255-byte names, a path past 4096 bytes, a 3 GiB sparse file), the host copy's data/keep
# rules, byte-for-byte replay (archive_copy -> upload_archive), merge / replace / file
# semantics of upload_dir / upload_path, keep_out, exclude and names, make_readable, the
# JSON-lines ops, hostile archives on both sides, a file's upload that holds anything but the
# file, a channel cut at every stage of an upload and a download (the target is the old tree
# or the new one, never a mix, and no staging folder is left), and the host against an
# impersonated agent (tests/transfer_fake.sh). Runs in a private mount namespace on a tmpfs
# (unshare -m).
. "$(dirname "$0")/lib/suite.sh"
suite_begin root tmpfs=8g
sbx=$(realpath "$1")
cutter=$(realpath "$2")
S() { "$sbx" --runner local "$@"; }
agent=${SBX_AGENT_DIR:-$(dirname "$sbx")/../agent}/x86_64/sbx-agent
# Through the cutter: V CUTTER-ARGS SBX-ARGS...
V() {
	local c=$1
	shift
	"$sbx" --agent "$agent" --via "$cutter $c -- {agent} serve" "$@"
}

# Every entry: type, mode, owner, size, mtime (ns), link target, link count, content digest.
list() {
	(cd "$1" && find . -mindepth 1 -printf '%P\t%y\t%m\t%U:%G\t%s\t%T@\t%l\t%n\n' | LC_ALL=C sort)
	# Contents too (sha256sum cannot open the path past PATH_MAX: its size is compared).
	(cd "$1" && find . -mindepth 1 -path ./deep -prune -o -type f -size -64M -print0 |
		LC_ALL=C sort -z | xargs -0r sha256sum)
}
# The same without owners, modes and folder sizes (for host copies).
shape() {
	(cd "$1" && find . -mindepth 1 -printf '%P\t%y\t%s\t%l\n' | LC_ALL=C sort) |
		awk -F'\t' 'BEGIN{OFS="\t"} $2=="d"{$3="-"}1'
}
same() {
	diff <(list "$1" | awk -F'\t' 'BEGIN{OFS="\t"} $2=="d"{$5="-"}1') \
		<(list "$2" | awk -F'\t' 'BEGIN{OFS="\t"} $2=="d"{$5="-"}1') >"$w/diff" || {
		head -20 "$w/diff"
		return 1
	}
}

# ---- hostile archives into the sandbox: refused; the target, the victim and everything
# around them untouched. SBX_EXPECT_ESCAPE=1 (tests/run.sh's negative control, with
# SBX_AGENT_DIR holding an agent built with SBX_WEAK_PLACEMENT: a safe walk that follows
# symlinks) runs only this, and the same checks must then see archives escape.
hostile_archives() {
	local h=$sb/host escaped=0 n=0 a walk rc
	# Everything in h but the target, with the victims' contents: an escape changes it.
	around() { (cd "$h" && find . -path ./t -prune -o -printf '%P %y %m %n %s %l\n' |
		LC_ALL=C sort && cat victim outside/o); }
	python3 "$(dirname "$0")/hostile_tar.py" "$w/hostile" "$h"
	for a in "$w"/hostile/*.tar; do
		for walk in "" --force-walk; do
			rm -rf "$h" && mkdir -p "$h/outside" "$h/t" && echo victim >"$h/victim" &&
				echo o >"$h/outside/o" && echo before >"$h/t/before" && ln -s ../outside "$h/t/pre"
			around >"$w/around.before"
			n=$((n + 1))
			rc=0
			S upload-archive $walk "$a" dir "$h/t" 2>"$w/err" || rc=$?
			if ! around | cmp -s - "$w/around.before"; then
				[ "${SBX_EXPECT_ESCAPE:-}" = 1 ] ||
					die "$(basename "$a") $walk: escaped (victim or what is around the target changed)"
				escaped=$((escaped + 1))
				continue
			fi
			[ "${SBX_EXPECT_ESCAPE:-}" = 1 ] && continue
			[ $rc = 5 ] || { cat "$w/err"; die "$(basename "$a") $walk: exit $rc, want 5"; }
			grep -q member "$w/err" || grep -q archive "$w/err" || { cat "$w/err"; die "$(basename "$a"): no reason"; }
			[ "$(ls -A "$h/t" | tr '\n' ' ')" = "before pre " ] || die "$(basename "$a"): target changed"
			nostage "$h"
		done
	done
	if [ "${SBX_EXPECT_ESCAPE:-}" = 1 ]; then
		[ $escaped -gt 0 ] || die "negative control: no hostile archive escaped the weak agent: the checks cannot see an escape"
		ok "negative control: $escaped of $n hostile uploads escaped the weak agent's walk, and the checks saw each"
	else
		ok "hostile archives ($(ls "$w"/hostile/*.tar | wc -l) cases, both walks): refused (exit 5), target, victim and what is around them untouched"
	fi
}
if [ "${SBX_EXPECT_ESCAPE:-}" = 1 ]; then
	sb=$w/sandbox
	hostile_archives
	echo "transfer (negative control): $pass passed"
	exit 0
fi

# ---- the tree ----
src=$w/src
. "$(dirname "$0")/lib/fidelity_tree.sh"
make_fidelity_tree "$src" sparse
sb=$w/sandbox
mkdir -p "$sb"

# ---- upload_dir: exact modes, owners, mtimes; the sparse file keeps its holes ----
S --json upload-dir "$src" "$sb/a" >"$w/up.json" || { cat "$w/up.json"; die "upload-dir"; }
same "$src" "$sb/a" || die "upload-dir is not exact"
[ "$(stat -c %b "$sb/a/sparse")" -lt 1000 ] || die "the sparse file lost its holes"
[ "$(tail -c 4 "$sb/a/sparse")" = tail ] || die "sparse tail"
nostage "$sb"
ok "upload-dir: exact tree (modes, owners, mtimes, links, long paths, sparse 3 GiB)"

# ---- download_dir keep + archive_copy; then replay byte for byte ----
S --json download-dir --links keep --archive-copy "$w/copy.tar" "$sb/a" "$w/dl" >"$w/dl.json" ||
	{ cat "$w/dl.json"; die "download-dir keep"; }
diff <(shape "$src") <(shape "$w/dl") >/dev/null || die "download-dir keep: shape differs"
[ -z "$(find "$w/dl" ! -type l -perm /6022 -print -quit)" ] || die "host copy kept set-id or g/o write"
[ "$(stat -c %u:%g "$w/dl/f0644")" = 0:0 ] || die "host copy chowned"
[ "$(readlink "$w/dl/abs")" = /etc/passwd ] || die "keep mode lost the absolute symlink"
sha=$(sha256sum "$w/copy.tar" | cut -d' ' -f1)
[ "$(jget sha256 <"$w/dl.json")" = "$sha" ] || die "archive_copy digest differs from the stream's"
ok "download-dir --links keep: host rules (no set-id, no g/o write, no chown), archive_copy"
S --json upload-archive "$w/copy.tar" dir "$sb/b" >"$w/ua.json" || { cat "$w/ua.json"; die "upload-archive"; }
[ "$(jget sha256 <"$w/ua.json")" = "$sha" ] || die "upload-archive digest"
same "$sb/a" "$sb/b" || die "replay is not exact"
[ "$(stat -c %a "$sb/b")" = 777 ] || die "upload-archive dir target not opened to all"
ok "upload-archive: byte-for-byte replay, same digest both ways"

# ---- download_dir data: a link leaving the root is refused, nothing is left ----
mkdir -p "$w/dd" && echo old >"$w/dd/keepme"
if S download-dir "$sb/a" "$w/dd" 2>"$w/err"; then die "data mode accepted abs -> /etc/passwd"; fi
grep -q "abs" "$w/err" || { cat "$w/err"; die "the refusal does not name the member"; }
[ "$(ls -A "$w/dd")" = keepme ] || die "data refusal left files in the target"
rc=0; S download-dir "$sb/a" "$w/dd" 2>/dev/null || rc=$?
[ $rc = 5 ] || die "data refusal exit $rc, want 5 (transfer)"
ok "download-dir --links data: refused with exit 5 naming the member; target untouched"
S download-dir --exclude abs --exclude deep --exclude sparse "$sb/a" "$w/dd" || die "download-dir data"
[ -f "$w/dd/keepme" ] && [ -f "$w/dd/f0644" ] || die "download-dir into an existing folder merges"
ok "download-dir --links data: merge into an existing folder"

# ---- exclude like GNU tar, names ----
mkdir -p "$sb/ex/a/node_modules" "$sb/ex/node_modules" "$sb/ex/cache" "$sb/ex/a/cache"
touch "$sb/ex/a/x.o" "$sb/ex/y.o" "$sb/ex/keep" "$sb/ex/cache/c" "$sb/ex/a/cache/c"
S download-dir --exclude node_modules --exclude ./cache --exclude '*.o' "$sb/ex" "$w/ex"
[ "$(cd "$w/ex" && find . | LC_ALL=C sort | tr '\n' ' ')" = ". ./a ./a/cache ./a/cache/c ./keep " ] ||
	die "exclude: $(cd "$w/ex" && find . | tr '\n' ' ')"
S download-dir --name keep --name a "$sb/ex" "$w/nm"
[ "$(ls -A "$w/nm" | tr '\n' ' ')" = "a keep " ] || die "names"
ok "download-dir: exclude (unanchored, ./ anchors at the top) and names"

# ---- upload_dir merges; make_readable ----
mkdir -p "$w/u1/sub" && echo new >"$w/u1/sub/f" && echo top >"$w/u1/t"
mkdir -p "$sb/m/sub" && echo stays >"$sb/m/sub/other" && echo old >"$sb/m/t"
S upload-dir "$w/u1" "$sb/m"
[ "$(cat "$sb/m/t")" = top ] && [ "$(cat "$sb/m/sub/other")" = stays ] && [ "$(cat "$sb/m/sub/f")" = new ] ||
	die "upload-dir merge"
mkdir -p "$w/u2/d" && echo s >"$w/u2/d/secret" && chmod 0600 "$w/u2/d/secret" && chmod 0700 "$w/u2/d"
echo x >"$w/u2/run" && chmod 0700 "$w/u2/run"
S upload-dir --readable "$w/u2" "$sb/r"
[ "$(stat -c %a "$sb/r/d" "$sb/r/d/secret" "$sb/r/run" | tr '\n' ' ')" = "755 644 755 " ] ||
	die "make_readable: $(stat -c %a "$sb/r/d" "$sb/r/d/secret" "$sb/r/run")"
ok "upload-dir: merge into an existing folder; --readable is a+rX"

# ---- upload_path: a folder replaces, a file lands in its parent ----
mkdir -p "$sb/rp/old" && echo gone >"$sb/rp/deleted"
S upload-path "$w/u1" "$sb/rp"
[ ! -e "$sb/rp/deleted" ] && [ ! -e "$sb/rp/old" ] && [ "$(cat "$sb/rp/t")" = top ] || die "upload-path folder replaces"
[ "$(stat -c %a "$sb/rp")" = 777 ] || die "upload-path folder made world-writable"
echo exe >"$w/tool" && chmod 0750 "$w/tool"
S upload-path "$w/tool" "$sb/np/deeper/tool2"
[ "$(stat -c %a "$sb/np/deeper" "$sb/np/deeper/tool2" | tr '\n' ' ')" = "777 750 " ] || die "upload-path file (new parent)"
mkdir -p "$sb/sticky" && chmod 1755 "$sb/sticky"
S upload-path "$w/tool" "$sb/sticky/tool"
[ "$(stat -c %a "$sb/sticky")" = 1777 ] || die "upload-path keeps a sticky bit: $(stat -c %a "$sb/sticky")"
nostage "$sb"
ok "upload-path: folder replaced and opened; file into a created/opened parent (sticky kept)"

# ---- download_path ----
[ "$(S download-path "$sb/np/deeper/tool2" "$w/got/tool")" = file ] || die "download-path file"
[ "$(stat -c %a "$w/got/tool")" = 750 ] && [ "$(cat "$w/got/tool")" = exe ] || die "download-path file mode"
[ "$(S download-path "$sb/nothing" "$w/got/none")" = absent ] && [ ! -e "$w/got/none" ] || die "download-path absent"
[ "$(S download-path "$sb/m" "$w/got/m")" = dir ] && [ "$(cat "$w/got/m/sub/other")" = stays ] || die "download-path dir"
S download-path --archive-copy "$w/one.tar" "$sb/np/deeper/tool2" "$w/got/t2" >/dev/null
[ "$(tar -tf "$w/one.tar")" = tool2 ] || die "a file's archive holds one member named as the file"
ln -s tool2 "$sb/np/deeper/lnk"
[ "$(S download-path --archive-copy "$w/lnk.tar" "$sb/np/deeper/lnk" "$w/got/lnk")" = file ] || die "download-path via a symlink"
[ -f "$w/got/lnk" ] && [ ! -L "$w/got/lnk" ] && [ "$(cat "$w/got/lnk")" = exe ] || die "download-path via a symlink: content"
[ "$(tar -tf "$w/lnk.tar")" = lnk ] || die "the member is named as the path names the file"
S upload-archive "$w/one.tar" file "$sb/replay/tool2" || die "upload-archive file"
[ "$(stat -c %a "$sb/replay/tool2")" = 750 ] && [ "$(cat "$sb/replay/tool2")" = exe ] || die "upload-archive file: mode or content"
ok "download-path: file with its mode, folder, absent; a file's archive is one member"
ok "download-path through a symlink names the member as the path; upload-archive of a file's archive"

# ---- a file's upload places the one member named as the target, nothing beside ----
# The agent refuses (ONLY) any other member of a file's archive: another name, a second copy, a
# symlink or folder named like the file. Against the previous agent every one was accepted
# (exit 0): "beside" and "evil" landed next to the target, the symlink and the folder at it.
python3 - "$w" <<'EOF'
import io, sys, tarfile
def tar(name, members):
    with tarfile.open("%s/upf-%s.tar" % (sys.argv[1], name), "w", format=tarfile.PAX_FORMAT) as t:
        for n, kind, data in members:
            ti = tarfile.TarInfo(n)
            ti.type = {"f": tarfile.REGTYPE, "d": tarfile.DIRTYPE, "l": tarfile.SYMTYPE}[kind]
            ti.mode = 0o755 if kind == "d" else 0o644
            ti.linkname = "/etc/passwd" if kind == "l" else ""
            ti.size = len(data) if kind == "f" else 0
            t.addfile(ti, io.BytesIO(data) if kind == "f" else None)
tar("beside", [("tool2", "f", b"t"), ("beside", "f", b"evil")])
tar("first", [("evil", "f", b"evil"), ("tool2", "f", b"t")])
tar("twice", [("tool2", "f", b"one"), ("tool2", "f", b"two")])
tar("link", [("tool2", "l", b"")])
tar("dir", [("tool2", "d", b""), ("tool2/x", "f", b"x")])
tar("empty", [])
EOF
mkdir -p "$sb/uf" && echo v >"$sb/uf/victim"
for a in beside first twice link dir empty; do
	for walk in "" --force-walk; do
		rc=0
		S upload-archive $walk "$w/upf-$a.tar" file "$sb/uf/tool2" 2>"$w/err" || rc=$?
		[ $rc = 5 ] || { cat "$w/err"; die "a file's archive ($a): exit $rc, want 5"; }
		[ "$(ls -A "$sb/uf")" = victim ] || die "a file's archive ($a): $(ls -A "$sb/uf")"
	done
done
rc=0
S upload-archive "$w/one.tar" file "$sb/uf/renamed" 2>"$w/err" || rc=$?
[ $rc = 5 ] && grep -q "may hold only the one member renamed" "$w/err" ||
	{ cat "$w/err"; die "a file's archive under another name: exit $rc"; }
[ "$(ls -A "$sb/uf")" = victim ] || die "a file's archive under another name placed something"
S upload-path "$w/tool" "$sb/uf/othername" && [ "$(cat "$sb/uf/othername")" = exe ] ||
	die "upload-path of a file under another name"
nostage "$sb"
ok "a file's upload: another member, the file twice, a symlink or folder named like it, nothing, another name: refused (exit 5), nothing at or beside the target"

# ---- upload_archive: keep_out ----
mkdir -p "$sb/keep" && echo precious >"$sb/keep/p" && ln -s keep "$sb/link"
rc=0; S upload-archive --keep-out "$sb/keep" "$w/copy.tar" dir "$sb/link" 2>"$w/err" || rc=$?
[ $rc = 1 ] || die "upload-archive diverted into keep_out: exit $rc"
grep -q "keep_out" "$w/err" || die "no warning"
[ "$(ls -A "$sb/keep")" = p ] || die "keep_out touched"
ok "upload-archive: a target diverted into keep_out returns false, touches nothing"

# ---- JSON lines ----
# sbx session answers as operations end: the client waits for the upload before the requests
# that read what it wrote (tests/lib/session_drive.py).
drive() { # SCRIPT OUT SBX-ARGS...: the session driven by SCRIPT, its answers in OUT
	local script=$1 out=$2
	shift 2
	rm -f "$w/answers" && mkfifo "$w/answers"
	python3 "$top/tests/lib/session_drive.py" "$script" "$out" "$w/answers" | "$@" session >"$w/answers"
}
printf '%s\n' \
	"{\"id\":1,\"op\":\"upload_dir\",\"source\":\"$w/u1\",\"target\":\"$sb/j\"}" wait \
	"{\"id\":2,\"op\":\"remote_kind\",\"path\":\"$sb/j/t\"}" \
	"{\"id\":3,\"op\":\"download_path\",\"source\":\"$sb/j/sub\",\"target\":\"$w/j\"}" \
	"{\"id\":4,\"op\":\"exec_as_root\",\"command\":\"id -u\"}" \
	"{\"id\":5,\"op\":\"remote_kind\",\"path\":\"$sb/none\"}" >"$w/j.in"
drive "$w/j.in" "$w/j.out" S
grep -q '"id":1,"ok":true' "$w/j.out" && grep -q '"id":2,"ok":true,"kind":"file"' "$w/j.out" &&
	grep -q '"id":3,"ok":true,"kind":"dir"' "$w/j.out" && grep -q '"id":5,"ok":true,"kind":null' "$w/j.out" &&
	grep -q '"id":4,"ok":true,"outcome":"exited","code":0,"user_fallback":false,.*"stdout":"0\\n"' "$w/j.out" ||
	{ cat "$w/j.out"; die "JSON lines"; }
[ "$(cat "$w/j/f")" = new ] || die "JSON download_path"
ok "session: upload_dir, remote_kind, download_path, exec_as_root as JSON lines"

# ---- an upload's bytes are not copied through the agent's memory ----
# The agent's serve process (with its reaped transfer children, whose counts the kernel adds
# to their parent's) as /proc/PID/io counts read()/write() bytes; spliced bytes are not
# counted. An upload's bytes are read once (by the unpacking child, from its pipe) and written
# once (into the files): were the relay copying them (connection -> memory -> pipe) both
# would double. Some of them are copied on purpose: past 2 ms of a full pipe the relay reads on
# into its ring (below), so a busy machine sees a few MiB more (one run: 2.7 MiB); a quarter of
# the upload is the bound. (A download's relay copies on purpose while its staging pipe is full, so its
# counts vary from run to run: docs/transfers.md.)
mkdir -p "$w/bulk"
head -c $((48 << 20)) /dev/urandom >"$w/bulk/a"
head -c $((16 << 20)) /dev/urandom >"$w/bulk/b"
bulk=$((64 << 20))
io='cat /proc/$PPID/io'
printf '%s\n' \
	"{\"id\":1,\"op\":\"upload_dir\",\"source\":\"$w/bulk\",\"target\":\"$sb/bulk\"}" wait \
	"{\"id\":2,\"op\":\"exec_as_root\",\"command\":\"$io\"}" >"$w/bulk.in"
drive "$w/bulk.in" "$w/bulk.up" V "eof -1 -1"
cmp "$w/bulk/a" "$sb/bulk/a" && cmp "$w/bulk/b" "$sb/bulk/b" || die "bulk upload differs"
ioget() { grep -o "$2: [0-9]*" "$1" | cut -d' ' -f2; }
ur=$(ioget "$w/bulk.up" rchar) uw=$(ioget "$w/bulk.up" wchar)
[ -n "$ur" ] && [ -n "$uw" ] || { cat "$w/bulk.up"; die "no /proc/PID/io"; }
slack=$((bulk / 4))
[ "$ur" -lt $((bulk + slack)) ] && [ "$uw" -lt $((bulk + slack)) ] ||
	die "upload of $bulk bytes: the agent read $ur and wrote $uw (a copy through its memory)"
ok "upload bytes spliced, not copied, by the agent: 64 MiB up, the agent read $((ur >> 20)) MiB and wrote $((uw >> 20)) MiB"

# ---- an upload whose unpacking child stops: the session stays answered ----
# The agent splices an upload's payloads into the child's pipe and waits while that pipe is
# full; past 2 ms the rest goes through its ring, so the host's PINGs are still read. With a
# 2 s session timeout the host gives up on an agent that does not answer for 2 s; the child
# is stopped for 5 s mid-upload and the upload must still complete.
head -c $((256 << 20)) /dev/zero >"$w/bulk/zero"
# sbx itself in the background (not a function's subshell): its child is the agent, whose
# child is the upload's.
"$sbx" --runner local --timeout 2 upload-dir "$w/bulk" "$sb/stall" >"$w/stall.out" 2>&1 &
up=$!
child=
for _ in $(seq 500); do
	a=$(pgrep -P $up || true)
	[ -n "$a" ] && child=$(pgrep -P "$a" || true)
	[ -n "$child" ] && break
	sleep 0.01
done
[ -n "$child" ] || die "stall: no upload child seen"
kill -STOP $child
sleep 5
kill -CONT $child
wait $up || { cat "$w/stall.out"; die "stall: the upload failed while its child was stopped"; }
cmp "$w/bulk/zero" "$sb/stall/zero" || die "stall: the upload differs"
rm -f "$w/bulk/zero"
ok "an upload's child stopped for 5 s mid-stream: the agent still answers (2 s session timeout), the upload completes"

# ---- hostile archives into the sandbox: refused, target and victim untouched ----
hostile_archives

# ---- unsafe members on the way out ----
mkdir -p "$sb/u" && mkfifo "$sb/u/fifo" && echo f >"$sb/u/f"
rc=0; S download-dir "$sb/u" "$w/u" 2>"$w/err" || rc=$?
[ $rc = 5 ] && grep -q fifo "$w/err" && [ ! -e "$w/u" ] || die "a FIFO was downloaded (exit $rc)"
S download-dir --skip-unsafe "$sb/u" "$w/u" && [ -f "$w/u/f" ] && [ ! -e "$w/u/fifo" ] || die "skip-unsafe"
ok "download-dir: a FIFO is refused (exit 5), skipped with --skip-unsafe"

# ---- an agent that is not root: what it may do works, and it says what it could not ----
cp "$agent" "$w/agent65534" && chmod 0755 "$w/agent65534" && chmod 0755 "$w"
mkdir -p "$sb/nobody" && chown 65534:65534 "$sb/nobody" && chmod 0755 "$sb"
N() { "$sbx" --agent "$w/agent65534" --via "setpriv --reuid 65534 --regid 65534 --clear-groups {agent} serve" "$@"; }
N --json upload-dir "$src/ro" "$sb/nobody/ro" >"$w/n.json" || { cat "$w/n.json"; die "upload-dir as uid 65534"; }
grep -q '"note":"[0-9]* members keep uid 65534' "$w/n.json" || { cat "$w/n.json"; die "no note about owners"; }
[ "$(stat -c %u "$sb/nobody/ro/inner/file")" = 65534 ] && [ "$(stat -c %a "$sb/nobody/ro/inner")" = 555 ] ||
	die "uid 65534: owner or mode"
rc=0; N upload-dir "$w/u1" "$sb/rootonly" 2>"$w/err" || rc=$?
[ $rc = 5 ] && grep -q "Permission denied" "$w/err" || { cat "$w/err"; die "uid 65534 into a root folder: exit $rc"; }
[ ! -e "$sb/rootonly" ] || die "uid 65534 created a root folder"
mkdir -p "$sb/rootdir" && chmod 0755 "$sb/rootdir"
rc=0; N upload-path "$w/tool" "$sb/rootdir/tool" 2>"$w/err" || rc=$?
[ $rc = 5 ] && grep -q "not writable by uid 65534" "$w/err" || { cat "$w/err"; die "uid 65534 file into a root parent: exit $rc"; }
chmod 0777 "$sb/rootdir"
N upload-path "$w/tool" "$sb/rootdir/tool" 2>"$w/err" && [ -f "$sb/rootdir/tool" ] || { cat "$w/err"; die "uid 65534 into a world-writable parent"; }
nostage "$sb"
ok "agent as uid 65534: uploads where it may, notes owners it could not set, clear refusals"

# ---- channel cuts: the target is the old tree or the new one; nothing staged is left ----
old=$w/cut-old new=$w/cut-new
mkdir -p "$old/d" "$new/d"
echo old >"$old/d/f" && echo o2 >"$old/only-old"
head -c 3000000 /dev/urandom >"$new/big" && echo new >"$new/d/f" && echo n2 >"$new/only-new"
# The byte counts of an uncut run with the very same request sizes.
SBX_CUTTER_LOG=$w/counts V "eof -1 -1" upload-path "$new" "$sb/cut"
up=$(awk '/^up/{print $2}' "$w/counts")
rm -rf "$sb/cut"
SBX_CUTTER_LOG=$w/counts V "eof -1 -1" download-dir --archive-copy "$w/cut.tar" "$new" "$w/cutdl"
rm -rf "$w/cutdl" "$w/cut.tar"
down=$(awk '/^up/{print $4}' "$w/counts")
[ "$up" -gt 3000000 ] && [ "$down" -gt 3000000 ] || die "cutter counts: up $up down $down"
cuts=0
# upload_cut MODE "UP DOWN" LABEL: an upload-path of $new over a copy of $old through the
# cutter must fail as unavailable and leave the old tree or the new one, and no staging.
upload_cut() {
	rm -rf "$sb/cut" && cp -a "$old" "$sb/cut"
	local rc=0
	V "$1 $2" upload-path "$new" "$sb/cut" 2>"$w/err" || rc=$?
	[ $rc = 3 ] || { cat "$w/err"; die "upload $3 ($1): exit $rc, want 3"; }
	for i in $(seq 50); do [ -n "$(staged "$sb")" ] || break; sleep 0.1; done
	nostage "$sb"
	same "$old" "$sb/cut" >/dev/null 2>&1 || diff <(shape "$new") <(shape "$sb/cut") >/dev/null ||
		die "upload $3 ($1): a mix of old and new"
	cuts=$((cuts + 1))
}
for mode in eof kill; do
	for at in 40 200 $((up / 3)) $((up - 200)) $((up - 60)) $((up - 1)); do
		upload_cut "$mode" "$at -1" "cut at $at"
	done
	# Right after the whole COMMIT, before its answer: the agent commits; the host only
	# knows it lost the channel. The new tree, whole (or the old one if killed first).
	upload_cut "$mode" "$up -1" "answer cut"
	for at in 40 300 $((down / 2)) $((down - 100)) $((down - 1)); do
		rm -rf "$w/cutdl" && cp -a "$old" "$w/cutdl"
		rc=0
		V "$mode -1 $at" download-dir --archive-copy "$w/cut.tar" "$new" "$w/cutdl" 2>"$w/err" || rc=$?
		[ $rc = 3 ] || { cat "$w/err"; die "download cut at $at ($mode): exit $rc, want 3"; }
		nostage "$w"
		same "$old" "$w/cutdl" || die "download cut at $at ($mode): target changed"
		[ ! -e "$w/cut.tar" ] && ! ls "$w"/cut.tar.partial-* >/dev/null 2>&1 || die "archive_copy left after a cut"
		cuts=$((cuts + 1))
	done
done
ok "channel cut at $cuts points (eof and kill; upload ~$up bytes up, download ~$down down): exit 3, old tree or new, no staging left"

# ---- the host's half against an impersonated agent (tests/transfer_fake.sh) ----
out=$(bash "$(dirname "$0")/transfer_fake.sh" "$sbx" 2>&1) || { echo "$out"; die "transfer_fake.sh"; }
echo "$out" | grep '^    ' || true
echo "$out" | grep '^  ok: '
pass=$((pass + $(echo "$out" | grep -c '^  ok: ')))

echo "transfer: $pass passed"
