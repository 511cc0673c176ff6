#!/usr/bin/env bash
# images.sh [DIR]: checks the sandbox images `make images` built into DIR (default
# build/images): each busybox-ARCH runs (chroot for this machine's, the binary under
# qemu-ARCH-static for the others) and has its users, folders and owners; noshell-x86_64 has
# no shell and its /hello runs; debian-x86_64 has apt and its agent user; every tarball holds
# its folder. Prints "  ok: ..." per check, stops at the first failure. Needs root (chroot);
# every chroot runs in a private mount namespace (unshare -m) so nothing leaks.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root
dir=$(cd "${1:-$top/build/images}" && pwd)
# arch.sh names riscv64's compiler under $SBX_CACHE; only QEMU and DEBARCH are used here.
: "${SBX_CACHE:=$top/build/cache}"
. "$top/toolchain/arch.sh"
export LC_ALL=C
native=$(uname -m)

# in_root ROOT ARGV...: ARGV chrooted into ROOT, in a mount namespace of its own.
in_root() {
	unshare -m --propagation private chroot "$@"
}
# field ROOT KEY: the value of KEY in ROOT/.sbx-image.
field() {
	sed -n "s/^$2=//p" "$1/.sbx-image"
}

# complete NAME: the folder, its tarball and its stamp, the tarball holding exactly the folder.
complete() {
	local r="$dir/$1"
	[ -d "$r" ] || die "$1: no folder $r (run make images)"
	[ -f "$r.tar" ] && [ -s "$r.stamp" ] || die "$1: no tarball or no stamp beside the folder"
	[ ! -e "$dir/.$1.tmp" ] || die "$1: a temporary folder is left: $dir/.$1.tmp"
	diff <(tar -tf "$r.tar" | sed 's,/$,,' | sort) <(cd "$r" && find . | sort) >/dev/null ||
		die "$1: $1.tar does not list the same entries as the folder"
	[ -z "$(tar --numeric-owner -tvf "$r.tar" | awk '$2 !~ /^[0-9]+\/[0-9]+$/')" ] ||
		die "$1: the tarball has owner names, not numbers"
	ok "$1: folder, stamp, and a tarball with the same $(tar -tf "$r.tar" | wc -l) entries"
}

# small_root NAME ARCH WITH-AGENT: what the busybox and noshell images share.
small_root() {
	local r="$dir/$1" d
	[ "$(field "$r" name)" = "${1%%-*}" ] && [ "$(field "$r" arch)" = "$2" ] &&
		[ -n "$(field "$r" debian_version)" ] || die "$1: .sbx-image lacks name, arch or version"
	[ -z "$(find "$r" \( ! -uid 0 -o ! -gid 0 \) -print -quit)" ] ||
		die "$1: a file not owned by root: $(find "$r" \( ! -uid 0 -o ! -gid 0 \) -print -quit)"
	for d in tmp dev proc sys; do
		[ -d "$r/$d" ] && [ ! -L "$r/$d" ] || die "$1: no /$d folder"
	done
	[ "$(stat -c %a "$r/tmp")" = 1777 ] || die "$1: /tmp is not 1777"
	grep -q '^root:x:0:0:' "$r/etc/passwd" && grep -q '^nobody:x:65534:65534:' "$r/etc/passwd" &&
		grep -q '^root:x:0:' "$r/etc/group" && grep -q '^[a-z]*:x:65534:' "$r/etc/group" ||
		die "$1: /etc/passwd or /etc/group lacks root or nobody"
	if [ "$3" = 1 ]; then
		grep -q '^agent:x:1000:1000:' "$r/etc/passwd" && grep -q '^agent:x:1000:' "$r/etc/group" ||
			die "$1: no user agent (1000)"
	fi
	ok "$1: .sbx-image says $2 $(field "$r" debian_version); root owns all; users and /tmp 1777"
}

