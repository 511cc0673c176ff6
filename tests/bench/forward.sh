#!/bin/bash
# forward.sh SBX: `make bench-forward`, one run, side by side, with one client and server
# (tests/bench/fwdload.py, standard-library Python, asyncio server):
#  - one connection's throughput (BYTES, default 1 GiB, up to a sink that answers its count
#    after the half-close) and 1 KiB request/response latency (LAT_N round trips, p50/p99) over
#      direct     client -> server on the host's loopback: the floor;
#      sbx --in   host client -> sbx forward -> agent -> server in an ns sandbox (only lo);
#      sbx --out  client in the sandbox -> agent -> sbx forward -> server on the host;
#      ssh -L     host client -> ssh -> a private sshd (127.0.0.1, temporary keys, the default
#                 cipher) -> server on the host; ssh -R the other way round (sshd listens);
#                 both ends on the host: ssh cannot reach a sandbox that has no network;
#      relay      the client on the stdin and stdout of BusyBox nc run in the sandbox through
#                 the ns runner's exec channel (sbx-enter enter PID, as `podman exec -i`): a
#                 plain relay over the same exec channel, one connection;
#  - 1,000 concurrent connections each doing 100 echoes of 1 KiB: requests per second and
#    errors, through sbx --in, sbx --out and direct.
# "In the sandbox" for the Python ends means the sandbox's network namespace (nsenter --net:
# the BusyBox image has no Python); the sandbox's only interface is lo. Targets: sbx at least
# 1.0x ssh's throughput and no worse latency (--in against -L, --out against -R).
. "$(dirname "$0")/../lib/suite.sh"
suite_begin root
sbx=$(realpath "$1")
load=$top/tests/bench/fwdload.py
bytes=${BYTES:-1073741824}
latn=${LAT_N:-2000}
export SBX_NS_DIR=$w/state
on_exit remove_sandboxes
bg=()
on_exit 'for p in "${bg[@]}"; do kill -TERM "$p" 2>/dev/null; done; sleep 0.2; for p in "${bg[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null'
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
waitfile() {
	local i
	for i in $(seq 200); do
		[ -s "$1" ] && return 0
		sleep 0.05
	done
	die "no $1"
}
waitport() { # PORT [nsenter words]: until 127.0.0.1:PORT accepts (10 s)
	local p=$1 i
	shift
	for i in $(seq 100); do
		"$@" python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),1).close()' "$p" 2>/dev/null && return 0
		sleep 0.1
	done
	die "nothing listens on 127.0.0.1:$p"
}

img=$top/build/images/busybox-x86_64
"$sbx" sandbox create --image "$img" --name B >/dev/null
pid=$(sed -n 's/^pid=//p' "$SBX_NS_DIR/B/state")
inside=(nsenter "--net=/proc/$pid/ns/net") # a host program in the sandbox's network namespace

python3 "$load" serve --port-file "$w/hport" &
bg+=($!)
"${inside[@]}" python3 "$load" serve --port-file "$w/iport" &
bg+=($!)
waitfile "$w/hport"
waitfile "$w/iport"
hport=$(cat "$w/hport") iport=$(cat "$w/iport") oport=7100

"$sbx" --runner ns:B forward --in "0:127.0.0.1:$iport" --out "$oport:127.0.0.1:$hport" >"$w/fwd.out" 2>"$w/fwd.err" &
fp=$!
bg+=("$fp")
for i in $(seq 200); do
	grep -qx ready "$w/fwd.out" && break
	kill -0 "$fp" 2>/dev/null || die "sbx forward: $(cat "$w/fwd.err")"
	sleep 0.05
done
grep -qx ready "$w/fwd.out" || die "sbx forward: no ready: $(cat "$w/fwd.err")"
lport=$(sed -n "s/^in 127\.0\.0\.1:\([0-9]*\) -> 127\.0\.0\.1:$iport\$/\1/p" "$w/fwd.out")

# A private sshd and two tunnels through it.
mkdir -p "$w/ssh" /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$w/ssh/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$w/ssh/key"
cp "$w/ssh/key.pub" "$w/ssh/authorized_keys"
sport=$(freeport)
cat >"$w/ssh/sshd_config" <<EOF
Port $sport
ListenAddress 127.0.0.1
HostKey $w/ssh/hostkey
AuthorizedKeysFile $w/ssh/authorized_keys
PidFile $w/ssh/sshd.pid
StrictModes no
UsePAM no
PermitRootLogin yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowTcpForwarding yes
EOF
/usr/sbin/sshd -f "$w/ssh/sshd_config" -D -e 2>"$w/ssh/sshd.log" &
bg+=($!)
waitport "$sport"
sshopt=(-N -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes
	-o LogLevel=ERROR -o ExitOnForwardFailure=yes -i "$w/ssh/key" -p "$sport")
