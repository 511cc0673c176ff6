#!/bin/bash
# pressure.sh SBX: the ns limits under load (issue 23, point 5), as root, confined to its work
# folder (a 256 MiB tmpfs holding $SBX_NS_DIR). A hostile sandbox H, made with --memory-mib 64
# --pids 64 --cpu 0.5 --disk-gib 0.02, runs under one supervised run (ended by its 10 s
# deadline), all at once: a fork bomb, a memory hog (two loops of build/harness/memhog taking
# 256 MiB, killed and started again), a disk filler (64 KiB writes into its layer until
# ENOSPC, then truncate and again) and a CPU burner; the bomb and the burner renice themselves
# to 19 so that, within H's half CPU, the hog and the filler get to run again and again (the
# host still faces every limit at once: the pids full, the memory at its limit, the layer full,
# the quota used). The bomb has no bound of its own: it starts only once the host reads H's
# limits in its cgroup. Beside H two neighbours made as a user makes them (no limits). The
# same work is timed first without the load (3 s), then under it:
# - the load bites: H's cgroup, read on the host, counts OOM kills (>= 2), refused forks
#   (pids.events), throttled CPU periods; the filler met ENOSPC (>= 1); H's peak memory and
#   process count stay within its limits; its run's receipt: deadline, witnessed, no residue;
# - the neighbours keep working: every `exec -- echo` answers (each under 5 s), every 64 KiB
#   upload + download comes back byte for byte (under 5 s), a supervised run in a neighbour
#   ends with its own exit code (7), 1 MiB uploaded before the load is intact after it;
# - the host keeps working: every fork+exec of /bin/true (each under 2 s); sampled every
#   0.2 s, the median of MemAvailable under load is at most H's memory and disk (its layer is
#   a tmpfs: memory) plus 768 MiB below the baseline's (medians, and that slack: the machine's
#   other work moves MemAvailable by hundreds of MiB), the processes in the sandboxes' pid
#   namespaces (read on the host) at most H's pids plus 40 above, the free space of the
#   filesystem holding $SBX_NS_DIR (only this suite writes there) at most 16 MiB below. The
#   host's whole process count is a figure only (other tests here run fork storms of 511);
# - afterwards H answers, and `sandbox rm` leaves no cgroup folder of it and no process in it.
# Latencies are printed as figures, baseline against load; the bounds are generous (a noisy
# 2-core machine). Negative control: a sandbox U made without limits, as a user makes one,
# runs a bounded version of the same load (memhog holding 2 GiB, build/harness/storm's tree
# of 1023 sleeping processes, a 64 MiB file in its layer) and must take the host past each of
# those three bounds (medians over 1 s), so each host check is shown able to fail: a sandbox
# made without limits has none. The checks that the load bites were seen failing when it did
# not: a first version started the bomb with `nice`, which the BusyBox image lacks ("the fork
# bomb never met the process limit").
. "$(dirname "$0")/lib/suite.sh"
suite_begin root tmpfs=256m
sbx=$(realpath "$1")
hd=${SBX_HARNESS_DIR:-$top/build/harness}
for p in memhog storm; do [ -x "$hd/$p" ] || die "no $hd/$p (make check builds it)"; done
export SBX_NS_DIR=$w/ns
on_exit remove_sandboxes
mem_mib=64 pids=64 disk_mib=20
mem_slack=768 pids_slack=40 disk_slack=16
mem_avail() { awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo; }
[ "$(mem_avail)" -ge 4096 ] || die "needs 4 GiB available for the negative control (has $(mem_avail) MiB)"

