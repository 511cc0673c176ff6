#!/bin/bash
# ns_suites.sh SBX: the transfer and supervision suites through real namespace sandboxes, on
# each image that `make images` built for this machine (BusyBox and Debian minbase):
# - fidelity by replay: the fidelity tree (tests/lib/fidelity_tree.sh, with a 3 GiB sparse
#   file) uploaded into sandbox A, downloaded with archive_copy, replayed into sandbox B and
#   downloaded again: the three archives (the host's pack of the source, A's, B's) must be
#   byte-identical, which holds only if every mode, owner, mtime, link and name survived;
# - every hostile archive of tests/hostile_tar.py refused in the sandbox (exit 5), the target
#   unchanged;
# - supervision: harnesses that escape with setsid, a double fork, a trapped TERM, a stopped
#   process, and one past its deadline: signed receipts with termination witnessed, and no
#   process of the run left in the sandbox.
# One "  ok: ..." line per check; everything under one temp folder, removed on exit.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root
sbx=$(realpath "$1")
agent=$top/build/agent/x86_64/sbx-agent
export SBX_NS_DIR=$w/state
on_exit remove_sandboxes
. "$top/tests/lib/fidelity_tree.sh"
. "$top/tests/lib/escapes.sh"
src=$w/src
make_fidelity_tree "$src" sparse
"$agent" pack "$src" >"$w/c0.tar" 2>/dev/null
python3 "$top/tests/hostile_tar.py" "$w/hostile" /etc >/dev/null

for image in busybox-x86_64 debian-x86_64; do
	img=$top/build/images/$image
	[ -d "$img" ] || die "no image $img (make images)"
	a=$("$sbx" sandbox create --image "$img")
	b=$("$sbx" sandbox create --image "$img")

	in_ns "$a" upload-dir "$src" /data
	in_ns "$a" download-dir --links keep --archive-copy "$w/c1.tar" /data "$w/dl1" >/dev/null
	in_ns "$b" upload-archive "$w/c1.tar" dir /data
	in_ns "$b" download-dir --links keep --archive-copy "$w/c2.tar" /data "$w/dl2" >/dev/null
	cmp -s "$w/c0.tar" "$w/c1.tar" || die "$image: the archive of the uploaded tree differs from the source's"
	cmp -s "$w/c1.tar" "$w/c2.tar" || die "$image: the replayed tree's archive differs"
	[ "$(in_ns "$b" stat /data/f4755 | awk '{print $2, $3}')" = "file 4755" ] || die "$image: set-uid lost: $(in_ns "$b" stat /data/f4755)"
	rm -rf "$w/dl1" "$w/dl2" "$w/c1.tar" "$w/c2.tar"
	ok "$image: fidelity tree (sparse 3 GiB, set-id, owners, links, long paths) through two sandboxes: three archives byte-identical"

	in_ns "$a" sh 'mkdir -p /t && echo before >/t/before'
	n=0
	for h in "$w"/hostile/*.tar; do
		rc=$(rc in_ns "$a" upload-archive "$h" dir /t 2>/dev/null)
		[ $rc = 5 ] || die "$image: $(basename "$h"): exit $rc, want 5"
		n=$((n + 1))
	done
	[ "$(in_ns "$a" sh 'ls -A /t; cat /etc/passwd | head -1')" = "$(printf 'before\nroot:x:0:0:root:/root:%s' "$(sed -n 's/^root:x:0:0:[^:]*:[^:]*:\(.*\)/\1/p' "$img/etc/passwd")")" ] ||
		die "$image: target or /etc changed: $(in_ns "$a" sh 'ls -A /t; head -1 /etc/passwd')"
	ok "$image: $n hostile archives refused in the sandbox (exit 5), target and /etc unchanged"

	# Supervision: each harness leaves something behind; after the run nothing of it is left.
	check_escapes in_ns "$a" "$image" "$w/rec"
	ok "$image: ${#escape_cases[@]} escaping harnesses (setsid, double fork, TERM ignored, SIGSTOP): receipts verified, termination witnessed, nothing left"

	"$sbx" sandbox rm "$a" "$b"
done
