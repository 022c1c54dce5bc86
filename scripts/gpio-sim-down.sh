#!/bin/sh
# Removes the simulated chips created by gpio-sim-up.sh (same chips file).
set -eu
conf=${1:-$(dirname "$0")/../boards/sim-chips.conf}
cfs=/sys/kernel/config/gpio-sim
run=${BOARDLOOP_SIM_RUN:-/run/boardloop-sim}
grep '^chip ' "$conf" | while read -r _ chip _; do
    [ -d "$cfs/$chip" ] || continue
    [ "$(cat "$cfs/$chip/live")" = 1 ] && echo 0 > "$cfs/$chip/live"
    for l in "$cfs/$chip"/bank0/line*; do [ -d "$l" ] && rmdir "$l"; done
    rmdir "$cfs/$chip/bank0" "$cfs/$chip"
    rm -f "$run/$chip.env"
    echo "$chip: removed"
done