# sample FILE NAME...: the host every 0.2 s, until FILE.stop appears: MemAvailable (MiB), free
# MiB on the filesystem of $SBX_NS_DIR, the host's processes, and those in the pid namespaces
# of the sandboxes NAME (their /proc/PID/ns/pid as the host reads it).
sample() {
	local out=$1 m f n re
	shift
	re=$(for n in "$@"; do sed -n 's/^pidns=//p' "$SBX_NS_DIR/$n/state"; done | paste -sd '|')
	while [ ! -e "$out.stop" ] && [ -d "$SBX_NS_DIR" ]; do
		m=$(mem_avail)
		f=$(df -Pk "$SBX_NS_DIR" | awk 'NR == 2 { print int($4 / 1024) }')
		set -- /proc/[0-9]*
		n=$(find /proc/[0-9]*/ns/pid -maxdepth 0 -printf '%l\n' 2>/dev/null | grep -cE "^pid:\[($re)\]\$" || true)
		echo "$m $f $# $n" >>"$out"
		sleep 0.2
	done
}
stop_sample() { # FILE: ends the sample of FILE (its pid $spid)
	touch "$1.stop"
	wait "$spid"
	spid=
}
spid=
on_exit '[ -z "$spid" ] || kill "$spid" 2>/dev/null'
# host_delta BASE LOAD [N]: "MEMDROP DISKDROP PROCRISE SBXRISE WORSTMEMDROP": medians of the
# load's samples (its last N) against the baseline's; then MemAvailable's worst sample.
# Medians: the machine's other work (compilers, other tests) moves MemAvailable by hundreds of
# MiB in passing, while a sandbox's load holds its footprint.
host_delta() {
	python3 -c '
import statistics as s, sys
def rows(p): return [list(map(int, l.split())) for l in open(p) if len(l.split()) == 4]
b, l = rows(sys.argv[1]), rows(sys.argv[2])
l = l[-int(sys.argv[3]):] if len(sys.argv) > 3 else l
mb, ml = [s.median(c) for c in zip(*b)], [s.median(c) for c in zip(*l)]
print(int(mb[0] - ml[0]), int(mb[1] - ml[1]), int(ml[2] - mb[2]), int(ml[3] - mb[3]),
      int(mb[0] - min(r[0] for r in l)))' "$@"
}
# timed OP COMMAND...: runs it, appending "OP START END" to $w/t.$phase; fails as it fails.
timed() {
	local op=$1 t0=$EPOCHREALTIME st=0
	shift
	"$@" || st=$?
	echo "$op $t0 $EPOCHREALTIME" >>"$w/t.$phase"
	return $st
}
echo_in() { [ "$(in_ns "$1" exec -- echo hi)" = hi ]; }
roundtrip() {
	head -c 65536 /dev/urandom >"$w/up"
	rm -f "$w/down"
	in_ns "$1" upload-path "$w/up" /data/rt >/dev/null &&
		in_ns "$1" download-path /data/rt "$w/down" >/dev/null && cmp -s "$w/up" "$w/down"
}
# work: one round of the neighbours' and the host's work, timed.
work() {
	local n
	for n in $n1 $n2; do
		timed exec echo_in "$n" || die "$phase: exec -- echo in $n"
	done
	timed roundtrip roundtrip "$n1" || die "$phase: upload + download in $n1: the bytes differ or it failed"
	timed fork /bin/true || die "$phase: the host cannot fork+exec /bin/true"
}
# figures PHASE...: "OP N P50_MS MAX_MS" per op of each phase.
figures() {
	python3 -c '
import statistics as s, sys
for ph in sys.argv[1:]:
    t = {}
    for l in open(ph):
        op, a, b = l.split()
        t.setdefault(op, []).append((float(b) - float(a)) * 1000)
    for op, v in sorted(t.items()):
        print(ph.rsplit(".", 1)[1], op, len(v), round(s.median(v), 1), round(max(v), 1))' "$@"
}
# cg NAME KEY: a value of sandbox NAME's cgroup, read on the host (v1 and v2 file names).
cg_rel() { sed -n 's/^cgroup=//p' "$SBX_NS_DIR/$1/state"; }
cg() {
	local rel v2 f k
	rel=$(cg_rel "$1")
	v2=$(sed -n 's/^cgroup_v2=//p' "$SBX_NS_DIR/$1/state")
	case $2/$v2 in
	oom/0) f=memory/$rel/memory.oom_control k=oom_kill ;;
	oom/1) f=$rel/memory.events k=oom_kill ;;
	mempeak/0) f=memory/$rel/memory.max_usage_in_bytes ;;
	mempeak/1) f=$rel/memory.peak ;;
	pidsmax/0) f=pids/$rel/pids.events k=max ;;
	pidsmax/1) f=$rel/pids.events k=max ;;
	pids/0) f=pids/$rel/pids.current ;;
	pids/1) f=$rel/pids.current ;;
	throttled/0) f=cpu/$rel/cpu.stat k=nr_throttled ;;
	throttled/1) f=$rel/cpu.stat k=nr_throttled ;;
	memlimit/0) f=memory/$rel/memory.limit_in_bytes ;;
	memlimit/1) f=$rel/memory.max ;;
	pidslimit/0) f=pids/$rel/pids.max ;;
	pidslimit/1) f=$rel/pids.max ;;
	cpuquota/0) f=cpu/$rel/cpu.cfs_quota_us ;;
	cpuquota/1) f=$rel/cpu.max ;; # "QUOTA PERIOD"
	esac
	if [ -n "${k:-}" ]; then
		awk -v k="$k" '$1 == k { print $2 }' "/sys/fs/cgroup/$f"
	else
		awk 'NR == 1 { print $1 }' "/sys/fs/cgroup/$f"
	fi
}