for a in $SBX_ARCHES; do
	name="busybox-$a"
	r="$dir/$name"
	sbx_arch "$a"
	if [ ! -d "$r" ] && [ "$a" = riscv64 ]; then
		echo "note: no $name: Debian bookworm has no riscv64 port (images/build.sh says so)"
		continue
	fi
	complete "$name"
	small_root "$name" "$a" 1
	for d in var/tmp root run etc/hostname bin/busybox bin/sh usr/bin/awk; do
		[ -e "$r/$d" ] || die "$name: no /$d"
	done
	[ "$(stat -c %a "$r/var/tmp")" = 1777 ] || die "$name: /var/tmp is not 1777"
	file -L "$r/bin/busybox" | grep -q 'statically linked' || die "$name: busybox is not static"
	# Every applet the binary lists is a link to it that stays inside the root.
	if [ "$a" = "$native" ]; then
		bb=("$r/bin/busybox")
	else
		bb=("$QEMU" "$r/bin/busybox")
	fi
	list=$("${bb[@]}" --list-full) || die "$name: ${bb[*]##*/} --list-full failed"
	n=0
	while IFS= read -r l; do
		[ "$l" = bin/busybox ] && continue
		[ -L "$r/$l" ] && [ "$(readlink "$r/$l" | cut -c1)" != / ] &&
			[ "$(realpath -m "$r/$l")" = "$(realpath "$r")/bin/busybox" ] ||
			die "$name: /$l is not a relative link to busybox"
		n=$((n + 1))
	done <<<"$list"
	[ "$n" = "$(field "$r" applets)" ] || die "$name: $n applets listed, .sbx-image says otherwise"
	ok "$name: $n applet links, all relative to /bin/busybox"
	if [ "$a" = "$native" ]; then
		[ "$(in_root "$r" /bin/sh -c 'echo ok')" = ok ] || die "$name: chroot /bin/sh -c 'echo ok'"
		[ "$(in_root "$r" /bin/sh -c 'id -u agent; id -u nobody')" = "1000
65534" ] || die "$name: id does not know agent and nobody"
		ok "$name: chroot $name /bin/sh -c 'echo ok' prints ok; id knows agent and nobody"
	else
		"$QEMU" "$r/bin/busybox" true || die "$name: $QEMU bin/busybox true"
		[ "$("$QEMU" "$r/bin/busybox" sh -c 'echo ok')" = ok ] || die "$name: sh -c 'echo ok'"
		ok "$name: $QEMU bin/busybox true (and sh -c 'echo ok')"
	fi
done

name=noshell-x86_64
r="$dir/$name"
complete "$name"
small_root "$name" x86_64 0
[ ! -e "$r/bin/sh" ] && [ ! -L "$r/bin/sh" ] && [ ! -e "$r/bin" ] ||
	die "$name: has /bin/sh (or a /bin)"
# Nothing else than the contract: one program, the user files, the marker and empty folders.
allowed='\./(hello|\.sbx-image|etc|etc/passwd|etc/group|tmp|dev|proc|sys)'
extra=$(cd "$r" && find . -mindepth 1 | sort | grep -vxE "$allowed" || true)
[ -z "$extra" ] || die "$name: unexpected entries: $extra"
ok "$name: no /bin/sh; only /hello, /etc/passwd, /etc/group and empty /tmp /dev /proc /sys"
file "$r/hello" | grep -q 'statically linked' || die "$name: /hello is not static"
[ "$(in_root "$r" /hello)" = "hello from a shell-less image" ] || die "$name: chroot /hello"
# The negative control: the same chroot with a shell fails, so the check above can fail.
! in_root "$r" /bin/sh -c true 2>/dev/null || die "$name: chroot /bin/sh ran"
ok "$name: chroot $name /hello prints its line; chroot /bin/sh cannot start"

name=debian-x86_64
r="$dir/$name"
complete "$name"
[ -x "$r/usr/bin/apt" ] && [ -s "$r/etc/debian_version" ] ||
	die "$name: no /usr/bin/apt or /etc/debian_version"
[ "$(field "$r" debian_version)" = "$(cat "$r/etc/debian_version")" ] ||
	die "$name: .sbx-image and /etc/debian_version differ"
ok "$name: /usr/bin/apt and /etc/debian_version ($(cat "$r/etc/debian_version"))"
[ "$(in_root "$r" /bin/sh -c 'id -u agent; apt --version >/dev/null && echo apt')" = "1000
apt" ] || die "$name: chroot: no user agent or apt does not run"
[ "$(stat -c %u:%a "$r/tmp")" = 0:1777 ] || die "$name: /tmp is not root's 1777"
ok "$name: chroot runs apt --version; user agent is 1000; /tmp 1777"
