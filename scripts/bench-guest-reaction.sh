#!/bin/sh
# The reaction's latency on the real kernel as a series: boardd against
# react-ref (the same reaction in C over libgpiod), ROUNDS rounds of EDGES
# edges each, in one gpio-sim guest per libgpiod branch (1.6, then 2.x),
# under qemu on the TSC the host measured (scripts/sim/run-guest.sh). Each
# round runs both sides, the first side alternating; the guest prints
# every round and the medians of the rounds' ratios, and this script
# prints those lines again at the end.
#
# With --profile, qemu runs with the guest-insns plugin
# (scripts/sim/guest-insns.c) and the guest with the marker program: the
# script prints, per edge, what each side's program executed (instructions
# and translation blocks entered, every thread, its libraries included),
# what the shell that drives the edges executed, and what the kernel
# executed (beside what the same edges cost with nothing listening, the
# idle phase), and the pages each side's program touched per edge
# (guest-insns.c says why they count under TCG). Instruction counts do
# not depend on the host's speed; the kernel's include its timer ticks,
# so they vary with how long a phase took.
#
# usage: scripts/bench-guest-reaction.sh [--profile] [ROUNDS [EDGES]]   (default 5 rounds of 200 edges)
#   SIM_LIBGPIOD  which branches: "1 2" (default), "1" or "2"
#   GUEST_STATIC  1: boardd built as the .deb builds it (--static-swift-stdlib)
#   SIM_SMP       2: a guest of two CPUs, the edges driven from the second (not with --profile,
#                 whose counters assume one)
# Latencies under TCG (software emulation) are indicative: see BENCHMARKS.md.
set -eu
cd "$(dirname "$0")/.."
profile=0
[ "${1:-}" = --profile ] && { profile=1; shift; }
rounds=${1:-5}
edges=${2:-200}
case "$rounds$edges" in *[!0-9]* | "") echo "usage: $0 [--profile] [ROUNDS [EDGES]]" >&2; exit 2 ;; esac
[ $profile = 0 ] || [ "${SIM_SMP:-1}" = 1 ] || { echo "$0: --profile counts one CPU: not with SIM_SMP" >&2; exit 2; }
[ "$rounds" -ge 1 ] && [ "$edges" -ge 1 ] || { echo "usage: $0 [--profile] [ROUNDS [EDGES]]: both at least 1" >&2; exit 2; }
# About 25 s a round under TCG on a quiet machine (a plugin slows it): room
# for several times that, and the boot.
limit=$((300 + rounds * edges * (3 + 3 * profile) / 8))
mkdir -p .build-guest
for v in ${SIM_LIBGPIOD:-1 2}; do
    log=.build-guest/guest-libgpiod$v.log
    if [ $profile = 1 ]; then
        plugin=.build-guest/guest-insns.so
        cc -O2 -Wall -shared -fPIC -o "$plugin" scripts/sim/guest-insns.c
        cc -O2 -Wall -static -o .build-guest/mark scripts/sim/mark.c
        insns=.build-guest/guest-insns-libgpiod$v.log
        rm -f "$insns"
        GUEST_MARK=.build-guest/mark SIM_QEMU="-plugin $PWD/$plugin -d plugin -D $PWD/$insns" \
            GUEST_PRODUCTS="" GUEST_SCENARIOS=20-reaction-latency.sh SIM_TIMEOUT=$limit SIM_LIBGPIOD=$v \
            SIM_APPEND="REACTION_ROUNDS=$rounds REACTION_EDGES=$edges" scripts/sim-test.sh
    else
        GUEST_PRODUCTS="" GUEST_SCENARIOS=20-reaction-latency.sh SIM_TIMEOUT=$limit SIM_LIBGPIOD=$v \
            SIM_APPEND="REACTION_ROUNDS=$rounds REACTION_EDGES=$edges" scripts/sim-test.sh
    fi
done
for v in ${SIM_LIBGPIOD:-1 2}; do
    log=.build-guest/guest-libgpiod$v.log
    echo "== libgpiod $v ($log)"
    grep -E '^(PASS|FAIL) reaction-latency' "$log" | tr -d '\r'
    [ $profile = 1 ] || continue
    python3 - "$log" ".build-guest/guest-insns-libgpiod$v.log" "$edges" <<'PY'
import re, statistics, sys
console, insns, edges = sys.argv[1], sys.argv[2], int(sys.argv[3])
labels = {}
for line in open(console, errors="replace"):
    m = re.match(r"mark (\d+): (.*?)\s*$", line)
    if m:
        labels[int(m.group(1))] = m.group(2)
# per mark: kernel insns, TBs; static insns, TBs; dynamic insns, TBs; pages
totals = {}
for line in open(insns, errors="replace"):
    m = re.match(r"guest-insns: mark (\d+) kernel (\d+) (\d+) static (\d+) (\d+) dynamic (\d+) (\d+) pages (\d+)", line)
    if m:
        totals[int(m.group(1))] = [int(x) for x in m.groups()[1:]]
phases = {}
for n, label in labels.items():
    if not label.endswith(" start") or n + 1 not in totals or n not in totals:
        continue
    if labels.get(n + 1) != label[: -len(" start")] + " end":
        continue
    side = label[: -len(" start")].split(" round")[0]
    phases.setdefault(side, []).append([(b - a) / edges for a, b in zip(totals[n], totals[n + 1])])
if "idle" not in phases or not phases.get("boardd") or not phases.get("react-ref"):
    sys.exit("profile: marks missing (labels %d, totals %d)" % (len(labels), len(totals)))
idle = phases["idle"][0]
rounds = len(phases["boardd"])
print("per edge, medians over %d rounds (range); the reacting program is the guest's position-independent code" % rounds)
print("(the program and its libraries, every thread); the shell driving the edges is static code; the kernel's figure")
print("is the whole guest's: %.0f with nobody listening (the idle phase), timer ticks included (they follow the wall clock):" % idle[0])
def fig(side, i, less=0):
    v = [r[i] - less for r in phases[side]]
    return statistics.median(v), min(v), max(v)
print("%-10s %22s %18s %18s %28s %22s" % ("side", "program insns", "program TBs", "program pages", "kernel insns", "shell insns"))
med = {}
for side in ("boardd", "react-ref"):
    d, dt, pg, k, s_ = fig(side, 4), fig(side, 5), fig(side, 6), fig(side, 0), fig(side, 2)
    med[side] = (d[0], dt[0], k[0], pg[0])
    f = lambda t: "%.0f (%.0f-%.0f)" % t
    print("%-10s %22s %18s %18s %28s %22s" % (side, f(d), f(dt), f(pg), f(k), f(s_)))
b, r = med["boardd"], med["react-ref"]
print("boardd/react-ref: program instructions %.2fx, blocks entered %.2fx, pages touched %.2fx; kernel instructions %+.0f" % (
    b[0] / r[0], b[1] / r[1], b[3] / r[3], b[2] - r[2]))
print("(pages: the distinct 4 KiB pages of code and data the program touched after each time the shell ran, summed:")
print("each one a miss of qemu's software TLB, flushed at every switch of address space)")
PY
done