# The sandboxes; the hostile one gets the harness programs, the neighbours some data.
h=$("$sbx" sandbox create --image busybox --name H --memory-mib $mem_mib --pids $pids --cpu 0.5 \
	--disk-gib 0.02) || die "create H with limits"
n1=$("$sbx" sandbox create --image busybox --name N1) || die "create N1"
n2=$("$sbx" sandbox create --image busybox --name N2) || die "create N2"
mkdir "$w/h" "$w/keep"
cp "$hd/memhog" "$hd/storm" "$w/h/"
in_ns "$h" upload-dir "$w/h" /h >/dev/null || die "upload the harness programs into H"
head -c 1048576 /dev/urandom >"$w/keep/data"
for n in $n1 $n2; do in_ns "$n" upload-dir "$w/keep" /keep >/dev/null || die "upload into $n"; done
ok "H made with memory_mib $mem_mib, pids $pids, cpu 0.5, disk_gib 0.02; neighbours N1 N2 without limits, 1 MiB of data in each"

# The baseline: 3 s of the same work, the host sampled.
phase=base
sample "$w/h.base" "$h" "$n1" "$n2" &
spid=$!
end=$((SECONDS + 3))
while [ $SECONDS -lt $end ]; do work; done
stop_sample "$w/h.base"

# The load, in H: one supervised run, ended by its deadline. The fork bomb has no bound of
# its own: it starts only once the host shows H's cgroup holding its limits.
[ "$(cg "$h" memlimit)" = $((mem_mib << 20)) ] && [ "$(cg "$h" pidslimit)" = $pids ] &&
	[ "$(cg "$h" cpuquota)" = 50000 ] || die "H's cgroup does not hold its limits: not starting the load"
# Every part of the load is the OOM killer's first choice (oom_score_adj 1000, which anyone may
# raise): the harness's own shell is not, so the run still ends by its deadline (a CI run saw
# the killer take that shell: trigger exit, status 137).
load='worst() { echo 1000 >/proc/self/oom_score_adj; }
hog() { while :; do /h/memhog - - 256; done; }
s=$(dd if=/dev/zero bs=65536 count=1 2>/dev/null | tr "\\0" x)
fill() { while :; do echo "$s" 2>>/dev/shm/fill.err >>/fill || : >/fill; done; }
(worst; hog) & (worst; hog) & (worst; fill) &
sh -c "echo 1000 >/proc/self/oom_score_adj; busybox renice -n 19 \$\$ >/dev/null; while :; do :; done" &
sh -c "echo 1000 >/proc/self/oom_score_adj; busybox renice -n 19 \$\$ >/dev/null; b() { b | b & }; b; sleep 60" &
wait'
before="$(cg "$h" oom) $(cg "$h" pidsmax) $(cg "$h" throttled)"
in_ns "$h" run --run-dir /dev/shm/run --timeout 10 -- sh -c "$load" >"$w/rec.h" 2>&1 &
hpid=$!
in_ns "$n2" run --run-dir /tmp/r --timeout 30 -- sh -c 'sleep 3; i=0; while [ $i -lt 20000 ]; do i=$((i + 1)); done; exit 7' >"$w/rec.n2" 2>&1 &
npid=$!
sleep 1
phase=load
sample "$w/h.load" "$h" "$n1" "$n2" &
spid=$!
peak_pids=0
while kill -0 $hpid 2>/dev/null; do
	work
	p=$(cg "$h" pids)
	[ "$p" -le "$peak_pids" ] || peak_pids=$p
