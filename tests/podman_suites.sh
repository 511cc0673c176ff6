#!/bin/bash
# podman_suites.sh SBX [IMAGEDIR]: the transfer and supervision suites of ns_suites.sh through
# podman containers (podman:NAME runner; docker:NAME with SBX_ENGINE=docker, agent injected on first use), as root, on
# busybox-x86_64, debian-x86_64, noshell-x86_64 (transfers only: no shell, so no harness) and
# busybox-aarch64 run under QEMU through binfmt_misc:
# - fidelity by replay: the fidelity tree (tests/lib/fidelity_tree.sh) uploaded into container
#   A, downloaded with --archive-copy, replayed with upload-archive into container B,
#   downloaded again: the host's `sbx-agent pack` of the source, A's and B's archives must be
#   byte-identical. aarch64 gets the tree without its 3 GiB sparse file (QEMU is slow; the
#   sparse path is the same code, checked natively);
# - every hostile archive of tests/hostile_tar.py refused in the container (exit 5), the target
#   folder and /etc unchanged (archives of both before and after, compared byte for byte:
#   done with the agent only, so it works on noshell too);
# - supervision (images with a shell): the four escaping harnesses of ns_suites.sh (setsid,
#   double fork, TERM ignored past the deadline, SIGSTOP): receipts verified, termination
#   witnessed, no process of the run left in the container.
# binfmt_misc: when the aarch64 agent cannot run on this machine, binfmt_misc is mounted (if it
# is not) and qemu-aarch64 is registered from /usr/lib/binfmt.d/qemu-aarch64.conf (its F flag
# lets runc start aarch64 programs inside a container); that registration is left in place
# (a note says so). Nothing registered by anyone else is touched. SBX_PODMAN_SUITES_IMAGES
# picks a subset ("busybox-x86_64 busybox-aarch64", ...).
# One "  ok: ..." line per check; every container and image made here is removed on exit.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root podman
sbx=$(realpath "$1")
imgdir=$(realpath "${2:-$top/build/images}")
images=${SBX_PODMAN_SUITES_IMAGES:-busybox-x86_64 debian-x86_64 noshell-x86_64 busybox-aarch64}
agent=$top/build/agent/x86_64/sbx-agent
export SBX_PODMAN_DIR=$w/hints
p=ps$$ # prefix of every container and image made here
. "$top/tests/lib/podman.sh"
on_exit 'podman_cleanup "$p"'

. "$top/tests/lib/fidelity_tree.sh"
case " $images " in *" busybox-x86_64 "* | *" debian-x86_64 "* | *" noshell-x86_64 "*)
	make_fidelity_tree "$w/src" sparse
	"$agent" pack "$w/src" >"$w/c0-src.tar" 2>/dev/null
	;;
esac
case " $images " in *-aarch64*)
	make_fidelity_tree "$w/small" # no 3 GiB sparse file under QEMU
	"$agent" pack "$w/small" >"$w/c0-small.tar" 2>/dev/null
	;;
esac
python3 "$top/tests/hostile_tar.py" "$w/hostile" /etc >/dev/null

# binfmt_misc for aarch64, only when the aarch64 agent cannot already run here.
binfmt=/proc/sys/fs/binfmt_misc
foreign_ok() { "$top/build/agent/aarch64/sbx-agent" --version >/dev/null 2>&1; }
case " $images " in *-aarch64*)
	if ! foreign_ok; then
		[ -e "$binfmt/register" ] || mount -t binfmt_misc binfmt_misc "$binfmt" ||
			die "cannot mount binfmt_misc on $binfmt"
		[ -f /usr/lib/binfmt.d/qemu-aarch64.conf ] || die "no /usr/lib/binfmt.d/qemu-aarch64.conf (qemu-user-static)"
		[ -e "$binfmt/qemu-aarch64" ] || cat /usr/lib/binfmt.d/qemu-aarch64.conf >"$binfmt/register" ||
			die "cannot register qemu-aarch64 in binfmt_misc"
		grep -qx enabled "$binfmt/status" || die "binfmt_misc is disabled ($binfmt/status)"
		grep -qx enabled "$binfmt/qemu-aarch64" || die "$binfmt/qemu-aarch64 is disabled"
		foreign_ok || die "the aarch64 agent does not run even with binfmt_misc: $(cat "$binfmt/qemu-aarch64")"
		echo "note: registered qemu-aarch64 in binfmt_misc (flags $(sed -n 's/^flags: //p' "$binfmt/qemu-aarch64")); left registered"
	fi
	;;
