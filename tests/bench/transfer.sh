#!/bin/bash
# make bench-transfer: upload and download through the local runner against a tar pipe
# (tar -C src -cf - . | tar -C dst -xf -) on the same data, in one run, side by side:
# (a) 1 GiB in 8 files, (b) 50,000 files of 1 KiB in 500 folders. Each figure is the median
# of RUNS runs (default 5), the three ways interleaved so they see the same machine. Also the
# agent's peak RSS (agent + transfer process, through a relay that reads rusage), and the
# reference's way once for the record (tar czf to a temporary file, copy, tar xzf).
# Runs on a private tmpfs (unshare -m) so no disk speed enters the figures.
. "$(dirname "$0")/../lib/suite.sh"
suite_begin root tmpfs=12g
sbx=$(realpath "$1")
cutter=$(realpath "$2")
runs=${RUNS:-5}
agent=${SBX_AGENT_DIR:-$(dirname "$sbx")/../agent}/x86_64/sbx-agent

secs() { # command...: prints its wall time
	local t0 t1
	t0=$(now)
	"$@" >/dev/null
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN{print b - a}'
}
div() { awk -v a="$1" -v b="$2" 'BEGIN{print a / b}'; }
median() { sort -g | awk '{a[NR]=$1} END{m=a[int((NR+1)/2)]; printf "%.3f", m}'; }

mkdata() {
	mkdir -p "$w/big" "$w/small"
	for i in $(seq 8); do head -c $((128 << 20)) /dev/urandom >"$w/big/f$i"; done
	for d in $(seq 500); do
		mkdir "$w/small/d$d"
		head -c $((100 * 1024)) /dev/urandom | split -b 1024 -a 2 - "$w/small/d$d/f"
	done
}
mkdata
[ "$(find "$w/small" -type f | wc -l)" = 50000 ] || die "small set is not 50,000 files"

tarpipe() { mkdir "$2" && tar -C "$1" -cf - . | tar -C "$2" -xf -; }
up() { "$sbx" --runner local upload-dir "$1" "$2"; }
down() { "$sbx" --runner local download-dir "$1" "$2"; }
reference() {
	tar -C "$1" -czf "$w/ref.tgz" . && cp "$w/ref.tgz" "$w/ref2.tgz" && mkdir "$2" &&
		tar -C "$2" -xzf "$w/ref2.tgz"
	rm -f "$w/ref.tgz" "$w/ref2.tgz"
}

printf '%-28s %9s %9s %9s %9s %9s %11s\n' "set ($runs runs, median)" "tar pipe" upload ratio download ratio "reference"
for set in big small; do
	: >"$w/t.tar" && : >"$w/t.up" && : >"$w/t.down"
	for r in $(seq "$runs"); do
		secs tarpipe "$w/$set" "$w/dst" >>"$w/t.tar"
		rm -rf "$w/dst"
		secs up "$w/$set" "$w/dst" >>"$w/t.up"
		rm -rf "$w/dst"
		secs down "$w/$set" "$w/dst" >>"$w/t.down"
		rm -rf "$w/dst"
	done
	ref=$(secs reference "$w/$set" "$w/dst")
	rm -rf "$w/dst"
	t=$(median <"$w/t.tar") u=$(median <"$w/t.up") d=$(median <"$w/t.down")
	name=$([ $set = big ] && echo "(a) 1 GiB in 8 files" || echo "(b) 50,000 x 1 KiB")
	printf '%-28s %8ss %8ss %8.2fx %8ss %8.2fx %10.2fs\n' "$name" "$t" "$u" "$(div "$t" "$u")" \
		"$d" "$(div "$t" "$d")" "$ref"
done
echo "(ratio = tar pipe seconds / sbx seconds: above 1.00 is faster than the tar pipe)"

# Peak RSS of the agent and its transfer process, through the relay.
for set in big small; do
	SBX_CUTTER_LOG=$w/rss.up "$sbx" --agent "$agent" --via "$cutter eof -1 -1 -- {agent} serve" \
		upload-dir "$w/$set" "$w/dst" >/dev/null
	rm -rf "$w/dst"
	SBX_CUTTER_LOG=$w/rss.down "$sbx" --agent "$agent" --via "$cutter eof -1 -1 -- {agent} serve" \
		download-dir "$w/$set" "$w/dst" >/dev/null
	rm -rf "$w/dst"
	printf 'agent peak RSS, %-5s upload %5.1f MiB, download %5.1f MiB (target <= 8 MiB)\n' "$set:" \
		"$(awk '{print $6 / 1024}' "$w/rss.up")" "$(awk '{print $6 / 1024}' "$w/rss.down")"
done
