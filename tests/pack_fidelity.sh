#!/bin/bash
# pack_fidelity.sh AGENT: `sbx-agent pack` against GNU tar. A tree with every kind of thing a
# rollout produces (modes 0000..7777, a 0555 folder holding files, owners 1001/2002, symlinks
# relative/absolute/dangling, hard links, empty folders, names with spaces, newlines and
# non-UTF-8 bytes, 255-byte names, a path past 4096 bytes) is packed, unpacked with GNU tar
# as root with numeric owners, and compared entry by entry; the reported SHA-256 must be the
# stream's; unsafe members are refused, or skipped with --skip-unsafe; excludes follow GNU tar.
# Runs in a private mount namespace on a tmpfs (unshare -m), so nothing outside is touched.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root tmpfs
agent=$(realpath "$1")
src=$w/src
. "$top/tests/lib/fidelity_tree.sh"
make_fidelity_tree "$src"
# Times before 1970 with a fraction (written as POSIX says: -86399.999999995 is 5 ns after
# -86400 s; the pinned libarchive wrote "-86400.000000005" before
# toolchain/libarchive-pax-negative-time.patch, and the entry comparison below failed), and a
# symlink with a second name (packed as two symlinks before; GNU tar writes the second as a
# hard link, and the link count compared below was 1 on the extracted side).
for t in -1.000000005 -86400.5 -0.000000001 -86399.999999995 -5.25 -1; do
	touch "$src/t$t" && touch -d "@$t" "$src/t$t"
	ln -s "t$t" "$src/lt$t" && touch -h -d "@$t" "$src/lt$t"
done
ln -P "$src/rel" "$src/rel-hard"

out=$w/out.tar
"$agent" pack "$src" >"$out" 2>"$w/stats" || die "pack: $(cat "$w/stats")"
sha=$(sed -n 's/.* sha256 \([0-9a-f]*\).*/\1/p' "$w/stats")
[ "$sha" = "$(sha256sum "$out" | cut -d' ' -f1)" ] || die "sha256 mismatch"
mkdir "$w/dst"
# GNU tar cannot create paths past PATH_MAX (it names them whole): the deep leaf is checked by
# name and content below instead. It does not know pax's hdrcharset (names as bytes): quiet.
T="tar --warning=no-unknown-keyword --warning=no-timestamp"
$T -C "$w/dst" -xpf "$out" --numeric-owner --exclude=deep
leaf=$($T -tf "$out" | grep '/leaf$')
[ ${#leaf} -gt 4096 ] || die "no path past 4096 bytes in the archive"
[ "$($T -xOf "$out" "$leaf")" = bottom ] || die "deep leaf content lost"
# Compare every entry: type, mode, owner, size, mtime (ns), link target, link count.
list() {
	(cd "$1" && find . -mindepth 1 -printf '%P\t%y\t%m\t%U:%G\t%s\t%T@\t%l\t%n\n' | LC_ALL=C sort)
}
# Directory sizes differ between filesystems only by block usage; mtimes of folders are set
# after their contents by tar too.
list "$src" | grep -av '^deep' | awk -F'\t' '$2=="d"{$5="-"}1' >"$w/a"
list "$w/dst" | awk -F'\t' '$2=="d"{$5="-"}1' >"$w/b"
diff "$w/a" "$w/b" >"$w/diff" || die "pack -> GNU tar is not exact: $(head -20 "$w/diff")"
# Same tree, same bytes.
"$agent" pack "$src" 2>/dev/null | cmp -s - "$out" || die "not reproducible"
# Unsafe members.
mkfifo "$src/fifo"
[ "$(rc "$agent" pack "$src" 2>"$w/err")" != 0 ] || die "a FIFO was packed"
grep -q 'fifo is a FIFO: refused' "$w/err" || die "the FIFO's refusal: $(cat "$w/err")"
"$agent" pack --skip-unsafe "$src" 2>"$w/stats" | $T -tf - >"$w/names"
! grep -qx fifo "$w/names" || die "a FIFO was packed with --skip-unsafe"
grep -q 'skipped 1 ' "$w/stats" || die "--skip-unsafe: $(cat "$w/stats")"
rm "$src/fifo"
# Excludes, names.
"$agent" pack --exclude 'f0*' --exclude './ro' "$src" 2>/dev/null | $T -tf - >"$w/names"
! grep -q '^f0' "$w/names" && ! grep -q '^ro' "$w/names" && grep -q '^f1777$' "$w/names" ||
	die "--exclude 'f0*' --exclude ./ro: f0* or ro/ kept, or f1777 dropped"
# The same names as GNU tar's own --exclude, through the agent's matcher (shared/exclude.c;
# test_exclude checks it against GNU tar at random): POSIX classes, ranges, negations,
# escapes, anchors. The class patterns kept every name with the previous matcher.
for p in 'f[[:digit:]][[:digit:]]55' '[[:upper:]]*' '*[![:alnum:]]*' 'f[0-2]*' 'f[!0-2]7*' \
	'[[:punct:]]*' './[[:lower:]][[:lower:]]' 'n[[:alpha:]]*' '*[[:space:]]*' 'ro/*' 'h[\2]'; do
	"$agent" pack --exclude "$p" "$src" 2>/dev/null | $T -tf - | LC_ALL=C sort >"$w/ours"
	LC_ALL=C tar -C "$src" --exclude "$p" -cf - . | $T -tf - | sed -n 's|^\./\(.\)|\1|p' |
		LC_ALL=C sort >"$w/gnu"
	cmp -s "$w/ours" "$w/gnu" || die "--exclude '$p' differs from GNU tar: $(diff "$w/ours" "$w/gnu" | head)"
done
"$agent" pack --name ro --name h1 "$src" 2>/dev/null | $T -tf - | sed 's|/.*||' | sort -u >"$w/top"
[ "$(tr '\n' ' ' <"$w/top")" = "h1 ro " ] || die "--name ro --name h1: $(tr '\n' ' ' <"$w/top")"
# A file that shrinks while it is packed is refused, not sent torn and not a crash: with the
# mapped read (a SIGBUS past the new end, caught) and with pread (SBX_PACK_NOMAP=1). The pack
# blocks on a full pipe a few hundred KiB into the 8 MiB file; the file is cut to 100 KiB
# there, then the pipe drained.
mkdir "$w/shrink"
for way in mapped pread; do
	head -c $((8 << 20)) /dev/urandom >"$w/shrink/big"
	python3 - "$agent" "$w/shrink" "$way" <<'PY' || die "a file shrinking under the pack ($way)"
import os, subprocess, sys, time
agent, d, way = sys.argv[1:]
env = dict(os.environ)
if way == "pread":
    env["SBX_PACK_NOMAP"] = "1"
p = subprocess.Popen([agent, "pack", d], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
time.sleep(0.5)  # the pack fills the pipe and waits
assert p.poll() is None, "the pack did not wait on the full pipe"
os.truncate(os.path.join(d, "big"), 100 * 1024)
out, err = p.communicate()
assert p.returncode == 1, f"{way}: exit {p.returncode} (a negative one is a signal): {err!r}"
assert b"big shrank while it was packed" in err, f"{way}: {err!r}"
assert len(out) < (8 << 20), f"{way}: {len(out)} bytes out"
PY
done
echo "pack: a file shrinking under the pack is refused (mapped read and pread)"
echo "pack fidelity: ok"
