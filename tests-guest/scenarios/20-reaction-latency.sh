#!/bin/sh
# Reaction latency on the real kernel: an edge on an input toggles an
# output. boardd (its "trigger to actions done" figure: the edge's kernel
# timestamp to the output written, from the summary it logs at stop)
# against react-ref, the same reaction written in C over libgpiod with
# poll(2): the limit. Both are driven alike, one edge every 20 ms through
# gpio-sim's sysfs `pull`. Under TCG emulation the figures are indicative;
# their ratio is the point. The scenario fails only when a side misses edges.
command -v boardd >/dev/null 2>&1 || { echo "SKIP reaction-latency: boardd not in this initramfs"; exit 0; }
command -v react-ref >/dev/null 2>&1 || { echo "SKIP reaction-latency: react-ref not in this initramfs"; exit 0; }
. /tests/reaction-lib.sh
N=${REACTION_EDGES:-200}
ok() { echo "PASS reaction-latency $1"; }
bad() { echo "FAIL reaction-latency $1"; }
# A figure in µs from "470.7µs", "10.3ms", "850ns", "1.2s" or "12.3us".
us() {
    echo "$1" | awk '{ v = $0 + 0; if ($0 ~ /ns$/) v /= 1000; else if ($0 ~ /ms$/) v *= 1000; else if ($0 ~ /[0-9]s$/) v *= 1000000; print v }'
}
pull $BUTTON up
sleep 0.2

# boardd
reaction_config /tmp/latency.yaml
# At notice: no per-reaction trace line (info) is formatted before the
# actions run; the summary at stop is at notice.
boardd --config /tmp/latency.yaml --log-level notice 2> /tmp/latency.log &
pid=$!
if ! wait_for /tmp/latency.log 'ready: every loop is running' 120; then
    bad "boardd did not report ready within 120 s"; tail -n 20 /tmp/latency.log; kill -9 $pid 2>/dev/null; exit 1
fi
drive "$N"
sleep 1
kill -TERM $pid
wait $pid
summary=$(grep 'reaction toggle:' /tmp/latency.log | tail -n 1)
# "... toggle: N fires (M in all), trigger to actions done p50 X p99 Y max Z"
set -- $(echo "$summary" | sed -n 's/.*(\([0-9]*\) in all), trigger to actions done p50 \([^ ]*\) p99 \([^ ]*\) max \([^ ]*\).*/\1 \2 \3 \4/p')
if [ "${1:-0}" != "$N" ]; then
    bad "boardd reacted to ${1:-0} of $N edges: '$summary'"; tail -n 20 /tmp/latency.log; exit 1
fi
b50=$(us "$2") b99=$(us "$3") bmax=$(us "$4")

# react-ref
react-ref "$LABEL" $BUTTON $LED "$N" > /tmp/ref.out 2>&1 &
rpid=$!
if ! wait_for /tmp/ref.out 'react-ref: ready' 30; then
    bad "react-ref did not start: $(cat /tmp/ref.out)"; kill -9 $rpid 2>/dev/null; exit 1
fi
drive "$N"
wait $rpid
line=$(grep 'edges, trigger to actions done' /tmp/ref.out)
set -- $(echo "$line" | sed -n 's/react-ref: \([0-9]*\) edges, trigger to actions done p50 \([^ ]*\) p99 \([^ ]*\) max \([^ ]*\)/\1 \2 \3 \4/p')
if [ "${1:-0}" != "$N" ]; then
    bad "react-ref reacted to ${1:-0} of $N edges: $(cat /tmp/ref.out)"; exit 1
fi
r50=$(us "$2") r99=$(us "$3") rmax=$(us "$4")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
ok "$N edges, edge -> output written: boardd (--log-level notice) p50 ${b50}us p99 ${b99}us max ${bmax}us; react-ref (C, $(sed -n 's/.*(\(libgpiod [^)]*\)).*/\1/p' /tmp/ref.out)) p50 ${r50}us p99 ${r99}us max ${rmax}us; boardd/C p50 $(ratio "$b50" "$r50") p99 $(ratio "$b99" "$r99") (TCG emulation: indicative)"