done
stop_sample "$w/h.load"
wait $hpid || true
wait $npid || true # sbx run exits with the harness's status: checked below
after="$(cg "$h" oom) $(cg "$h" pidsmax) $(cg "$h" throttled)"

# The load bit.
[ "$(jget trigger "$w/rec.h")" = deadline ] && [ "$(jget status "$w/rec.h")" = 124 ] &&
	[ "$(jget termination_witnessed "$w/rec.h")" = true ] && [ "$(jget residual "$w/rec.h")" = "[]" ] ||
	die "H's run: $(cat "$w/rec.h")"
read -r o0 p0 t0 <<<"$before"
read -r o1 p1 t1 <<<"$after"
peak_mem=$(($(cg "$h" mempeak) >> 20))
enospc=$(in_ns "$h" exec -- grep -c 'No space left on device' /dev/shm/fill.err) || die "H no longer answers after the load"
echo "  figure: H under load: OOM kills +$((o1 - o0)), peak memory $peak_mem MiB (limit $mem_mib), forks refused +$((p1 - p0)), peak processes $peak_pids (limit $pids), CPU periods throttled +$((t1 - t0)), the filler at ENOSPC $enospc times"
[ $((o1 - o0)) -ge 2 ] || die "the memory hog did not meet its limit again and again (oom_kill $o0 -> $o1)"
[ $((p1 - p0)) -ge 1 ] || die "the fork bomb never met the process limit (pids.events max $p0 -> $p1)"
[ $((t1 - t0)) -ge 1 ] || die "the CPU burner was never throttled (nr_throttled $t0 -> $t1)"
# Once is enough to show the layer bounds it: how often the filler runs again within H's half CPU,
# beside the bomb, depends on the machine (a CI run saw 1 in 10 s).
[ "$enospc" -ge 1 ] || die "the disk filler never hit ENOSPC ($enospc)"
[ "$peak_mem" -le $mem_mib ] && [ "$peak_pids" -le $pids ] || die "H went past its limits: $peak_mem MiB, $peak_pids processes"
ok "the load bit: $((o1 - o0)) OOM kills, $((p1 - p0)) forks refused, $((t1 - t0)) throttled periods, ENOSPC $enospc times; H stayed within $mem_mib MiB and $pids processes; its run ended by its deadline, witnessed, nothing left"

# The neighbours and the host kept working.
[ "$(jget status "$w/rec.n2")" = 7 ] || die "the run in N2 under load: $(cat "$w/rec.n2")"
for n in $n1 $n2; do
	rm -rf "$w/back"
	in_ns "$n" download-dir /keep "$w/back" >/dev/null && cmp -s "$w/keep/data" "$w/back/data" ||
		die "$n's data changed"
done
figures "$w/t.base" "$w/t.load" >"$w/fig"
for op in exec roundtrip fork; do
	read -r _ _ nb pb mb < <(grep "^base $op " "$w/fig")
	read -r _ _ nl pl ml < <(grep "^load $op " "$w/fig")
	echo "  figure: $op: baseline p50 $pb ms, max $mb ms (n $nb); under load p50 $pl ms, max $ml ms (n $nl)"
	case $op in fork) bound=2000 ;; *) bound=5000 ;; esac
	calc "$ml < $bound" | grep -qx True || die "$op under load took $ml ms (bound $bound)"
	[ $op != exec ] || exec_max=$ml
	[ "$nl" -ge 3 ] || die "only $nl $op rounds under load"
