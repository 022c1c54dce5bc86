# Shared by the guest's reaction scenarios (sourced from /tests/reaction-lib.sh):
# the gpio-sim chip's map, the button and the LED, and how the edges are made.
. /run/boardloop-sim/boardloop-sim0.env
BUTTON=17 LED=27
pull() { echo "pull-$2" > "$SYSFS/sim_gpio$1/pull"; }
now_cs() { read -r up _ < /proc/uptime; echo "${up%.*}${up#*.}" | sed 's/^0*//;s/^$/0/'; }
# wait_for FILE TEXT SECONDS
wait_for() {
    end=$(( $(now_cs) + $3 * 100 ))
    until grep -q "$2" "$1" 2>/dev/null; do
        [ "$(now_cs)" -gt "$end" ] && return 1
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
