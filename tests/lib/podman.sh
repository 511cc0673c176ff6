# shellcheck shell=bash
# Sourced by the podman suites: podman_cleanup PREFIX removes every container named PREFIX-*
# and every image named sbx-PREFIX-* under every tag (what a suite made), whatever state they
# are in.
podman_cleanup() {
	local c i
	for c in $(podman ps -a --format '{{.Names}}' | grep "^$1-" || true); do
		podman rm -f -t 0 "$c" >/dev/null 2>&1 || true
	done
	for i in $(podman images --format '{{.Repository}}:{{.Tag}}' | grep "/sbx-$1-" || true); do
		podman rmi -f "$i" >/dev/null 2>&1 || true
	done
}

