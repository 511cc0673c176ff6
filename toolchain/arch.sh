# Architecture table, sourced by the toolchain scripts: sbx name -> GNU triple, musl compiler,
# QEMU user-mode binary, Debian architecture. riscv64 has no Debian musl-dev: its musl is built
# from source by toolchain/musl.sh and its compiler wrapper lives in the cache.
SBX_ARCHES="x86_64 aarch64 armv7 i386 riscv64 ppc64le s390x"

sbx_arch() {
	case "$1" in
	x86_64)  TRIPLE=x86_64-linux-gnu;      DEBARCH=amd64;   QEMU=qemu-x86_64-static;  MUSLCC=x86_64-linux-musl-gcc ;;
	aarch64) TRIPLE=aarch64-linux-gnu;     DEBARCH=arm64;   QEMU=qemu-aarch64-static; MUSLCC=aarch64-linux-musl-gcc ;;
	armv7)   TRIPLE=arm-linux-gnueabihf;   DEBARCH=armhf;   QEMU=qemu-arm-static;     MUSLCC=arm-linux-musleabihf-gcc ;;
	i386)    TRIPLE=i686-linux-gnu;        DEBARCH=i386;    QEMU=qemu-i386-static;    MUSLCC=i386-linux-musl-gcc ;;
	riscv64) TRIPLE=riscv64-linux-gnu;     DEBARCH=riscv64; QEMU=qemu-riscv64-static; MUSLCC="$SBX_CACHE/musl/riscv64/bin/riscv64-linux-musl-gcc" ;;
	ppc64le) TRIPLE=powerpc64le-linux-gnu; DEBARCH=ppc64el; QEMU=qemu-ppc64le-static; MUSLCC=powerpc64le-linux-musl-gcc ;;
	s390x)   TRIPLE=s390x-linux-gnu;       DEBARCH=s390x;   QEMU=qemu-s390x-static;   MUSLCC=s390x-linux-musl-gcc ;;
	*) echo "unknown architecture: $1 (one of: $SBX_ARCHES)" >&2; return 1 ;;
	esac
}
