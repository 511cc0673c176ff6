#!/bin/bash
# containment.sh SBX: the ns runner's boundary (docs/runners.md, "The boundary"), tried as a
# hostile root inside a fresh ns sandbox with build/harness/boundary: the capability sets are
# Docker's default list and no_new_privs is set; a tmpfs cannot be mounted; open_by_handle_at,
# bpf, perf_event_open, keyctl, init_module, clock_settime are refused; unshare -U (to regain
# capabilities and mount) is refused. Negative control, side by side: a sandbox made with
# --privileged (today's full root) passes every one of these ways out, so each check is shown
# able to fail. Needs root and build/images/busybox-x86_64. Everything runs inside the two
# sandboxes.
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