Lport=$(freeport)
ssh "${sshopt[@]}" -L "$Lport:127.0.0.1:$hport" root@127.0.0.1 &
bg+=($!)
Rport=$(freeport)
ssh "${sshopt[@]}" -R "$Rport:127.0.0.1:$hport" root@127.0.0.1 &
bg+=($!)
waitport "$Lport"
waitport "$Rport"
# The relay: the ns runner's exec way into the sandbox (runner/ns.c sbx_ns_argv: sbx-enter enter
# PID, as `podman exec -i` is for a container) running BusyBox nc, its stdin and stdout the
# stream. (`sbx exec -i` is not used: it holds small stdin writes back, see the report.)
relay=(-- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$SBX_NS_DIR/B/sbx-enter" enter "$pid"
	/bin/busybox nc 127.0.0.1 "$iport")

paths=(direct sbx_in sbx_out ssh_L ssh_R relay)
client() { # PATH: the words that run fwdload.py as that path's client (the subcommand follows)
	case $1 in
	direct) echo "python3 $load @ --port $hport" ;;
	sbx_in) echo "python3 $load @ --port $lport" ;;
	sbx_out) echo "${inside[*]} python3 $load @ --port $oport" ;;
	ssh_L) echo "python3 $load @ --port $Lport" ;;
	ssh_R) echo "python3 $load @ --port $Rport" ;;
	relay) echo "python3 $load @ --port 0" ;;
	esac
}
run() { # PATH SUBCOMMAND ARGS...: one fwdload.py run as PATH's client; prints its result line
	local p=$1 sub=$2 words
	shift 2
	words=$(client "$p")
	words=${words/@/$sub}
	if [ "$p" = relay ]; then
		# shellcheck disable=SC2086
		timeout 300 $words "$@" "${relay[@]}"
	else
		# shellcheck disable=SC2086
		timeout 300 $words "$@"
	fi
}
declare -A mbps p50 p99
echo "one connection: $((bytes >> 20)) MiB up (then the sink's count back), $latn round trips of 1 KiB"
printf '%-10s %12s %10s %10s\n' path "MB/s" "p50 us" "p99 us"
for p in "${paths[@]}"; do
	t=$(run "$p" tput --bytes "$bytes") || die "$p: tput: $t"
	l=$(run "$p" lat --n "$latn" --size 1024) || die "$p: lat: $l"
	mbps[$p]=$(awk '{print $4}' <<<"$t")
	p50[$p]=$(awk '{print $3}' <<<"$l")
	p99[$p]=$(awk '{print $4}' <<<"$l")
	printf '%-10s %12s %10s %10s\n' "$p" "${mbps[$p]}" "${p50[$p]}" "${p99[$p]}"
done

verdict() { python3 -c "print('met' if $1 else 'not met')"; }
echo
echo "ratios (throughput: sbx / other, above 1.00 is faster; latency: sbx / other, at most 1.00 is no worse)"
for pair in "sbx_in ssh_L" "sbx_out ssh_R"; do
	set -- $pair
	tr=$(calc "${mbps[$1]} / ${mbps[$2]}")
	r50=$(calc "${p50[$1]} / ${p50[$2]}")
	r99=$(calc "${p99[$1]} / ${p99[$2]}")
	printf '%-8s vs %-6s throughput %5.2fx (target >= 1.00: %s)  latency p50 %5.2fx p99 %5.2fx (target <= 1.00: %s)\n' \
		"$1" "$2" "$tr" "$(verdict "$tr >= 1.0")" "$r50" "$r99" "$(verdict "$r50 <= 1.0 and $r99 <= 1.0")"
done
for other in direct relay; do
	for s in sbx_in sbx_out; do
		printf '%-8s vs %-6s throughput %5.2fx  latency p50 %5.2fx p99 %5.2fx (%s)\n' "$s" "$other" \
			"$(calc "${mbps[$s]} / ${mbps[$other]}")" "$(calc "${p50[$s]} / ${p50[$other]}")" \
			"$(calc "${p99[$s]} / ${p99[$other]}")" \
			"$([ $other = direct ] && echo "the floor: no target" || echo "the plain relay over the exec channel: no target")"
	done
done

echo
echo "1,000 concurrent connections x 100 echoes of 1 KiB"
for p in sbx_in sbx_out direct; do
	r=0
	o=$(run "$p" load --conns 1000 --reqs 100 --size 1024 --timeout 120) || r=$?
	printf '%-10s %s\n' "$p" "$o"
	[ $r = 0 ] || die "$p: load: exit $r"
done
kill -0 "$fp" || die "sbx forward died: $(cat "$w/fwd.err")"

echo
echo "control frames beside a bulk stream: one session, a ping each millisecond while 1 GiB comes"
echo "through an --in forward of the same session from BusyBox nc inside (tests/bench/fwd_ping.py)"
"$sbx" --runner ns:B exec -- sh -c 'setsid sh -c "head -c 1073741824 /dev/zero | nc -l -p 7400" >/dev/null 2>&1 </dev/null &'
for i in $(seq 50); do
	[ "$("$sbx" --runner ns:B exec -- netstat -ltn | grep -c ' 127\.0\.0\.1:7400 ')" = 1 ] && break
	sleep 0.1
done
python3 "$top/tests/bench/fwd_ping.py" "$sbx" ns:B 7400 1073741824 || die "fwd_ping failed"
