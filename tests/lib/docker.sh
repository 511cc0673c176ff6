# shellcheck shell=bash
# Sourced by tests/run.sh (and by hand: `. tests/lib/docker.sh; docker_up DIR`): docker_up DIR
# makes sure a Docker engine answers. When none does (no $DOCKER_HOST, no /var/run/docker.sock
# that answers) it starts a private dockerd of its own: no iptables, no bridge (containers get
# --network none, as sbx makes them), its data, exec root and socket under DIR, and exports
# DOCKER_HOST=unix://DIR/docker.sock (a local engine: sbx uses its direct and resident sockets).
# docker_up DIR private starts one even when an engine answers (a suite that removes every
# sandbox sbx made must not see anyone else's). docker_down stops only the dockerd docker_up
# started, and removes DIR's data.
docker_started=
docker_up() {
	local d=$1 i
	command -v docker >/dev/null && command -v dockerd >/dev/null || {
		echo "docker_up: no docker/dockerd (toolchain/deps.sh installs docker.io)" >&2
		return 1
	}
	if [ "${2:-}" != private ] && docker info >/dev/null 2>&1; then
		return 0
	fi
	mkdir -p "$d"
	dockerd --iptables=false --ip6tables=false --bridge=none --data-root "$d/data" \
		--exec-root "$d/exec" --pidfile "$d/dockerd.pid" -H "unix://$d/docker.sock" \
		>"$d/dockerd.log" 2>&1 &
	docker_started=$!
	export DOCKER_HOST=unix://$d/docker.sock
	for i in $(seq 1 100); do
		docker info >/dev/null 2>&1 && return 0
		kill -0 "$docker_started" 2>/dev/null || break
		sleep 0.2
	done
	echo "docker_up: dockerd did not answer on $d/docker.sock:" >&2
	tail -5 "$d/dockerd.log" >&2
	docker_down "$d"
	return 1
}
docker_down() {
	local d=$1 i
	[ -n "$docker_started" ] || return 0
	kill "$docker_started" 2>/dev/null || true
	for i in $(seq 1 100); do
		kill -0 "$docker_started" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$docker_started" 2>/dev/null || true
	docker_started=
	unset DOCKER_HOST
	# Its containers' overlay mounts and the netns files go before the data.
	grep -o " $d/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	rm -rf "$d"
}
