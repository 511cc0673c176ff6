#!/usr/bin/env bash
# build.sh OUT [NAME...]: builds the root filesystem folders sandboxes run in, from Debian
# packages only (no registry, no Docker): busybox-ARCH for every architecture Debian bookworm
# has busybox-static for, noshell-x86_64 (one static program, no shell) and debian-x86_64
# (debootstrap minbase). Each image is OUT/NAME/ plus OUT/NAME.tar (for `podman import`) and
# OUT/NAME.stamp. NAME may be an image's name or busybox, noshell, debian; default all.
#
# An image is built in OUT/.NAME.tmp and renamed into place only when complete; the stamp,
# written last, holds a digest of the inputs (this script, the package versions), and while it
# matches the image is not rebuilt. See docs/images.md for the contract.
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
self="$here/build.sh"
# arch.sh names riscv64's compiler under $SBX_CACHE; only QEMU and DEBARCH are used here.
: "${SBX_CACHE:=$top/build/cache}"
. "$top/toolchain/arch.sh"
export LC_ALL=C
umask 022

[ $# -ge 1 ] || { echo "usage: images/build.sh OUT [NAME...]" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
	echo "images: run as root (debootstrap, dpkg-deb -x and chroot need it)" >&2
	exit 1
fi
out=$(mkdir -p "$1" && cd "$1" && pwd)
shift
cache="$out/.cache"
mkdir -p "$cache/debs" "$cache/debootstrap"

# Two `make images` at once would build into the same temporary folders.
exec 9>"$out/.lock"
flock 9

suite=bookworm
mirror=http://deb.debian.org/debian
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
lists=/var/lib/apt/lists

# ---- helpers -------------------------------------------------------------------------------

# index_record PACKAGE DEBARCH: sets $version and $sha (the .deb's SHA-256) from apt's index of
# the bookworm main suite for DEBARCH, or empties them. Read straight from the index file apt
# verified against the signed InRelease (apt-cache takes seconds per call where the package
# cache is disabled, as on this machine). Like the toolchain's pins, versions come from
# bookworm main, never from bookworm-security: its indexes are often mid-sync on these
# machines, so one architecture could silently get another version than the rest.
index_record() {
	local f rec base="$lists/deb.debian.org_debian_dists_${suite}_main_binary-${2}_Packages"
	version="" sha=""
	for f in "$base" "$base".{lz4,gz,xz,zst,bz2}; do
		[ -f "$f" ] || continue
		# (awk reads to the end: exiting early would kill apt-helper with SIGPIPE.)
		rec=$(/usr/lib/apt/apt-helper cat-file "$f" |
			awk -v RS= -v p="$1" '!n && index($0, "Package: " p "\n") == 1 {print; n++}')
		version=$(echo "$rec" | sed -n 's/^Version: //p')
		sha=$(echo "$rec" | sed -n 's/^SHA256: //p')
		return 0
	done
}

# fetch_deb PACKAGE DEBARCH VERSION SHA256: prints the path of the verified .deb, downloading
# it (through apt, which checks it against the index) only when the cache lacks it.
fetch_deb() {
	local deb="$cache/debs/${1}_${3#*:}_$2.deb" d
	if [ -f "$deb" ] && [ "$(sha256sum <"$deb" | cut -d' ' -f1)" = "$4" ]; then
		echo "$deb"
		return
	fi
	d=$(mktemp -d "$cache/debs/.dl-XXXXXX")
	# The sandbox user _apt cannot write into a root-only build folder: download as root.
	(cd "$d" && apt-get download -qq -o APT::Sandbox::User=root "$1:$2=$3") >&2
	set -- "$1" "$2" "$3" "$4" "$d"/*.deb
	if [ $# != 5 ] || [ "$(sha256sum <"$5" | cut -d' ' -f1)" != "$4" ]; then
		echo "images: $1:$2=$3: download missing or digest differs from the index" >&2
		rm -rf "$d"
		return 1
	fi
	mv "$5" "$deb"
	rm -rf "$d"
	echo "$deb"
}

# key WORDS...: the digest of the inputs: this script and the words (versions, digests).
key() {
	{ cat "$self"; printf '%s\n' "$@"; } | sha256sum | cut -d' ' -f1
}

# fresh NAME KEY: true when NAME is complete (folder, tarball) and built from the same inputs.
fresh() {
	[ -d "$out/$1" ] && [ -f "$out/$1.tar" ] && [ -f "$out/$1.stamp" ] &&
		[ "$(cat "$out/$1.stamp")" = "$2" ]
}

# begin NAME: a new, empty temporary folder ($tmp) for NAME; clears what an interrupted build
# left. --one-file-system: never descend into a mount an interrupted build left behind.
begin() {
	tmp="$out/.$1.tmp"
	rm -rf --one-file-system "$tmp" "$out/.$1.tar.tmp" "$out/.$1.x"
	mkdir -m 0755 "$tmp"
	t0=$(date +%s.%N)
}

# commit NAME KEY: the tarball from the temporary folder, then both renamed into place, then
# the stamp. Interrupted at any point, there is either no folder, the old one or the complete
# new one, and without the new stamp the next run builds it again.
commit() {
	tar --numeric-owner --sort=name -C "$tmp" -cf "$out/.$1.tar.tmp" .
	rm -f "$out/$1.stamp"
	rm -rf --one-file-system "${out:?}/$1"
	mv "$tmp" "$out/$1"
	mv "$out/.$1.tar.tmp" "$out/$1.tar"
	echo "$2" >"$out/.$1.stamp.tmp"
	mv "$out/.$1.stamp.tmp" "$out/$1.stamp"
	printf 'images: %s built in %s s (%s, tarball %s)\n' "$1" \
		"$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')" \
		"$(du -sh "$out/$1" | cut -f1)" \
		"$(du -h "$out/$1.tar" | cut -f1)"
}

# ---- busybox-ARCH --------------------------------------------------------------------------

# The BusyBox image's users: root, nobody (Debian's names: its group is nogroup) and agent
# (1000), whose home is /tmp so that every file stays root's.
busybox_users() {
	printf '%s\n' "root:x:0:0:root:/root:/bin/sh" \
		"nobody:x:65534:65534:nobody:/nonexistent:/bin/false" \
		"agent:x:1000:1000:agent:/tmp:/bin/sh" >"$tmp/etc/passwd"
	printf '%s\n' "root:x:0:" "nogroup:x:65534:" "agent:x:1000:" >"$tmp/etc/group"
}

build_busybox() { # ARCH
	local a=$1 name="busybox-$1" version sha k deb line dir rel n=0
	sbx_arch "$a"
	index_record busybox-static "$DEBARCH"
	if [ -z "$version" ] || [ -z "$sha" ]; then
		# Say why: the suite lacks the architecture (riscv64 is a release architecture only
		# from trixie on), or this machine's apt does not know it, or the package is missing.
		if ! sed -n 's/^Architectures: //p' "$lists/deb.debian.org_debian_dists_${suite}_InRelease" |
			grep -qw "$DEBARCH"; then
			echo "images: skipping $name: Debian $suite has no $DEBARCH architecture" \
				"(not in its Release file's Architectures)"
			return 0
		fi
		echo "images: $name: no busybox-static:$DEBARCH in apt's $suite main index" \
			"(run toolchain/deps.sh, which adds the foreign architectures)" >&2
		return 1
	fi
	k=$(key busybox "$a" "$DEBARCH" "$version" "$sha")
	if fresh "$name" "$k"; then
		echo "images: $name up to date"
		return 0
	fi
	deb=$(fetch_deb busybox-static "$DEBARCH" "$version" "$sha")
	begin "$name"
	mkdir "$out/.$name.x"
	dpkg-deb -x "$deb" "$out/.$name.x"
	mkdir -p "$tmp"/{bin,etc,dev,proc,sys,run,root,tmp,var/tmp,usr/share/doc/busybox-static}
	install -m 0755 "$out/.$name.x/bin/busybox" "$tmp/bin/busybox"
	# BusyBox is GPL: its copyright file travels with the binary.
	install -m 0644 "$out/.$name.x/usr/share/doc/busybox-static/copyright" \
		"$tmp/usr/share/doc/busybox-static/copyright"
	rm -rf "$out/.$name.x"

	# One relative symlink per applet the binary itself lists (run under QEMU when foreign), so
	# a link reads right from the host too: usr/bin/awk -> ../../bin/busybox, bin/sh -> busybox.
	if [ "$a" = "$(uname -m)" ]; then
		"$tmp/bin/busybox" --list-full >"$out/.$name.list"
	else
		"$QEMU" "$tmp/bin/busybox" --list-full >"$out/.$name.list"
	fi
	while IFS= read -r line; do
		case $line in
		'' | /* | *..* | *[!a-z0-9_.[/-]*) # [ and [[ are applets too
			echo "images: $name: refusing applet path '$line'" >&2
			return 1
			;;
		esac
		if [ -e "$tmp/$line" ] || [ -L "$tmp/$line" ]; then
			continue # bin/busybox itself is listed too
		fi
		dir=$(dirname "$line")
		if [ "$dir" = bin ]; then
			rel=busybox
		elif [ "$dir" = . ]; then
			rel=bin/busybox
		else
			rel=$(echo "$dir" | sed 's,[^/]*,..,g')/bin/busybox
		fi
		mkdir -p "$tmp/$dir"
		ln -s "$rel" "$tmp/$line"
		n=$((n + 1))
	done <"$out/.$name.list"
	rm -f "$out/.$name.list"
	[ "$n" -gt 100 ] || { echo "images: $name: only $n applets listed" >&2; return 1; }

	busybox_users
	echo sbx >"$tmp/etc/hostname"
	printf '%s\n' "name=busybox" "arch=$a" "debian_arch=$DEBARCH" \
		"debian_package=busybox-static" "debian_version=$version" "deb_sha256=$sha" \
		"applets=$n" >"$tmp/.sbx-image"
	chmod 0644 "$tmp"/etc/* "$tmp/.sbx-image"
	chmod 0700 "$tmp/root"
	chmod 1777 "$tmp/tmp" "$tmp/var/tmp"
	chown -hR 0:0 "$tmp"
	commit "$name" "$k"
}

# ---- noshell-x86_64 ------------------------------------------------------------------------

build_noshell() {
	local name=noshell-x86_64 cc=${HOST_CC:-cc} libc k
	if [ "$(uname -m)" != x86_64 ]; then
		echo "images: skipping $name: its test program is built with this machine's compiler"
		return 0
	fi
	libc=$(dpkg-query -W -f='${Version}' libc6-dev)
	k=$(key noshell "$(cat "$top/tests/images/hello.c")" "$("$cc" --version | head -1)" "$libc")
	if fresh "$name" "$k"; then
		echo "images: $name up to date"
		return 0
	fi
	begin "$name"
	mkdir -p "$tmp"/{etc,dev,proc,sys,tmp}
	"$cc" -static -O2 -std=c11 -Wall -Wextra -Werror -pedantic -s -o "$tmp/hello" \
		"$top/tests/images/hello.c"
	# Like distroless, the login shell does not exist; root's home is / (there is no /root).
	printf '%s\n' "root:x:0:0:root:/:/sbin/nologin" \
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin" >"$tmp/etc/passwd"
	printf '%s\n' "root:x:0:" "nogroup:x:65534:" >"$tmp/etc/group"
	printf '%s\n' "name=noshell" "arch=x86_64" "debian_arch=amd64" \
		"debian_package=libc6-dev" "debian_version=$libc" >"$tmp/.sbx-image"
	chmod 0644 "$tmp"/etc/* "$tmp/.sbx-image"
	chmod 1777 "$tmp/tmp"
	chown -hR 0:0 "$tmp"
	commit "$name" "$k"
}

# ---- debian-x86_64 -------------------------------------------------------------------------

build_debian() {
	local name=debian-x86_64 dbs release k log bg
	if [ "$(uname -m)" != x86_64 ]; then
		echo "images: skipping $name: debootstrap's second stage runs natively here"
		return 0
	fi
	dbs=$(dpkg-query -W -f='${Version}' debootstrap)
	# The suite's Release date (as apt here last saw it) stands for every package version in
	# it: a released suite's Release changes only at a point release, and then the image is
	# rebuilt.
	release=$(sed -n 's/^Date: //p' \
		"$lists/deb.debian.org_debian_dists_${suite}_InRelease" 2>/dev/null | head -1)
	k=$(key debian "$dbs" "$suite" "$mirror" minbase "${release:-unknown}")
	if fresh "$name" "$k"; then
		echo "images: $name up to date"
		return 0
	fi
	begin "$name"
	log="$out/$name.log"
	echo "images: $name: debootstrap --variant=minbase $suite" \
		"(half a minute to minutes, by mirror; log: $log)"
	# In a private mount namespace: the /proc and /sys debootstrap mounts into the target die
	# with it, even when the build is interrupted. In its own process group, waited for in the
	# background: debootstrap and dpkg shrug off a Ctrl-C (the build would go on to the end),
	# so an interruption kills the whole group and leaves only the hidden temporary folder.
	unshare -m --propagation private setsid debootstrap --variant=minbase --force-check-gpg \
		--keyring="$keyring" --cache-dir="$cache/debootstrap" \
		"$suite" "$tmp" "$mirror" >"$log" 2>&1 &
	bg=$!
	trap 'kill -KILL -- -$bg 2>/dev/null; wait $bg; echo "images: $name: interrupted" >&2
		exit 130' INT TERM HUP
	if ! wait $bg; then
		tail -20 "$log" >&2
		echo "images: $name: debootstrap failed (log: $log)" >&2
		return 1
	fi
	trap - INT TERM HUP
	unshare -m --propagation private chroot "$tmp" \
		useradd --uid 1000 --user-group --create-home --shell /bin/bash --comment agent agent
	echo sbx >"$tmp/etc/hostname"
	# debootstrap copied this machine's resolver configuration: the sandbox gets its own.
	: >"$tmp/etc/resolv.conf"
	# What Debian's own container images leave out too: the .debs debootstrap installed from
	# (it copies them in from --cache-dir), apt's caches and indexes (`apt-get update` first).
	rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/cache/apt/*.bin \
		"$tmp"/var/lib/apt/lists/* "$tmp"/var/log/bootstrap.log
	printf '%s\n' "name=debian" "arch=x86_64" "debian_arch=amd64" \
		"debian_version=$(cat "$tmp/etc/debian_version")" "debian_suite=$suite" \
		"debootstrap_version=$dbs" "variant=minbase" >"$tmp/.sbx-image"
	chmod 0644 "$tmp/.sbx-image"
	# The exact package set, beside the image (not in it).
	chroot "$tmp" dpkg-query -W -f='${Package} ${Version} ${Architecture}\n' \
		>"$out/.$name.packages"
	commit "$name" "$k"
	mv "$out/.$name.packages" "$out/$name.packages"
}

# ---- what to build -------------------------------------------------------------------------

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(busybox noshell debian)
start=$(date +%s)
for w in "${want[@]}"; do
	case $w in
	busybox) for a in $SBX_ARCHES; do build_busybox "$a"; done ;;
	busybox-*) build_busybox "${w#busybox-}" ;;
	noshell | noshell-x86_64) build_noshell ;;
	debian | debian-x86_64) build_debian ;;
	*) echo "images: unknown image '$w' (busybox[-ARCH], noshell, debian)" >&2; exit 2 ;;
	esac
done
echo "images: done in $(($(date +%s) - start)) s ($out)"
