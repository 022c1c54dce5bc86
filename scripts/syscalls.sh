#!/usr/bin/env bash
# System calls per timer fire, counted with strace (exact, whatever the
# machine's load): the engine's repeating timer against a raw timerfd loop
# re-armed each fire and a raw periodic one (Benchmarks' instr-driver), and
# boardd's main loop with a 10 ms task, run on mock chips.
#
#   scripts/syscalls.sh [--quick]
#   scripts/syscalls.sh --gate   (in .ci/run) quick, and fails unless the
#       engine's fire and boardd's tick cost at most 2.25 system calls (a
#       timer fire late by a whole period may re-arm once; each fire
#       re-armed is 3) and the raw re-armed loop's control shows its arm
#
# Method: each program runs twice, with N and 2N fires (boardd: for T and
# 2T), and the difference of the counts is divided by the difference of
# the fires, so start-up and shutdown cancel out. Only the loop's own
# thread is counted (strace -ff, the process's first thread). Figures in
# BENCHMARKS.md ("System calls per timer fire").
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
gate=0
case "${1:-}" in
    --quick) quick=1 ;;
    --gate) quick=1; gate=1 ;;
    "") ;;
    *) sed -n 2,18p "$0"; exit 2 ;;
esac

scripts/install-deps.sh strace >&2
(cd Benchmarks && swift build -c release --product instr-driver >&2)
driver=$(cd Benchmarks && swift build -c release --show-bin-path)/instr-driver
swift build --product boardd >&2
boardd=$(swift build --show-bin-path)/boardd

work=$(mktemp -d /tmp/boardloop-syscalls.XXXXXX)
trap 'rm -rf "$work"' EXIT

# count NAME CMD...: runs CMD under strace -ff and prints, for the first
# thread, "waits reads arms" (epoll_wait/epoll_pwait, read, timerfd_settime).
count() {
    local name=$1
    shift
    rm -f "$work/$name".*
    strace -ff -qq -o "$work/$name" -e trace=epoll_wait,epoll_pwait,read,timerfd_settime "$@" > /dev/null 2>&1
    local first
    first=$(ls "$work/$name".* | sort -t. -k2 -n | head -1)
    awk '/^epoll_p?wait\(/ { w++ } /^read\(/ { r++ } /^timerfd_settime\(/ { a++ }
         END { printf "%d %d %d\n", w, r, a }' "$first"
}

# per NAME N CMD-WITH-N CMD-WITH-2N: the difference per fire.
row() {
    local label=$1 fires=$2 a b
    a=$3
    b=$4
    awk -v a="$a" -v b="$b" -v n="$fires" -v label="$label" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        w = (y[1] - x[1]) / n; r = (y[2] - x[2]) / n; s = (y[3] - x[3]) / n
        printf "%-58s %6.2f %6.2f %6.2f %6.2f\n", label, w, r, s, w + r + s
    }' | tee -a "$work/rows"
}

n=$([ $quick = 1 ] && echo 500 || echo 2000)
printf "%-58s %6s %6s %6s %6s\n" "per timer fire" "wait" "read" "arm" "total"
for impl in boardloop raw raw-periodic; do
    a=$(count "$impl-1" "$driver" timer "$impl" "$n")
    b=$(count "$impl-2" "$driver" timer "$impl" $((2 * n)))
    case $impl in
        boardloop) label="engine: a 1 ms repeating timer" ;;
        raw) label="raw: one-shot timerfd re-armed each fire" ;;
        raw-periodic) label="raw: periodic timerfd" ;;
    esac
    row "$label" "$n" "$a" "$b"
done

# boardd: a 10 ms task toggling an output on mock chips; nothing else runs
# on its loop but its own timers (the watchdog is off outside systemd).
cat > "$work/task.yaml" << 'EOF'
board: demo
lines:
  led: { pin: LED, output: { initial: off } }
tasks:
  tick: { every: 10ms, do: [ toggle: led ] }
EOF
t=$([ $quick = 1 ] && echo 1 || echo 3)
a=$(count boardd-1 "$boardd" run --config "$work/task.yaml" --mock --for "${t}s" --socket "$work/s1" --log-level warning)
b=$(count boardd-2 "$boardd" run --config "$work/task.yaml" --mock --for "$((2 * t))s" --socket "$work/s2" --log-level warning)
row "boardd: a 10 ms task's tick (main loop)" $((t * 100)) "$a" "$b"

if [ $gate = 1 ]; then
    awk '
        /^engine:/ || /^boardd:/ { if ($NF > 2.25) { print "syscall gate: " $0 " (over 2.25)"; bad = 1 } }
        /^raw: one-shot/ { if ($NF < 2.9) { print "syscall gate: the control counts no arm: " $0; bad = 1 } }
        END { if (bad) exit 1; print "syscall gate: passed" }' "$work/rows"
fi