esac

. "$top/tests/lib/escapes.sh"
# A container the exec way (SBX_RESIDENT=0: ENGINE exec, then the direct socket), not through
# its resident agent: the suites cross both.
in_podman_exec() { SBX_RESIDENT=0 in_podman "$@"; }

. "$top/tests/lib/fwd_loop.sh"
fwd_loop_serve

for image in $images; do
	[ -f "$imgdir/$image.tar" ] && [ -d "$imgdir/$image" ] || die "no $imgdir/$image.tar (make images)"
	arch=${image#*-}
	# Our own names for the tarball and its .sbx-image folder, so cleanup removes only ours.
	ln -s "$imgdir/$image.tar" "$w/$p-$image.tar"
	ln -s "$imgdir/$image" "$w/$p-$image"
	a=$p-${image}-a b=$p-${image}-b
	"$sbx" sandbox create --runner "$eng" --image "$w/$p-$image.tar" --name "$a" >/dev/null ||
		die "$image: create A"
	"$sbx" sandbox create --runner "$eng" --image "sbx-$p-$image" --name "$b" >/dev/null ||
		die "$image: create B"
	# A is reached through its resident agent (init's socket); B the exec way.
	in_podman "$a" --json hello >"$w/hello" || die "$image: hello"
	[ "$(jget channel "$w/hello")" = resident ] || die "$image: A's channel: $(cat "$w/hello")"
	in_podman_exec "$b" --json hello >"$w/hello-b" || die "$image: B's hello"
	[ "$(jget channel "$w/hello-b")" = direct ] || die "$image: B's channel: $(cat "$w/hello-b")"
	[ "$(jget arch "$w/hello")" = "$arch" ] || die "$image: HELLO's arch: $(cat "$w/hello")"
	[ "$(jget sha256 "$w/hello")" = "$(sha256sum "$top/build/agent/$arch/sbx-agent" | cut -d' ' -f1)" ] ||
		die "$image: HELLO's sha256 is not build/agent/$arch/sbx-agent's: $(cat "$w/hello")"
	[ "$(jget arch "$w/hello-b")" = "$arch" ] || die "$image: B's HELLO: $(cat "$w/hello-b")"
	if [ "$arch" != x86_64 ]; then
		[ "$(in_podman "$a" exec -- uname -m)" = "$arch" ] || die "$image: uname -m in the container"
		ok "$image: two containers; the injected agent is the $arch one (HELLO arch and sha256); the image's programs run as $arch (uname -m, QEMU through binfmt_misc)"
	else
		ok "$image: two containers (A on the resident agent, B the exec way then the direct socket); the agent's HELLO says $arch with the local agent's sha256"
	fi

	# ---- fidelity by replay ----
	if [ "$arch" = x86_64 ]; then src=$w/src c0=$w/c0-src.tar what="sparse 3 GiB, "; else src=$w/small c0=$w/c0-small.tar what=""; fi
	in_podman "$a" upload-dir "$src" /data >/dev/null || die "$image: upload-dir into A"
	in_podman "$a" download-dir --links keep --archive-copy "$w/c1.tar" /data "$w/dl1" >/dev/null || die "$image: download from A"
	in_podman_exec "$b" upload-archive "$w/c1.tar" dir /data >/dev/null || die "$image: upload-archive into B"
	in_podman_exec "$b" download-dir --links keep --archive-copy "$w/c2.tar" /data "$w/dl2" >/dev/null || die "$image: download from B"
	cmp -s "$c0" "$w/c1.tar" || die "$image: the archive of the uploaded tree differs from the source's"
	cmp -s "$w/c1.tar" "$w/c2.tar" || die "$image: the replayed tree's archive differs"
	[ "$(in_podman_exec "$b" stat /data/f4755 | awk '{print $2, $3}')" = "file 4755" ] || die "$image: set-uid lost: $(in_podman "$b" stat /data/f4755)"
	rm -rf "$w/dl1" "$w/dl2" "$w/c1.tar" "$w/c2.tar"
	ok "$image: fidelity tree (${what}set-id, owners, links, long paths) through two containers: three archives byte-identical"

	# ---- TCP forwarding ----
	o=$(fwd_loop 7500 "$eng:$a" SBX_RESIDENT=1) || die "$image: forward through A: $o"
	o2=$(fwd_loop 7500 "$eng:$b" SBX_RESIDENT=0) || die "$image: forward through B: $o2"
	ok "$image: TCP forwarding through the container's agent (A resident, B exec then direct): 8 MiB in by an --in forward and out again by an --out one, the count back after the half-close ($o; $o2)"

	# ---- hostile archives ----
	mkdir -p "$w/t0"
	echo before >"$w/t0/before"
	in_podman "$a" upload-dir "$w/t0" /t >/dev/null || die "$image: upload /t"
	snap() { # snap NAME: archives of /t and /etc as the container has them now
		rm -rf "$w/snap"
		in_podman "$a" download-dir --links keep --archive-copy "$w/$1-t.tar" /t "$w/snap" >/dev/null &&
			rm -rf "$w/snap" &&
			in_podman "$a" download-dir --links keep --archive-copy "$w/$1-etc.tar" /etc "$w/snap" >/dev/null &&
			rm -rf "$w/snap"
	}
	snap before || die "$image: snapshot"
	n=0
	for h in "$w"/hostile/*.tar; do
		rc=$(rc in_podman "$a" upload-archive "$h" dir /t 2>/dev/null)
		[ $rc = 5 ] || die "$image: $(basename "$h"): exit $rc, want 5"
		n=$((n + 1))
	done
	snap after || die "$image: snapshot after"
	cmp -s "$w/before-t.tar" "$w/after-t.tar" || die "$image: /t changed"
	cmp -s "$w/before-etc.tar" "$w/after-etc.tar" || die "$image: /etc changed"
	[ "$(in_podman "$a" kind /etc/victim)$(in_podman "$a" kind /etc/outside)" = absentabsent ] || die "$image: /etc/victim or /etc/outside appeared"
	rm -f "$w"/before-*.tar "$w"/after-*.tar
	ok "$image: $n hostile archives refused in the container (exit 5); /t and /etc byte-identical before and after"

	# ---- supervision ----
	if [ "$image" != noshell-x86_64 ]; then
		check_escapes in_podman "$a" "$image" "$w/rec"
		# The same view from outside: the engine's own process list of the container.
		left=$(if [ "$eng" = podman ]; then podman top "$a" args; else docker top "$a" -o args; fi 2>/dev/null | grep -E 'sleep|sh -c' || true)
		[ -z "$left" ] || die "$image: $eng top shows: $left"
		ok "$image: ${#escape_cases[@]} escaping harnesses (setsid, double fork, TERM ignored, SIGSTOP): receipts verified, termination witnessed, nothing left (/proc inside, $eng top outside)"
	fi

	"$sbx" sandbox rm "$eng:$a" "$eng:$b" >/dev/null || die "$image: rm"
	$eng rmi -f "sbx-$p-$image" >/dev/null 2>&1 || true
done
