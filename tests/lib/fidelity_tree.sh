# shellcheck shell=bash
# Sourced by the fidelity tests: make_fidelity_tree DIR [sparse] builds in DIR a tree with
# every kind of thing a rollout produces: modes 0000..7777, a 0555 folder holding files, owners
# 1001/2002, symlinks relative/absolute/dangling, hard links, an empty 0700 folder, names with
# spaces, newlines and non-UTF-8 bytes, a 255-byte name, a path past 4096 bytes (deep/.../leaf),
# a nanosecond mtime; with "sparse", also a 3 GiB sparse file with data at both ends and the
# middle. Needs root (chown).
make_fidelity_tree() {
	mkdir -p "$1"
	(
		cd "$1"
		mkdir -p empty ro/inner deep
		for m in 0000 0400 0644 0755 4755 2755 1777 6711; do
			echo "mode $m" >"f$m"
			chmod "$m" "f$m"
		done
		echo data >ro/inner/file
		echo hard >h1
		ln h1 h2
		ln h1 ro/h3
		ln -s h1 rel
		ln -s /etc/passwd abs
		ln -s nowhere dangling
		touch 'with space' $'new\nline' $'bad\xff\xfebytes'
		touch "$(printf 'n%.0s' $(seq 255))"
		chown 1001:2002 f0644 ro/inner/file
		chown -h 1001:2002 rel
		touch -d '2001-02-03 04:05:06.123456789' f0644
		if [ "${2:-}" = sparse ]; then
			truncate -s 3G sparse
			printf 'head' | dd of=sparse conv=notrunc status=none
			printf 'middle' | dd of=sparse bs=1 seek=1610612736 conv=notrunc status=none
			printf 'tail' | dd of=sparse bs=1 seek=3221225468 conv=notrunc status=none
		fi
		# A path past PATH_MAX: built one relative step at a time.
		(
			cd deep
			comp=$(printf 'd%.0s' $(seq 120))
			for i in $(seq 40); do mkdir "$comp" && cd "$comp"; done
			echo bottom >leaf
		)
		chmod 0555 ro/inner ro
		chmod 0700 empty
	)
}
