#!/bin/bash
# containment.sh SBX: the ns runner's boundary (docs/runners.md, "The boundary"), tried as a
# hostile root inside a fresh ns sandbox with build/harness/boundary: the capability sets are
# Docker's default list and no_new_privs is set; a block node for a loop device standing in
# for the host's disk can be made but not opened; a tmpfs cannot be mounted; open_by_handle_at,
# bpf, perf_event_open, keyctl, init_module, clock_settime are refused; unshare -U (to regain
# capabilities and mount) is refused; /proc/sys/kernel/hostname and /proc/sysrq-trigger cannot
# be written; runc's masked paths read empty and /dev holds only the standard nodes; a host
# process and another sandbox's are out of reach (kill, ptrace, /proc/PID/root), and a chroot
# escape with a kept descriptor of / reaches no host file.
# Negative control, side by side: a sandbox made with --privileged (today's full root) passes
# every one of these ways out, and for the process and chroot ones (which --privileged still
# holds: pid namespace, pivot_root) the local runner and a plain chroot jail do, so each check
# is shown able to fail. Then the same probes in a podman and a Docker container with their
# default profiles (each engine that answers): every way out an engine refuses, ns refuses
# too. Needs root and build/images/busybox-x86_64(.tar). Everything runs inside the sandboxes
# and the containers, but the negative controls of the process and chroot checks (the test's
# own sleep, its own folder).
. "$(dirname "$0")/lib/suite.sh"
suite_begin root
sbx=$(realpath "$1")
probe=${SBX_HARNESS_DIR:-$top/build/harness}/boundary
img=$top/build/images/busybox-x86_64
[ -x "$probe" ] || die "no $probe (make check builds it)"
[ -d "$img" ] || die "no image $img (make images)"
export SBX_NS_DIR=$w/state
on_exit remove_sandboxes

# The host's disk, as far as the sandbox can tell: a loop device over a file with a marker.
marker=sbx-containment-disk-marker
head -c 65536 /dev/zero >"$w/disk"
printf %s "$marker" | dd of="$w/disk" conv=notrunc status=none
loop=$(losetup --find --show "$w/disk") || die "losetup"
on_exit "losetup -d $loop"
maj=$((16#$(stat -c %t "$loop"))) min=$((16#$(stat -c %T "$loop")))

mkdir "$w/probe"
cp "$probe" "$w/probe/boundary"
conf=$("$sbx" sandbox create --image "$img") || die "create"
priv=$("$sbx" sandbox create --privileged --image "$img" 2>"$w/warn") || die "create --privileged"
grep -q 'warning: --privileged' "$w/warn" || die "--privileged printed no warning"
for n in "$conf" "$priv"; do
	in_ns "$n" upload-dir "$w/probe" /probe >/dev/null || die "upload the probe into $n"
done

# try CHECK ARG...: the probe in both sandboxes: refused in the confined one, allowed in the
# privileged one (the negative control).
try() {
	local c p
	c=$(in_ns "$conf" exec -- /probe/boundary "$@" 2>&1) && die "confined: $c"
	case $c in *refused*) ;; *) die "confined: $*: $c" ;; esac
	p=$(in_ns "$priv" exec -- /probe/boundary "$@" 2>&1) || die "--privileged (negative control): $p"
	echo "$c"
}

