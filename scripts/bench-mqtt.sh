#!/usr/bin/env bash
# boardd's MQTT client and the main loop's timing: a 1 kHz task on the
# main loop (where MQTT runs), its output published on every run (1,000
# state messages a second), with the broker
#   up       a mosquitto on 127.0.0.1,
#   down     nothing listening (every connection refused; boardd tries
#            again with its back-off, 100 ms to 500 ms here, and queues),
#   stalled  a listener that accepts and never reads (no CONNACK: boardd
#            gives the connection up after 10 s and tries again).
# Each run is WINDOW seconds; the task's lateness p50/p99/max is read from
# boardd's stats (control socket). The conditions rotate within each
# repeat; the table gives each repeat's p99 ratio against `up` in the same
# repeat, and the median ratio.
#
#   scripts/bench-mqtt.sh [--repeats N] [--window S] [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
repeats=5
window=20
while [ $# -gt 0 ]; do
    case $1 in
    --repeats) repeats=$2; shift ;;
    --window) window=$2; shift ;;
    --quick) repeats=1; window=3 ;;
    *) echo "usage: scripts/bench-mqtt.sh [--repeats N] [--window S] [--quick]" >&2; exit 2 ;;
    esac
    shift
done
scripts/install-deps.sh mosquitto python3 >&2
swift build -c release --product boardd --scratch-path .build-guest >&2
boardd=$(swift build -c release --scratch-path .build-guest --show-bin-path)/boardd
work=$(mktemp -d /tmp/boardd-bench-mqtt.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nuser %s\n' "$port" "$(id -un)" > "$work/mosquitto.conf"

config() {  # config PORT
    cat <<YAML
board: demo
lines:
  fan: { pin: FAN, output: { initial: off } }
tasks:
  tick: { every: 1ms, do: [ toggle: fan ] }
mqtt:
  broker: 127.0.0.1
  port: $1
  client_id: bench
  stats_interval: 1s
  queue: 1000
  reconnect: { min: 100ms, max: 500ms }
YAML
}

p99() {  # p99 SOCKET: the task's lateness p50 p99 max (ns)
    python3 - "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"v":1,"id":1,"cmd":"stats"}\n')
buf = b""
while not buf.endswith(b"\n"):
    buf += s.recv(65536)
r = json.loads(buf)
t = next(t for l in r["loops"] for t in l["tasks"] if t["name"] == "tick")
print(t["lateness_p50_ns"], t["lateness_p99_ns"], t["lateness_max_ns"], t["runs"])
PY
}

run() {  # run CONDITION: prints p50 p99 max runs
    local cond=$1 target=$port helper=""
    case $cond in
    up) mosquitto -c "$work/mosquitto.conf" > /dev/null 2>&1 & helper=$!
        for _ in $(seq 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),0.1)" 2>/dev/null && break; sleep 0.05; done ;;
    down) target=$(free_port) ;;
    stalled) target=$(free_port)
        python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $target)); s.listen(64)
held = []
while True:
    c, _ = s.accept(); held.append(c)  # never read
" & helper=$! ; sleep 0.3 ;;
    esac
    [ -n "$helper" ] && pids+=("$helper")
    config "$target" > "$work/$cond.yaml"
    "$boardd" --config "$work/$cond.yaml" --mock --socket "$work/$cond.sock" --log-level warning 2> "$work/$cond.log" &
    local d=$!
    pids+=("$d")
    for _ in $(seq 100); do [ -S "$work/$cond.sock" ] && break; sleep 0.05; done
    sleep "$window"
    p99 "$work/$cond.sock"
    kill "$d"; wait "$d" 2>/dev/null || true
    [ -n "$helper" ] && { kill "$helper" 2>/dev/null || true; wait "$helper" 2>/dev/null || true; }
    return 0
}

echo "== 1 kHz task on the main loop, its output published each run; lateness from boardd's stats; $repeats repeat(s) of ${window} s per condition" >&2
printf '| repeat | up p99 | down p99 | stalled p99 | down / up | stalled / up |\n|---|---|---|---|---|---|\n'
ratios_down=() ratios_stalled=()
conds=(up down stalled)
for r in $(seq "$repeats"); do
    declare -A res=()
    # Rotate the order: no condition always first.
    for i in 0 1 2; do
        c=${conds[$(( (i + r) % 3 ))]}
        res[$c]=$(run "$c")
    done
    up=$(echo "${res[up]}" | cut -d' ' -f2); down=$(echo "${res[down]}" | cut -d' ' -f2); st=$(echo "${res[stalled]}" | cut -d' ' -f2)
    rd=$(python3 -c "print(f'{$down/$up:.2f}')"); rs=$(python3 -c "print(f'{$st/$up:.2f}')")
    ratios_down+=("$rd"); ratios_stalled+=("$rs")
    printf '| %s | %s µs | %s µs | %s µs | %s× | %s× |\n' "$r" \
        "$(python3 -c "print(f'{$up/1000:.1f}')")" "$(python3 -c "print(f'{$down/1000:.1f}')")" "$(python3 -c "print(f'{$st/1000:.1f}')")" "$rd" "$rs"
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
echo "median p99 ratio: down / up $(med "${ratios_down[@]}")×, stalled / up $(med "${ratios_stalled[@]}")× (goal ≤ 1.10×)"
