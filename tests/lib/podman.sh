# Sourced by the podman tests: podman_cleanup PREFIX removes every container named PREFIX-*
# and every image named sbx-PREFIX-* under every tag (what a test made), whatever state they are in; S NAME
# ARGS... runs the caller's $sbx through podman exec into container NAME.
podman_cleanup() {
	local c i
	for c in $(podman ps -a --format '{{.Names}}' | grep "^$1-" || true); do
		podman rm -f -t 0 "$c" >/dev/null 2>&1 || true
	done
	for i in $(podman images --format '{{.Repository}}:{{.Tag}}' | grep "/sbx-$1-" || true); do
		podman rmi -f "$i" >/dev/null 2>&1 || true
	done
}

S() { # S NAME ARGS...: sbx through podman exec
	local n=$1
	shift
	"$sbx" --runner "podman:$n" "$@"
}
