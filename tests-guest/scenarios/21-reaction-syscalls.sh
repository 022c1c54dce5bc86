#!/bin/sh
# System calls per reaction on the real kernel: an edge on an input toggles
# an output, in boardd at its default log level (info: each reaction is a
# trace line) and in react-ref (the same reaction in C over libgpiod with
# poll(2)). Counted with strace over N and then 2N edges, one edge every
# 20 ms; the difference over N is what one edge costs, whatever attaching
# adds, once what boardd does idle (counted over a window without edges,
# per second) is taken off each window in proportion to its length. A file per thread (strace -ff): boardd's loop thread
# (the process's first) is counted
# apart from its other threads (the log writer formats and writes the
# trace lines there, off the reaction). The scenario fails when boardd's
# loop thread makes more system calls per edge than react-ref does.
command -v boardd >/dev/null 2>&1 || { echo "SKIP reaction-syscalls: boardd not in this initramfs"; exit 0; }
command -v react-ref >/dev/null 2>&1 || { echo "SKIP reaction-syscalls: react-ref not in this initramfs"; exit 0; }
command -v strace >/dev/null 2>&1 || { echo "SKIP reaction-syscalls: strace not in this initramfs"; exit 0; }
. /tests/reaction-lib.sh
N=${SYSCALL_EDGES:-100}
ok() { echo "PASS reaction-syscalls $1"; }
bad() { echo "FAIL reaction-syscalls $1"; }
# calls FILE...: "NAME COUNT" per system call the strace -ff files hold
# (a file per thread, so no call is split by another thread's).
calls() {
    cat "$@" /dev/null | awk '
        /^(\+\+\+|---)/ { next }
        { name = $1; sub(/\(.*/, "", name); if (name != "" && name !~ /^</) n[name]++ }
        END { for (k in n) print k, n[k] }'
}
# per_edge A B: from two "NAME COUNT" lists (N edges, 2N edges), "NAME PER-EDGE" for each name, and "total T".
per_edge() {
    awk -v n="$N" '
        FNR == NR { a[$1] = $2; next }
        { b[$1] = $2 }
        END {
            for (k in b) if (!(k in a)) a[k] = 0
            for (k in a) { d = (b[k] - a[k]) / n; t += d; if (d > 0.005 || d < -0.005) printf "%s %.2f\n", k, d }
            printf "total %.2f\n", t
        }' "$1" "$2"
}
words() { sort "$1" | awk '$1 != "total" { printf "%s%s %s", sep, $1, $2; sep = ", " } END { print "" }'; }
total() { awk '$1 == "total" { print $2 }' "$1"; }
pull $BUTTON up
sleep 0.2

reaction_config /tmp/syscalls.yaml
# boardd at its default log level, strace attached over each window.
boardd --config /tmp/syscalls.yaml 2> /tmp/syscalls.log &
pid=$!
if ! wait_for /tmp/syscalls.log 'ready: every loop is running' 120; then
    bad "boardd did not report ready within 120 s"; tail -n 20 /tmp/syscalls.log; kill -9 $pid 2>/dev/null; exit 1
fi
# window COUNT PREFIX [SECONDS]: strace boardd over COUNT edges (or, with
# none, SECONDS idle), a file per thread; its length in centiseconds, from
# the attach to the detach, goes to PREFIX.cs.
window() {
    strace -ff -qq -p "$pid" -o "$2" &
    spid=$!
    i=0
    until traced $pid; do
        i=$((i + 1))
        [ $i -gt 600 ] && { bad "strace did not attach to boardd within 30 s"; kill $spid; exit 1; }
        sleep 0.05
    done
    t0=$(now_cs)
    sleep 0.5
    if [ "$1" -gt 0 ]; then drive "$1"; else sleep "$3"; fi
    sleep 0.5
    kill -INT $spid
    wait $spid 2>/dev/null
    echo $(( $(now_cs) - t0 )) > "$2.cs"
}
# Idle first: what boardd does per second with no edge (on libgpiod 1.6,
# each request's chip-presence check, once a second), taken off the edges'
# windows in proportion to their length.
window 0 /tmp/bd.0 4
window "$N" /tmp/bd.1
window $((2 * N)) /tmp/bd.2
kill -TERM $pid
wait $pid
fires=$(grep -o 'toggle: [0-9]* fires ([0-9]* in all)' /tmp/syscalls.log | tail -n 1 | sed 's/.*(\([0-9]*\) in all)/\1/')
if [ "${fires:-0}" != "$((3 * N))" ]; then
    bad "boardd reacted to ${fires:-0} of $((3 * N)) edges"; tail -n 20 /tmp/syscalls.log; exit 1
fi
others() { for f in "$1".*; do case "$f" in "$1.$pid" | "$1.cs") ;; *) echo "$f" ;; esac; done; }
# net IDLE WINDOW: WINDOW's counts less IDLE's scaled to WINDOW's length.
net() {
    awk -v s="$(( $(cat "$2.cs") ))" -v s0="$(( $(cat "$1.cs") ))" '
        FNR == NR { idle[$1] = $2; next }
        { w[$1] = $2 }
        END {
            for (k in idle) if (!(k in w)) w[k] = 0
            for (k in w) printf "%s %.2f\n", k, w[k] - idle[k] * s / s0
        }' "$3" "$4"
}
mkdir -p /tmp/cnt
for w in 0 1 2; do
    calls /tmp/bd.$w.$pid > /tmp/cnt/bd.$w.main
    calls $(others /tmp/bd.$w) > /tmp/cnt/bd.$w.others
