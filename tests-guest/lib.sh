# Shared by the guest's scenarios (sourced from /tests/lib.sh): the
# gpio-sim chip's map, its lines through sysfs, the guest's clock, and
# waits with an overall deadline (every wait polls; none sleeps and hopes).
. /run/boardloop-sim/boardloop-sim0.env
# pull OFFSET up|down: drives an input as a wire would (the sim's pull).
pull() { echo "pull-$2" > "$SYSFS/sim_gpio$1/pull"; }
# value OFFSET: what the line carries now (0 or 1).
value() { cat "$SYSFS/sim_gpio$1/value"; }
# Centiseconds since boot.
now_cs() { read -r up _ < /proc/uptime; echo "${up%.*}${up#*.}" | sed 's/^0*//;s/^$/0/'; }
# wait_value OFFSET VALUE SECONDS: polls every 10 ms; 0 when it got there.
wait_value() {
    end=$(( $(now_cs) + $3 * 100 ))
    while [ "$(value "$1")" != "$2" ]; do
        [ "$(now_cs)" -gt "$end" ] && return 1
        sleep 0.01
    done
}
# wait_for FILE TEXT SECONDS: polls every 50 ms; 0 when FILE holds TEXT.
wait_for() {
    end=$(( $(now_cs) + $3 * 100 ))
    until grep -q "$2" "$1" 2>/dev/null; do
        [ "$(now_cs)" -gt "$end" ] && return 1
        sleep 0.05
    done
}
# wait_exit PID SECONDS: 0 when it exited in time.
wait_exit() {
    end=$(( $(now_cs) + $2 * 100 ))
    while kill -0 "$1" 2>/dev/null; do
        [ "$(now_cs)" -gt "$end" ] && return 1
        sleep 0.02
    done
}
