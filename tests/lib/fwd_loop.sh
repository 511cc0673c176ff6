# shellcheck shell=bash
# Sourced by podman_suites.sh and remote_runners.sh (after suite.sh). TCP forwarding needs no
# program inside: `fwd_loop INPORT RUNNER [VAR=VALUE...]` runs one forward op whose --in reaches
# 127.0.0.1:INPORT inside, where its own --out listens and leads back to a server here (started
# by fwd_loop_serve). A host client's 8 MiB go in through the sandbox's agent and out again, the
# sink's count comes back the same way after the half-close; then SIGTERM must stop sbx forward
# with success. Prints the client's line (or why not) and returns non-zero on any failure.
fwd_loop_serve() {
	python3 "$top/tests/bench/fwdload.py" serve --port-file "$w/fport" &
	on_exit "kill $! 2>/dev/null"
	local i
	for i in $(seq 100); do [ -s "$w/fport" ] && return 0; sleep 0.1; done
	die "fwdload.py serve wrote no port"
}
fwd_loop() { # INPORT RUNNER [VAR=VALUE...]
	local port=$1 runner=$2 fp lp i r=0
	shift 2
	# sbx itself in the background (env execs it), not a shell function: a signal must reach it.
	# The files emptied here first: the background job's own redirection runs in the forked
	# child, so until then the loop below would read the previous run's "ready".
	: >"$w/fl.out"
	: >"$w/fl.err"
	env "$@" "$sbx" --runner "$runner" forward --in "0:127.0.0.1:$port" --out "$port:127.0.0.1:$(cat "$w/fport")" >"$w/fl.out" 2>"$w/fl.err" &
	fp=$!
	for i in $(seq 200); do grep -qx ready "$w/fl.out" && break; sleep 0.1; done
	lp=$(sed -n 's/^in 127\.0\.0\.1:\([0-9]*\) -> .*/\1/p' "$w/fl.out")
	[ -n "$lp" ] || { kill -9 $fp; echo "no ready: $(cat "$w/fl.err")"; return 1; }
	timeout 60 python3 "$top/tests/bench/fwdload.py" tput --port "$lp" --bytes $((8 << 20)) || r=1
	kill -TERM $fp
	for i in $(seq 100); do kill -0 $fp 2>/dev/null || break; sleep 0.1; done
	if kill -0 $fp 2>/dev/null; then
		kill -9 $fp
		echo "sbx forward did not stop on SIGTERM: $(cat "$w/fl.err")"
		return 1
	fi
	wait $fp || { echo "sbx forward: exit $?: $(cat "$w/fl.err")"; r=1; }
	return $r
}