done
for w in 1 2; do
    net /tmp/bd.0 /tmp/bd.$w /tmp/cnt/bd.0.main /tmp/cnt/bd.$w.main > /tmp/cnt/bd.$w.main.net
    net /tmp/bd.0 /tmp/bd.$w /tmp/cnt/bd.0.others /tmp/cnt/bd.$w.others > /tmp/cnt/bd.$w.others.net
done
per_edge /tmp/cnt/bd.1.main.net /tmp/cnt/bd.2.main.net > /tmp/cnt/bd.main
per_edge /tmp/cnt/bd.1.others.net /tmp/cnt/bd.2.others.net > /tmp/cnt/bd.others
# The idle window per second, as it was counted.
idle=$(awk -v s="$(cat /tmp/bd.0.cs)" '{ printf "%s%s %.2f", sep, $1, $2 * 100 / s; sep = ", " } END { if (!NR) printf "none" }' /tmp/cnt/bd.0.main)

# react-ref: N edges, then 2N, each a run of its own under strace.
ref_run() {  # ref_run COUNT PREFIX
    strace -ff -qq -o "$2" react-ref "$LABEL" $BUTTON $LED "$1" > /tmp/ref.out 2>&1 &
    rpid=$!
    if ! wait_for /tmp/ref.out 'react-ref: ready' 60; then
        bad "react-ref did not start: $(cat /tmp/ref.out)"; kill -9 $rpid 2>/dev/null; exit 1
    fi
    drive "$1"
    wait $rpid
    grep -q "react-ref: $1 edges" /tmp/ref.out || { bad "react-ref did not see its $1 edges: $(cat /tmp/ref.out)"; exit 1; }
}
ref_run "$N" /tmp/ref.1
ref_run $((2 * N)) /tmp/ref.2
calls /tmp/ref.1.* > /tmp/cnt/ref.1.main; calls /tmp/ref.2.* > /tmp/cnt/ref.2.main
per_edge /tmp/cnt/ref.1.main /tmp/cnt/ref.2.main > /tmp/cnt/ref.main

# What boardd's loop waited with (epoll_pwait's timeout, over the longer
# window) and what its other threads wrote: said with the figures.
waits=$(awk '
    /^epoll_pwait\(/ {
        t = "?"
        if (match($0, /, [0-9]+, -?[0-9]+, /)) { t = substr($0, RSTART + 2, RLENGTH - 4); sub(/^[0-9]+, /, "", t) }
        n[t]++
    }
    END { for (k in n) { printf "%s%s x%d", sep, k, n[k]; sep = ", " } }' /tmp/bd.2.$pid)
lib=$(sed -n 's/.*(\(libgpiod [^)]*\)).*/\1/p' /tmp/ref.out)
line="per edge ($N and $((2 * N)) edges): boardd's loop thread $(total /tmp/cnt/bd.main) ($(words /tmp/cnt/bd.main); epoll_pwait timeouts over $((2 * N)) edges: $waits; idle, taken off, per second: $idle); boardd's other threads $(total /tmp/cnt/bd.others) ($(words /tmp/cnt/bd.others)); react-ref (C, $lib) $(total /tmp/cnt/ref.main) ($(words /tmp/cnt/ref.main))"
if awk -v a="$(total /tmp/cnt/bd.main)" -v b="$(total /tmp/cnt/ref.main)" 'BEGIN { exit !(a <= b + 0.05) }'; then
    ok "$line"
else
    bad "boardd's loop thread makes more system calls per edge than react-ref: $line"
    echo "boardd's loop thread, 16 calls from the middle of the longer window:"
    n=$(wc -l < /tmp/bd.2.$pid)
    sed -n "$((n / 2)),$((n / 2 + 15))p" /tmp/bd.2.$pid | cut -c1-160
fi