# Docker's default capability list: CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP
# NET_BIND_SERVICE NET_RAW SYS_CHROOT MKNOD AUDIT_WRITE SETFCAP.
docker=00000000a80425fb
for pid in self 1; do
	st=$(in_ns "$conf" exec -- cat /proc/$pid/status) || die "status"
	for f in CapBnd CapPrm CapEff; do
		v=$(echo "$st" | sed -n "s/^$f:\t//p")
		[ "$v" = $docker ] || die "$pid: $f $v, not $docker"
	done
	for f in CapInh CapAmb; do
		[ "$(echo "$st" | sed -n "s/^$f:\t//p")" = 0000000000000000 ] || die "$pid: $f"
	done
	echo "$st" | grep -q '^NoNewPrivs:.1' || die "$pid: no_new_privs not set"
	echo "$st" | grep -q '^Seccomp:.2' || die "$pid: no seccomp filter"
done
pst=$(in_ns "$priv" exec -- cat /proc/self/status)
[ "$(echo "$pst" | sed -n 's/^CapBnd:\t//p')" != $docker ] || die "negative control: bounded"
ok "init and exec'd commands: bounding, permitted, effective = Docker's list ($docker), inheritable and ambient empty, no_new_privs, a seccomp filter (--privileged: full set)"

# In the user namespace the kernel refuses the node itself (CAP_MKNOD counts in the host's
# namespace only); nodev would refuse its open.
try mknod-read $maj $min $marker | grep -q 'refused: mknod' || die "mknod"
ok "a block node for the test's loop device ($maj:$min) cannot be made (user namespace); --privileged reads the disk"
try mount-tmpfs >/dev/null
ok "mount of a tmpfs refused; --privileged mounts it"
try unshare-user-mount >/dev/null
ok "unshare(CLONE_NEWUSER|CLONE_NEWNS) to regain capabilities and mount: refused; --privileged mounts"
in_ns "$conf" exec -- unshare -U true 2>/dev/null && die "busybox unshare -U ran"
ok "busybox unshare -U refused"
for c in open-by-handle bpf perf keyctl init-module clock-settime; do
	try $c >/dev/null
done
ok "open_by_handle_at, bpf, perf_event_open, keyctl, init_module, clock_settime refused; --privileged reaches each"

h=$(in_ns "$conf" exec -- cat /proc/sys/kernel/hostname)
# Refused twice over: /proc/sys is read-only, and its files belong to the host's root, which
# the user namespace does not map (the permission check comes first).
try write /proc/sys/kernel/hostname "$h" | grep -Eq 'refused: open: (Read-only|Permission denied)' ||
	die "hostname"
ok "/proc/sys/kernel/hostname: not writable (read-only /proc/sys, owned by an unmapped root); --privileged writes it"
if [ -e /proc/sysrq-trigger ]; then
	# 'h' only prints the SysRq help into the kernel's log.
	try write /proc/sysrq-trigger h >/dev/null
	ok "/proc/sysrq-trigger: not writable; --privileged writes it"
else
	in_ns "$conf" exec -- sh -c 'echo h >/proc/sysrq-trigger' 2>/dev/null && die "sysrq"
	ok "/proc/sysrq-trigger: not writable (this kernel has none: no negative control)"
fi

# Masked paths: read-only mounts over them, reading empty where the machine's do not.
mi=$(in_ns "$conf" exec -- cat /proc/self/mountinfo)
pmi=$(in_ns "$priv" exec -- cat /proc/self/mountinfo)
for f in /proc/keys /proc/timer_list /sys/firmware; do
	echo "$mi" | awk -v f=$f '$5 == f && $6 ~ /^ro,/ { m = 1 } END { exit !m }' || die "$f not masked"
	echo "$pmi" | awk -v f=$f '$5 == f { m = 1 } END { exit m }' || die "negative control: $f masked"
done
[ -z "$(in_ns "$conf" exec -- cat /proc/timer_list)" ] || die "/proc/timer_list readable"
[ -n "$(in_ns "$priv" exec -- cat /proc/timer_list)" ] || die "negative control: /proc/timer_list empty"
[ -z "$(in_ns "$conf" exec -- ls /sys/firmware)" ] || die "/sys/firmware not masked"
[ -n "$(in_ns "$priv" exec -- ls /sys/firmware)" ] || die "negative control: /sys/firmware empty"
in_ns "$conf" exec -- sh -c 'echo x >/sys/firmware/x' 2>/dev/null && die "/sys/firmware writable"
ok "/proc/keys /proc/timer_list /sys/firmware masked (read-only, empty); --privileged shows them"
devs=$(in_ns "$conf" exec -- ls /dev | tr '\n' ' ')
[ "$devs" = "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero " ] ||
	die "/dev holds: $devs"
echo "$mi" | awk '$5 == "/" || $5 == "/dev" || $5 == "/dev/shm" { if ($6 !~ /nodev/) exit 1 }' ||
	die "a writable mount without nodev: $mi"
ok "/dev: only null zero full random urandom tty ptmx pts shm (and the fd links); nodev on /, /dev, /dev/shm"

# Ways out through processes and roots, each through the resident agent and through
# sbx-agent enter (SBX_RESIDENT=0: setns and chroot into the sandbox), since either may be how a
# command got in. The negative control for these is the local runner (sbx with no boundary at
# all, as root on this machine): --privileged keeps its own pid namespace and pivot_root, so it
# is held here too. try_out CHECK ARG...: refused in the confined sandbox both ways, allowed
# through the local runner; the command in $between runs in between.
between=true
try_out() {
	local c via
	for via in 1 0; do
		c=$(SBX_RESIDENT=$via in_ns "$conf" exec -- /probe/boundary "$@" 2>&1) && die "confined (SBX_RESIDENT=$via): $c"
		case $c in *refused*) ;; *) die "confined (SBX_RESIDENT=$via): $*: $c" ;; esac
	done
	$between
	"$sbx" --runner local exec -- "$w/probe/boundary" "$@" >/dev/null 2>&1 ||
		die "local runner (negative control): $*"
	echo "$c"
}
sleep 600 &
target=$!
on_exit "kill $target 2>/dev/null || true"
try_out signal $target >/dev/null
try_out ptrace $target >/dev/null
ok "a host process (pid $target): kill and ptrace refused (not in the sandbox's pid namespace); the local runner reaches it"

