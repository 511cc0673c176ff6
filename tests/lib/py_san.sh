# shellcheck shell=bash
# Sourced by run.sh and remote_runners.sh. py_san_env LIBSBX: prints, one per line, the env
# words a Python without sanitizers needs to load LIBSBX when it is a SAN=1 build (it links
# libasan): the runtimes preloaded and leak checks off (the interpreter keeps its memory at
# exit). Prints nothing for a plain build. No pipe into `grep -q`: under pipefail its early
# exit could SIGPIPE ldd and make a SAN build look plain (the CI's "ASan runtime does not come
# first": an interpreter started without the preload).
py_san_env() {
	local deps
	deps=$(ldd "$1" 2>/dev/null) || true
	case $deps in *libasan*) ;; *) return 0 ;; esac
	echo "LD_PRELOAD=$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
	echo "ASAN_OPTIONS=detect_leaks=0"
}
