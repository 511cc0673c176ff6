#!/usr/bin/env bash
# build.sh ARCH|host: builds the static libraries the agent (ARCH) or the host tools (host) link
# against, into $SBX_CACHE/ARCH/{include,lib}: BearSSL and libarchive (tar formats, no
# compression or crypto libraries), with that architecture's musl compiler (the system
# compiler and -fPIC for host); for riscv64 musl itself first. A stamp holding a digest of the
# pins, these scripts and the libarchive patches makes a rebuild a no-op until one of them
# changes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${SBX_CACHE:?SBX_CACHE must be set}"
export SBX_CACHE=$(mkdir -p "$SBX_CACHE" && cd "$SBX_CACHE" && pwd)
. "$here/pins"
. "$here/arch.sh"
arch=$1
jobs=${SBX_JOBS:-$(nproc)}

key=$(cat "$here/pins" "$here/arch.sh" "$here/build.sh" "$here/fetch.sh" "$here"/*.patch |
	sha256sum | cut -c1-16)
out="$SBX_CACHE/$arch"
stamp="$out/.stamp"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$key" ]; then
	exit 0
fi
rm -rf "$out"
mkdir -p "$out/include" "$out/lib" "$out/work"
log="$out/build.log"
t0=$(date +%s)
echo "toolchain: building $arch libraries (log: $log)"

if [ "$arch" = host ]; then
	CC=${HOST_CC:-cc}
	AR=ar
	CFLAGS="-O2 -fPIC"
else
	sbx_arch "$arch"
	AR=$TRIPLE-ar
	if [ "$arch" = riscv64 ]; then
		# Debian has no musl-dev:riscv64: build musl from its Debian source with the GNU cross
		# compiler, and a wrapper like Debian's *-linux-musl-gcc around its specs file.
		mdir=$("$here/fetch.sh" musl)
		prefix="$SBX_CACHE/musl/riscv64"
		rm -rf "$prefix" "$out/work/musl"
		cp -a "$mdir" "$out/work/musl"
		(
			cd "$out/work/musl"
			./configure --target=riscv64-linux-gnu --prefix="$prefix" --disable-shared --enable-wrapper=gcc \
				CROSS_COMPILE=riscv64-linux-gnu- CC=riscv64-linux-gnu-gcc
			make -j"$jobs"
			make install
		) >>"$log" 2>&1
		mkdir -p "$prefix/bin"
		cat >"$prefix/bin/riscv64-linux-musl-gcc" <<WRAP
#!/bin/sh
exec "\${REALGCC:-riscv64-linux-gnu-gcc}" "\$@" -specs "$prefix/lib/musl-gcc.specs"
WRAP
		chmod 0755 "$prefix/bin/riscv64-linux-musl-gcc"
	fi
	CC=$MUSLCC
	CFLAGS="-Os -ffunction-sections -fdata-sections"
fi

# BearSSL: its own makefile, library target only.
bdir=$("$here/fetch.sh" bearssl)
cp -a "$bdir" "$out/work/bearssl"
make -C "$out/work/bearssl" -j"$jobs" BUILD=build CC="$CC" AR="$AR" CFLAGS="$CFLAGS" lib >>"$log" 2>&1
cp "$out/work/bearssl/build/libbearssl.a" "$out/lib/"
cp "$out/work/bearssl/inc/"*.h "$out/include/"

# libarchive for every target, the host included (-fPIC there): the host unpacks what the
# agents pack with the same pinned library.
host_opt=()
[ "$arch" = host ] || host_opt=(--host="$TRIPLE")
{
	adir=$("$here/fetch.sh" libarchive)
	cp -a "$adir" "$out/work/libarchive"
	# Our own fixes on top of Debian's, each a toolchain/libarchive-*.patch (docs/build.md).
	for p in "$here"/libarchive-*.patch; do
		patch -d "$out/work/libarchive" -p1 --quiet --forward <"$p" >>"$log" 2>&1
	done
	(
		cd "$out/work/libarchive"
		# Debian's patches touch Makefile.am (test lists) and configure.ac (a pkg-config line for
		# iconv, which we do not use); neither changes the library, so keep the shipped
		# generated files instead of needing autotools: make them newer than their inputs.
		touch aclocal.m4 && sleep 1 && touch configure Makefile.in config.h.in
		./configure "${host_opt[@]}" CC="$CC" AR="$AR" CFLAGS="$CFLAGS" \
			--disable-shared --enable-static --disable-bsdtar --disable-bsdcat --disable-bsdcpio \
			--disable-acl --disable-xattr --without-zlib --without-bz2lib --without-libb2 \
			--without-iconv --without-lz4 --without-zstd --without-lzma --without-cng \
			--without-mbedtls --without-nettle --without-openssl --without-xml2 --without-expat
		make -j"$jobs" libarchive.la
	) >>"$log" 2>&1
	cp "$out/work/libarchive/.libs/libarchive.a" "$out/lib/"
	cp "$out/work/libarchive/libarchive/archive.h" "$out/work/libarchive/libarchive/archive_entry.h" "$out/include/"
}

rm -rf "$out/work"
echo "$key" >"$stamp"
echo "toolchain: $arch done in $(($(date +%s) - t0)) s"