# Another confined sandbox beside it: its init's root holds a file only it has. The confined
# sandbox sees none of its processes, so /proc/PID/root of none of them reaches that file.
other=$("$sbx" sandbox create --image "$img") || die "create the other sandbox"
in_ns "$other" exec -- sh -c 'echo mine >/sbx-other-root' || die "the other sandbox's file"
opid=$(sed -n 's/^pid=//p' "$SBX_NS_DIR/$other/state")
between=untouched
untouched() {
	[ "$(in_ns "$other" exec -- cat /sbx-other-root)" = mine ] ||
		die "the confined sandbox wrote the other's file: $(in_ns "$other" exec -- cat /sbx-other-root)"
}
try_out procroot sbx-other-root confined >/dev/null
in_ns "$other" exec -- sh -c 'echo mine >/sbx-other-root'
try_out write "/proc/$opid/root/sbx-other-root" confined >/dev/null
between=true
try_out signal "$opid" >/dev/null
ok "another sandbox (init pid $opid): its root through /proc/PID/root, every pid seen and its own, and its init by kill: refused; the local runner wrote its file"

# A chroot escape with a kept descriptor of /: out of the inner chroot, but pivot_root left no
# folder above the sandbox's root, so a file of the host's (in this test's folder) stays out of
# reach. Negative control: the same probe in a plain chroot(2) jail on this machine escapes.
printf %s "$marker" >"$w/outside"
try_out chroot-escape "$w/outside" "$marker" >/dev/null
mkdir -p "$w/jail/tmp"
cp "$probe" "$w/jail/boundary"
chroot "$w/jail" /boundary chroot-escape "$w/outside" "$marker" >/dev/null ||
	die "negative control: a plain chroot jail held the escape"
ok "chroot escape with a kept descriptor of / (inner chroot, fchdir, .., chroot .): the host's file stays out of reach; a plain chroot jail is escaped"

# The user namespace: root inside is the sandbox's own range of host ids (its state's uid=),
# through the resident agent and through sbx-agent enter (SBX_RESIDENT=0) alike; the image
# still looks root-owned inside (its idmapped lower layer), while what the sandbox's root
# writes is owned by the mapped ids on the host. --privileged: the host's ids, unmapped.
base=$(sed -n 's/^uid=//p' "$SBX_NS_DIR/$conf/state")
[ -n "$base" ] && [ "$base" -gt 0 ] || die "no mapped uid in the state: $base"
want="0 $base 65536"
for via in 1 0; do
	m=$(SBX_RESIDENT=$via in_ns "$conf" exec -- cat /proc/self/uid_map /proc/self/gid_map | tr -s ' \n' ' ')
	[ "$m" = " $want $want " ] || die "SBX_RESIDENT=$via: uid_map and gid_map: '$m', want 0 $base 65536 twice"
