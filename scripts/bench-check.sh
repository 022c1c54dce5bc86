#!/usr/bin/env bash
# Times `boardd --check` on generated configs of 1k, 10k and 20k lines
# (release build) and prints the time per 1k lines, so that linearity shows:
# the last column should stay about the same from row to row.
#
#   scripts/bench-check.sh              # builds boardd (release) first
#   BOARDD=path/to/boardd scripts/bench-check.sh
#
# The configs are on the generic board: inputs and outputs on many chips,
# sequences that hold a mode, tasks, commands, and reactions that refer to
# all of them (as Tests/BoardDaemonTests/CheckScalingTests.swift builds).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${BOARDD:-}" ]]; then
    swift build -c release --product boardd >/dev/null
    BOARDD="$(swift build -c release --show-bin-path)/boardd"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

generate() {  # generate LINES FILE
    awk -v target="$1" 'BEGIN {
        n = int(target / 16)
        print "board: generic"; print "priorities: [low, normal, high]"
        print "modes:"; print "  quiet: { admits: [high] }"; print "lines:"; c = 5
        for (i = 0; i < n; i++) {
            printf "  in%d: { chip: gpiochip%d, offset: %d, input: { edge: both } }\n", i, int(i / 32), (i % 32) * 2
            printf "  out%d: { chip: gpiochip%d, offset: %d, output: {} }\n", i, int(i / 32), (i % 32) * 2 + 1
            c += 2
        }
        print "sequences:"; c++
        for (i = 0; i < n; i++) { printf "  s%d: { mode: quiet, steps: [ toggle: out%d, wait: 1s ] }\n", i, i; c++ }
        print "tasks:"; c++
        for (i = 0; i < n; i++) { printf "  t%d: { every: 1s, in_modes: [quiet], do: [ toggle: out%d ] }\n", i, i; c++ }
        print "commands:"; c++
        for (i = 0; i < n; i++) { printf "  c%d: { argv: [/bin/true], timeout: 5s }\n", i; c++ }
        print "reactions:"; c++
        for (k = 0; c < target; k++) {
            i = k % n
            printf "  - on: { line: in%d, press: true }\n", i
            printf "    do: [ toggle: out%d, sequence: s%d, run: c%d, run: [\"/bin/prog%d\"], mode: quiet ]\n", i, i, i, i
            c += 2
        }
    }' > "$2"
}

printf '%8s %10s %14s\n' lines seconds "s per 1k lines"
for lines in 1000 10000 20000; do
    generate "$lines" "$work/c.yaml"
    "$BOARDD" --check --config "$work/c.yaml" >/dev/null  # warm the caches; must pass
    best=""
    for _ in 1 2 3; do
        start=$(date +%s.%N)
        "$BOARDD" --check --config "$work/c.yaml" >/dev/null
        end=$(date +%s.%N)
        t=$(echo "$end - $start" | bc -l)
        if [[ -z "$best" ]] || (( $(echo "$t < $best" | bc -l) )); then best=$t; fi
    done
    printf '%8d %10.3f %14.4f\n' "$(wc -l < "$work/c.yaml")" "$best" "$(echo "$best * 1000 / $lines" | bc -l)"
done
