#!/usr/bin/env bash
# fetch.sh PACKAGE: downloads the pinned Debian source package with `apt-get source`, checks
# every file against toolchain/pins, and unpacks it (Debian patches applied) into
# $SBX_CACHE/src/PACKAGE. Prints the unpacked folder. Reuses a verified download.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/pins"
: "${SBX_CACHE:?SBX_CACHE must be set}"
pkg=$1
case $pkg in
libarchive) ver=$LIBARCHIVE_VERSION ;;
bearssl) ver=$BEARSSL_VERSION ;;
musl) ver=$MUSL_VERSION ;;
*) echo "fetch.sh: unknown package $pkg" >&2; exit 1 ;;
esac

dl="$SBX_CACHE/src/dl"
mkdir -p "$dl"
# Parallel builds of several architectures fetch the same packages: one at a time.
exec 9>"$SBX_CACHE/src/.lock"
flock 9

verify() {
	local ok=0 p f sum
	while read -r p f sum; do
		[ "$p" = "$pkg" ] || continue
		[ -f "$dl/$f" ] || return 1
		echo "$sum  $dl/$f" | sha256sum --quiet -c - >/dev/null 2>&1 || {
			echo "fetch.sh: checksum mismatch for $f" >&2
			rm -f "$dl/$f"
			return 1
		}
		ok=1
	done <<<"$PIN_FILES"
	[ $ok = 1 ]
}

if ! verify; then
	if [ -z "$(apt-cache showsrc "$pkg" 2>/dev/null)" ]; then
		echo "fetch.sh: no deb-src entry for $pkg; run toolchain/deps.sh as root first" >&2
		exit 1
	fi
	(cd "$dl" && apt-get source --download-only -qq "$pkg=$ver" >&2) || {
		echo "fetch.sh: apt-get source $pkg=$ver failed (is the pinned version still in the archive?)" >&2
		exit 1
	}
	verify || { echo "fetch.sh: $pkg=$ver does not match toolchain/pins" >&2; exit 1; }
fi

out="$SBX_CACHE/src/$pkg-$ver"
if [ ! -f "$out/.sbx-unpacked" ]; then
	rm -rf "$out" "$out.tmp"
	dsc=$(awk -v p="$pkg" '$1 == p && $2 ~ /\.dsc$/ { print $2 }' <<<"$PIN_FILES")
	(cd "$dl" && dpkg-source --no-check -x "$dsc" "$out.tmp" >/dev/null)
	mv "$out.tmp" "$out"
	touch "$out/.sbx-unpacked"
fi
echo "$out"
