# Shared by the guest's reaction scenarios (sourced from /tests/reaction-lib.sh):
# the button and the LED, how the edges are made, and the reaction's config
# (the chip's map, the clock and the waits are /tests/lib.sh's).
. /tests/lib.sh
BUTTON=17 LED=27
# traced PID: 0 when strace traces every thread of PID (under emulation
# attaching takes a while: edges before it would be missed).
traced() {
    for s in /proc/$1/task/*/status; do
        grep -q '^TracerPid:[[:space:]]*0$' "$s" && return 1
    done
    return 0
}
# trace_calls PID CALLS FILE: strace on every thread of PID, those system
# calls only, into FILE, in the background ($spid); 0 once every thread is
# traced, 1 (strace stopped) when that took over 30 s.
trace_calls() {
    strace -f -qq -e trace="$2" -p "$1" -o "$3" &
    spid=$!
    i=0
    until traced "$1"; do
        i=$((i + 1))
        [ $i -gt 600 ] && { kill $spid; return 1; }
        sleep 0.05
    done
}
# drive COUNT: COUNT edges on the button, 20 ms apart, from released (pull-up) and back.
drive() {
    i=0
    while [ $i -lt "$1" ]; do
        if [ $((i % 2)) = 0 ]; then pull $BUTTON down; else pull $BUTTON up; fi
        sleep 0.02
        i=$((i + 1))
    done
}
# reaction_config FILE: the reaction both sides run (an edge on the button,
# either way, toggles the LED), for boardd.
reaction_config() {
    cat > "$1" <<'YAML'
board: gpio-sim
lines:
  button: { pin: BUTTON, input: { edge: both, bias: pull-up, active_low: true } }
  led:    { pin: LED, output: { initial: off } }
reactions:
  - name: toggle
    on: { line: button, edge: both }
    do: [ toggle: led ]
YAML
}
