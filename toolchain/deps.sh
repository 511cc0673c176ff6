#!/usr/bin/env bash
# Installs every Debian package the build and the tests need (idempotent; run as root).
# apt-get update may exit 100 when a foreign architecture's security index is mid-sync: that
# alone is not a failure; the install below is the real check that what we need is there.
set -euo pipefail

foreign="arm64 armhf i386 ppc64el s390x"
pkgs=(
	build-essential make file xz-utils dpkg-dev ca-certificates
	musl-tools musl-dev
	gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf gcc-i686-linux-gnu
	gcc-powerpc64le-linux-gnu gcc-s390x-linux-gnu gcc-riscv64-linux-gnu
	qemu-user-static libcmocka-dev clang llvm libclang-rt-14-dev busybox-static debootstrap python3 python3-pytest python3-pytest-asyncio
	podman runc docker.io openssh-server openssh-client procps tmux
)
for a in $foreign; do pkgs+=("musl-dev:$a"); done

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: run as root (it installs Debian packages)" >&2
	exit 1
fi

need_update=0
for a in $foreign; do
	if ! dpkg --print-foreign-architectures | grep -qx "$a"; then
		dpkg --add-architecture "$a"
		need_update=1
	fi
done

src=/etc/apt/sources.list.d/sbx-deb-src.sources
if [ ! -f "$src" ]; then
	cat >"$src" <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	need_update=1
fi

missing=0
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing=1
done
[ -n "$(apt-cache showsrc musl 2>/dev/null)" ] || need_update=1

if [ $need_update = 1 ] || [ $missing = 1 ]; then
	rc=0
	apt-get update -qq || rc=$?
	[ $rc = 0 ] || echo "deps.sh: apt-get update exited $rc (tolerated; checking the install instead)" >&2
fi
if [ $missing = 1 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
[ -n "$(apt-cache showsrc musl 2>/dev/null)" ] || { echo "deps.sh: no deb-src index after apt-get update" >&2; exit 1; }
echo "deps.sh: all packages present"
