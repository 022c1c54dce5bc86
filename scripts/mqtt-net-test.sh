#!/usr/bin/env bash
# boardd's MQTT client over a real network path, not loopback: a broker in
# a network namespace of its own behind a veth pair, whose first SYN of
# every other connection is dropped (iptables), so boardd's connect is in
# progress for a second (the kernel sends the SYN again) before the TCP
# connection, and then the TLS handshake, can go on: as on a LAN with a
# lost packet, where loopback's connect completes at once. Checks that
# boardd connects, plain and with TLS, and that the control socket answers
# meanwhile (the main loop never waits for the network).
#   scripts/mqtt-net-test.sh [BOARDD]     (default: .build/debug/boardd)
# Needs root (ip netns, iptables). Prints ok/FAIL per check; exit 1 on a FAIL.
set -euo pipefail
cd "$(dirname "$0")/.."
boardd=${1:-.build/debug/boardd}
[ "$(id -u)" = 0 ] || { echo "mqtt-net-test.sh: needs root (ip netns, iptables)" >&2; exit 1; }
scripts/install-deps.sh iproute2 iptables mosquitto openssl python3 >&2
[ -x "$boardd" ] || { echo "mqtt-net-test.sh: no $boardd (swift build)" >&2; exit 1; }

ns=blmq$$
host_if=bmh$$ ns_if=bmn$$
net=10.$(( ($$ >> 8) % 200 + 20 )).$(( $$ % 250 ))
work=$(mktemp -d /tmp/mqtt-net-test.XXXXXX)
failures=0
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
    ip netns del "$ns" 2> /dev/null || true
    ip link del "$host_if" 2> /dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
pass() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; failures=$((failures + 1)); }

ip netns add "$ns"
ip link add "$host_if" type veth peer name "$ns_if"
ip link set "$ns_if" netns "$ns"
ip addr add "$net.1/24" dev "$host_if"
ip link set "$host_if" up
ip netns exec "$ns" ip addr add "$net.2/24" dev "$ns_if"
ip netns exec "$ns" ip link set "$ns_if" up
ip netns exec "$ns" ip link set lo up
# The first SYN of every other connection is lost.
for port in 1883 8883; do
    ip netns exec "$ns" iptables -A INPUT -p tcp --syn --dport $port -m statistic --mode nth --every 2 --packet 0 -j DROP
done

# A throwaway CA and the broker's certificate for its address.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/ca.key" -out "$work/ca.crt" -days 2 -subj "/CN=mqtt-net-test CA" 2> /dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$work/server.key" -out "$work/server.csr" -subj "/CN=broker" 2> /dev/null
printf 'subjectAltName=IP:%s\n' "$net.2" > "$work/san.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial -out "$work/server.crt" \
    -days 2 -extfile "$work/san.ext" 2> /dev/null
cat > "$work/mosquitto.conf" <<CONF
user root
persistence false
per_listener_settings true
listener 1883 $net.2
allow_anonymous true
listener 8883 $net.2
allow_anonymous true
cafile $work/ca.crt
certfile $work/server.crt
keyfile $work/server.key
CONF
ip netns exec "$ns" mosquitto -c "$work/mosquitto.conf" > "$work/broker.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "running" "$work/broker.log" 2> /dev/null && break; sleep 0.05; done

# case NAME PORT TLS-LINE: boardd connects within 10 s; its control socket answers meanwhile.
case_() {
    local name=$1 port=$2 tls=$3
    cat > "$work/$name.yaml" <<YAML
board: demo
lines:
  led: { pin: LED, output: { initial: off } }
tasks:
  blink: { every: 10ms, do: [ toggle: led ] }
mqtt:
  broker: $net.2
  port: $port
  client_id: net-$name
$tls
YAML
    "$boardd" --config "$work/$name.yaml" --mock --socket "$work/$name.sock" 2> "$work/$name.log" &
    local d=$!
    pids+=($d)
    local answered=0
    for _ in $(seq 200); do
        if [ -S "$work/$name.sock" ] && python3 - "$work/$name.sock" <<'PY' 2> /dev/null; then answered=$((answered + 1)); fi
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(0.5); s.connect(sys.argv[1])
s.sendall(b'{"v":1,"id":1,"cmd":"ping"}\n')
assert b'"pong":true' in s.recv(4096)
PY
        grep -q "mqtt: connected to $net.2:$port" "$work/$name.log" && break
        sleep 0.05
    done
    if grep -q "mqtt: connected to $net.2:$port as net-$name" "$work/$name.log"; then
        pass "$name: connected through a lost SYN ($(grep -o '^ *[0-9.]* notice mqtt: connected' "$work/$name.log" | awk '{print $1}') s after the start)"
    else
        fail "$name: not connected within 10 s"; sed 's/^/    /' "$work/$name.log" | tail -5
    fi
    [ $answered -gt 0 ] && pass "$name: the control socket answered $answered pings meanwhile" || fail "$name: the control socket did not answer"
    kill "$d"; wait "$d" 2> /dev/null || true
}
case_ plain 1883 ""
case_ tls 8883 "  tls: { ca_file: $work/ca.crt }"
dropped=$(ip netns exec "$ns" iptables -L INPUT -v -n | awk '/DROP/ {n += $1} END {print n + 0}')
[ "$dropped" -ge 2 ] && pass "the namespace dropped $dropped SYN(s): the connects were in progress" || fail "no SYN dropped ($dropped)"

[ $failures = 0 ] && echo "mqtt-net-test: every check passed" || { echo "mqtt-net-test: $failures check(s) failed"; exit 1; }