done
read -r dm dd hp dp dw <<<"$(host_delta "$w/h.base" "$w/h.load")"
bm=$((mem_mib + disk_mib + mem_slack)) bd=$disk_slack bp=$((pids + pids_slack))
echo "  figure: host under load (medians): MemAvailable $(printf %+d $((-dm))) MiB (bound -$bm; worst sample $(printf %+d $((-dw)))), free space on \$SBX_NS_DIR's filesystem $(printf %+d $((-dd))) MiB (bound -$bd), processes in the sandboxes $(printf %+d "$dp") (bound +$bp), on the whole host $(printf %+d "$hp") (not asserted: the machine's other work)"
[ "$dm" -le $bm ] && [ "$dd" -le $bd ] && [ "$dp" -le $bp ] || die "the host was not kept: $dm MiB, $dd MiB, $dp processes"
ok "neighbours under load: every exec answered (max $exec_max ms), every upload + download came back byte for byte, a supervised run exited 7, data intact"
ok "the host under load: fork+exec works; MemAvailable, free space and processes within their bounds"

# After: H answers; rm leaves nothing of it.
[ "$(in_ns "$h" exec -- echo alive)" = alive ] || die "H no longer answers"
rel=$(cg_rel "$h")
[ -n "$rel" ] || die "H has no cgroup"
"$sbx" sandbox rm "$h" "$n1" "$n2" >/dev/null || die "rm"
left=$(ls -d /sys/fs/cgroup/*/"$rel" /sys/fs/cgroup/"$rel" 2>/dev/null || true)
[ -z "$left" ] || die "cgroup folders left: $left"
left=$(grep -l ":/$rel\$" /proc/[0-9]*/cgroup 2>/dev/null || true)
[ -z "$left" ] || die "processes left in H's cgroup: $left"
ok "after the load H answered; sandbox rm left no cgroup folder ($rel) and no process in it"

# Negative control: the same kinds of load, bounded, in a sandbox without limits.
u=$("$sbx" sandbox create --image busybox --name U) || die "create U"
in_ns "$u" upload-dir "$w/h" /h >/dev/null || die "upload into U"
rm -f "$w/h.ctl"
sample "$w/h.ctl" "$u" &
spid=$!
in_ns "$u" run --run-dir /tmp/r --timeout 15 -- sh -c \
	'/h/memhog - - 2048 & /h/storm - - tree 9 & dd if=/dev/zero of=/fill bs=1M count=64 2>/dev/null; wait' >/dev/null 2>&1 &
upid=$!
end=$((SECONDS + 12)) cm=0 cd=0 cp=0
while [ $SECONDS -lt $end ]; do
	sleep 0.5
	[ "$(wc -l <"$w/h.ctl")" -ge 5 ] || continue
	read -r cm cd _ cp _ <<<"$(host_delta "$w/h.base" "$w/h.ctl" 5)"
	[ "$cm" -gt $bm ] && [ "$cd" -gt $bd ] && [ "$cp" -gt $bp ] && break
done
stop_sample "$w/h.ctl"
"$sbx" sandbox rm "$u" >/dev/null || die "rm U"
wait $upid 2>/dev/null || true
echo "  figure: negative control (U, no limits; medians of 1 s): MemAvailable -$cm MiB, free space -$cd MiB, processes in the sandbox +$cp"
[ "$cm" -gt $bm ] || die "negative control: MemAvailable fell only $cm MiB (bound $bm)"
[ "$cd" -gt $bd ] || die "negative control: free space fell only $cd MiB (bound $bd)"
[ "$cp" -gt $bp ] || die "negative control: processes rose only $cp (bound $bp)"
ok "negative control: the same kinds of load in a sandbox made without limits take the host past every bound (MemAvailable -$cm > $bm MiB, disk -$cd > $bd MiB, processes +$cp > $bp)"
