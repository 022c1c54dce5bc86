#!/bin/sh
# Reaction latency on the real kernel: an edge on an input toggles an
# output. boardd (its "trigger to actions done" figure: the edge's kernel
# timestamp to the output written, from the summary it logs at stop)
# against react-ref, the same reaction written in C over libgpiod with
# poll(2): the limit. Both are driven alike, one edge every 20 ms through
# gpio-sim's sysfs `pull`. Under TCG emulation the figures are indicative;
# their ratio is the point. The scenario fails only when a side misses edges.
#   REACTION_EDGES   edges per side and round (default 200)
#   REACTION_ROUNDS  rounds (default 1). Each round runs both sides, boardd
#                    first in odd rounds and react-ref first in even ones,
#                    so a drift of the machine's speed falls on both; with
#                    more than one, a last line gives the medians of the
#                    rounds' ratios (scripts/bench-guest-reaction.sh passes
#                    it on the guest's kernel command line).
# With more than one CPU (scripts/sim-test.sh with SIM_SMP=2), the shell
# that drives the edges runs on the second and the side that reacts on the
# first, as on a board, where the edge is an interrupt: the reacting CPU
# waits in its own address space between edges, not in the shell's.
# With /usr/bin/mark in the guest (scripts/bench-guest-reaction.sh
# --profile), each side's edges are driven between two marks, and so are
# edges that nothing listens to (the "idle" phase, first): the qemu plugin
# counts what the whole guest executed between them.
command -v boardd >/dev/null 2>&1 || { echo "SKIP reaction-latency: boardd not in this initramfs"; exit 0; }
command -v react-ref >/dev/null 2>&1 || { echo "SKIP reaction-latency: react-ref not in this initramfs"; exit 0; }
. /tests/reaction-lib.sh
N=${REACTION_EDGES:-200}
ROUNDS=${REACTION_ROUNDS:-1}
ok() { echo "PASS reaction-latency $1"; }
bad() { echo "FAIL reaction-latency $1"; }
# A figure in µs from "470.7µs", "10.3ms", "850ns", "1.2s" or "12.3us".
us() {
    echo "$1" | awk '{ v = $0 + 0; if ($0 ~ /ns$/) v /= 1000; else if ($0 ~ /ms$/) v *= 1000; else if ($0 ~ /[0-9]s$/) v *= 1000000; print v }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
# median of the numbers on standard input, one a line, and their range: "MEDIAN MIN MAX"
median() {
    sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f %.2f %.2f\n", m, v[1], v[NR] }'
}
# phase LABEL: drives N edges between two marks named LABEL (plain drive without mark).
phase() {
    command -v mark >/dev/null 2>&1 && mark "$1 start"
    drive "$N"
    command -v mark >/dev/null 2>&1 && mark "$1 end"
    return 0
}
# on: the command prefix that runs the reacting side on the first CPU, and
# cpus: what the result lines say of it ("" both, with one CPU)
on=""
cpus=""
if [ "$(nproc)" -gt 1 ]; then
    cpus="; $(nproc) CPUs, the reacting side on the first"
    taskset -p 2 $$ >/dev/null
    on="taskset 1"
fi
pull $BUTTON up
sleep 0.2
reaction_config /tmp/latency.yaml
command -v mark >/dev/null 2>&1 && phase idle

# boardd for N edges: sets b50, b99, bmax (µs); 1 when it failed.
run_boardd() {
    # At notice: no per-reaction trace line (info) is formatted before the
    # actions run; the summary at stop is at notice.
    $on boardd --config /tmp/latency.yaml --log-level notice 2> /tmp/latency.log &
    pid=$!
    if ! wait_for /tmp/latency.log 'ready: every loop is running' 120; then
        bad "boardd did not report ready within 120 s"; tail -n 20 /tmp/latency.log; kill -9 $pid 2>/dev/null; return 1
    fi
    phase "boardd round $round"
    sleep 1
    kill -TERM $pid
    wait $pid
    summary=$(grep 'reaction toggle:' /tmp/latency.log | tail -n 1)
    # "... toggle: N fires (M in all), trigger to actions done p50 X p99 Y max Z"
    set -- $(echo "$summary" | sed -n 's/.*(\([0-9]*\) in all), trigger to actions done p50 \([^ ]*\) p99 \([^ ]*\) max \([^ ]*\).*/\1 \2 \3 \4/p')
    if [ "${1:-0}" != "$N" ]; then
        bad "boardd reacted to ${1:-0} of $N edges: '$summary'"; tail -n 20 /tmp/latency.log; return 1
    fi
    b50=$(us "$2") b99=$(us "$3") bmax=$(us "$4")
}

# react-ref for N edges: sets r50, r99, rmax (µs) and rlib; 1 when it failed.
run_ref() {
    $on react-ref "$LABEL" $BUTTON $LED "$N" > /tmp/ref.out 2>&1 &
    rpid=$!
    if ! wait_for /tmp/ref.out 'react-ref: ready' 30; then
        bad "react-ref did not start: $(cat /tmp/ref.out)"; kill -9 $rpid 2>/dev/null; return 1
    fi
    phase "react-ref round $round"
    wait $rpid
    line=$(grep 'edges, trigger to actions done' /tmp/ref.out)
    set -- $(echo "$line" | sed -n 's/react-ref: \([0-9]*\) edges, trigger to actions done p50 \([^ ]*\) p99 \([^ ]*\) max \([^ ]*\)/\1 \2 \3 \4/p')
    if [ "${1:-0}" != "$N" ]; then
        bad "react-ref reacted to ${1:-0} of $N edges: $(cat /tmp/ref.out)"; return 1
    fi
    r50=$(us "$2") r99=$(us "$3") rmax=$(us "$4")
    rlib=$(sed -n 's/.*(\(libgpiod [^)]*\)).*/\1/p' /tmp/ref.out)
}

: > /tmp/latency-rounds
round=1
while [ $round -le "$ROUNDS" ]; do
    if [ $((round % 2)) = 1 ]; then
        run_boardd || exit 1
        run_ref || exit 1
    else
        run_ref || exit 1
        run_boardd || exit 1
    fi
    p50=$(ratio "$b50" "$r50") p99=$(ratio "$b99" "$r99")
    echo "$b50 $r50 $p50 $b99 $r99 $p99" >> /tmp/latency-rounds
    what="$N edges, edge -> output written: boardd (--log-level notice) p50 ${b50}us p99 ${b99}us max ${bmax}us; react-ref (C, $rlib) p50 ${r50}us p99 ${r99}us max ${rmax}us; boardd/C p50 ${p50}x p99 ${p99}x (TCG emulation: indicative)$cpus"
    if [ "$ROUNDS" = 1 ]; then ok "$what"; else ok "round $round of $ROUNDS: $what"; fi
    round=$((round + 1))
done
if [ "$ROUNDS" -gt 1 ]; then
    col() { awk -v c="$1" '{ print $c }' /tmp/latency-rounds | median; }
    set -- $(col 3); p50m=$1 p50lo=$2 p50hi=$3
    set -- $(col 6); p99m=$1 p99lo=$2 p99hi=$3
    set -- $(col 1); bm=$1
    set -- $(col 2); rm=$1
    set -- $(col 4); b99m=$1
    set -- $(col 5); r99m=$1
    ok "series: $ROUNDS rounds of $N edges, $rlib: boardd/C p50 median ${p50m}x (${p50lo}-${p50hi}), p99 median ${p99m}x (${p99lo}-${p99hi}); medians boardd p50 ${bm}us p99 ${b99m}us, react-ref p50 ${rm}us p99 ${r99m}us$cpus"
fi