done
m=$(in_ns "$priv" exec -- cat /proc/self/uid_map | tr -s ' ')
[ "$m" = " 0 0 4294967295" ] || die "negative control: --privileged's uid_map: $m"
[ "$(in_ns "$conf" exec -- stat -c %u:%g / /bin /etc/passwd | tr '\n' ' ')" = "0:0 0:0 0:0 " ] ||
	die "the image is not root-owned inside: $(in_ns "$conf" exec -- stat -c %u:%g / /bin /etc/passwd)"
ok "root inside maps to host uid and gid $base (65536 ids; resident agent and sbx-agent enter alike), the image root-owned inside; --privileged: the host's ids"

for n in "$conf" "$priv"; do
	in_ns "$n" exec -- sh -c 'echo x >/made && echo y >/given && chown 1001:2002 /given' ||
		die "$n: write as root"
done
up=$SBX_NS_DIR/$conf/upper
[ "$(stat -c %u:%g "$up/made" "$up/given" | tr '\n' ' ')" = "$base:$base $((base + 1001)):$((base + 2002)) " ] ||
	die "the upper layer's owners on the host: $(stat -c %u:%g "$up/made" "$up/given")"
[ "$(in_ns "$conf" exec -- stat -c %u:%g /made /given | tr '\n' ' ')" = "0:0 1001:2002 " ] ||
	die "owners inside: $(in_ns "$conf" exec -- stat -c %u:%g /made /given)"
[ "$(stat -c %u "$SBX_NS_DIR/$priv/upper/made")" = 0 ] || die "negative control: --privileged's file not the host's root's"
ok "a file the sandbox's root writes is uid $base on the host (1001:2002 inside is $((base + 1001)):$((base + 2002))); --privileged's is uid 0"

# The layer's agent: a hard link to one copy in $SBX_NS_DIR/.exec (runner/execstore.c), shared
# by every sandbox (and by the host's sbx-enter), owned by the host's root: the sandbox's root
# cannot write, chmod or chown it. It can replace its own link, which leaves the other
# sandboxes' agent as it was. --privileged gets a copy of its own (its root is the host's).
# Shown able to fail: with sbx_exec_place chown'ing each link to the sandbox's root, it fails.
agent=$SBX_NS_DIR/$conf/upper/.sbx/sbx-agent
ino() { stat -c %d:%i "$1"; }
[ "$(ino "$agent")" = "$(ino "$SBX_NS_DIR/$other/upper/.sbx/sbx-agent")" ] &&
	[ "$(ino "$agent")" = "$(ino "$SBX_NS_DIR/$conf/sbx-enter")" ] ||
	die "the agents of two sandboxes and sbx-enter are not one file"
[ "$(stat -c %u:%a "$agent")" = 0:755 ] || die "the shared agent: $(stat -c %u:%a "$agent")"
[ "$(ino "$SBX_NS_DIR/$priv/upper/.sbx/sbx-agent")" != "$(ino "$agent")" ] &&
	[ "$(stat -c %h "$SBX_NS_DIR/$priv/upper/.sbx/sbx-agent")" = 1 ] || die "--privileged shares the agent"
sum=$(sha256sum <"$agent")
for c in 'echo x >>/.sbx/sbx-agent' ': >/.sbx/sbx-agent' 'chmod 777 /.sbx/sbx-agent' 'chown 0 /.sbx/sbx-agent'; do
	in_ns "$conf" exec -- sh -c "$c" 2>/dev/null && die "the sandbox's root ran: $c"
done
third=$("$sbx" sandbox create --image "$img") || die "create a third sandbox"
in_ns "$third" exec -- sh -c 'rm /.sbx/sbx-agent && echo mine >/.sbx/sbx-agent' || die "replace its own link"
[ "$(sha256sum <"$agent")" = "$sum" ] && [ "$(stat -c %u:%a "$agent")" = 0:755 ] ||
	die "a sandbox changed the shared agent"
in_ns "$priv" exec -- sh -c 'chmod 700 /.sbx/sbx-agent && chown 1:1 /.sbx/sbx-agent' ||
	die "negative control: --privileged cannot chmod its copy"
