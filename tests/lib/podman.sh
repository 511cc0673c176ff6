# shellcheck shell=bash
# Sourced by the podman suites (which run on docker too: $eng, tests/lib/suite.sh):
# podman_cleanup PREFIX removes every container named PREFIX-* and every image named
# sbx-PREFIX-* under every tag (what a suite made), whatever state they are in.
# podman_run: `$eng run` with the global flags sbx gives podman (runc, cgroupfs).
podman_run() {
	if [ "$eng" = podman ]; then
		podman --runtime runc --cgroup-manager cgroupfs run "$@"
	else
		docker run "$@"
	fi
}
podman_cleanup() {
	local c i
	for c in $($eng ps -a --format '{{.Names}}' | grep "^$1-" || true); do
		if [ "$eng" = podman ]; then podman rm -f -t 0 "$c"; else docker rm -f "$c"; fi >/dev/null 2>&1 || true
	done
	for i in $($eng images --format '{{.Repository}}:{{.Tag}}' | grep -E "(^|/)sbx-$1-" || true); do
		$eng rmi -f "$i" >/dev/null 2>&1 || true
	done
}