[ "$(stat -c %u:%a "$agent")" = 0:755 ] || die "--privileged's chmod reached the shared agent"
ok "the layer's agent is one file for every sandbox and sbx-enter (host root's, 0755): the sandbox's root cannot append, truncate, chmod or chown it, replacing its own link leaves the others'; --privileged changes a copy of its own"

# A root-only file of the host's, passed in: placed by the host in a new folder of each
# sandbox's upper layer (one the sandbox never looked up, so the overlay shows it at once),
# owned by the host's root, mode 0600. The user namespace does not map the host's root, so
# root inside gets no DAC override on it.
printf %s "$marker" >"$w/rootonly"
for n in "$conf" "$priv"; do
	install -d -m 0755 -o 0 -g 0 "$SBX_NS_DIR/$n/upper/hostonly"
	install -m 0600 -o 0 -g 0 "$w/rootonly" "$SBX_NS_DIR/$n/upper/hostonly/f"
done
in_ns "$conf" exec -- cat /hostonly/f 2>/dev/null && die "the sandbox's root read a root-only host file"
[ "$(in_ns "$conf" exec -- stat -c %u /hostonly/f)" = 65534 ] || die "the host's root is mapped inside"
[ "$(in_ns "$priv" exec -- cat /hostonly/f)" = "$marker" ] || die "negative control: --privileged cannot read it"
ok "a root-only host file passed in (owner the host's root, 0600) cannot be read by the sandbox's root, it shows as 65534; --privileged reads it"


# The 32-bit ABI of this machine's kernel (int 0x80 from an i386 program) has its own numbers:
# the filter's i386 table must hold them (an i386 image's commands run natively, without qemu).
# Shown able to fail: with the i386 table's unshare number made wrong, "i386: unshare -U ran".
img32=$top/build/images/busybox-i386
if [ "$(uname -m)" = x86_64 ] && [ -d "$img32" ]; then
	c32=$("$sbx" sandbox create --image "$img32") || die "create i386"
	p32=$("$sbx" sandbox create --privileged --image "$img32" 2>/dev/null) || die "create i386 --privileged"
	in_ns "$c32" exec -- unshare -U true 2>/dev/null && die "i386: unshare -U ran"
	in_ns "$p32" exec -- unshare -U true || die "i386 --privileged (negative control): unshare -U"
	in_ns "$c32" exec -- mount -t tmpfs t /mnt 2>/dev/null && die "i386: mount ran"
	ok "an i386 program (the kernel's 32-bit ABI): unshare -U and mount refused; --privileged runs unshare -U"
fi

# Side by side: the same probes in a container of each engine here with its default profile
# (podman: runc, Docker's seccomp profile and masks, podman's own capability list, a device
# cgroup; docker: Docker's defaults): whatever way out an engine refuses, ns refuses too.
# tests/run.sh runs this suite where a Docker engine answers (its private dockerd).
side=0
for eng in podman docker; do
	command -v $eng >/dev/null && $eng info >/dev/null 2>&1 || continue
	side=$((side + 1))
	p=ct$$
	. "$top/tests/lib/podman.sh"
	on_exit "eng=$eng podman_cleanup $p"
	"$sbx" sandbox create --runner $eng --image "$img.tar" --name "$p-c" >/dev/null ||
		die "$eng create"
	in_podman "$p-c" upload-dir "$w/probe" /probe >/dev/null || die "upload the probe into $eng"
	refused=""
	for c in "mknod-read $maj $min $marker" mount-tmpfs unshare-user-mount open-by-handle bpf perf \
		keyctl init-module clock-settime "write /proc/sys/kernel/hostname x" "signal $target" \
		"ptrace $target" "signal $opid" "procroot sbx-other-root $eng" \
		"chroot-escape $w/outside $marker"; do
		# shellcheck disable=SC2086 # a check and its arguments
		if ! in_podman "$p-c" exec -- /probe/boundary $c >/dev/null 2>&1; then
			refused="$refused ${c%% *}"
			# shellcheck disable=SC2086
			in_ns "$conf" exec -- /probe/boundary $c >/dev/null 2>&1 && die "$eng refuses $c, ns does not"
		fi
	done
	ok "$eng (default profile) refuses:$refused; ns refuses each of them too"
done
[ $side -gt 0 ] || ok "no podman or docker answers: the side-by-side comparison is skipped"
