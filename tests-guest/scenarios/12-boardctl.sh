#!/bin/sh
# boardctl (at /usr/bin/boardctl) drives boardd on the gpio-sim board as a
# person would: press, release, click and flood write the button's sysfs
# `pull` (boardd finds the attribute from the line's chip and offset), the
# reaction toggles the LED, read back through `value`. Every wait polls with
# an overall deadline.
command -v boardd >/dev/null 2>&1 || { echo "SKIP boardctl: no boardd in this initramfs"; exit 0; }
command -v boardctl >/dev/null 2>&1 || { echo "SKIP boardctl: not in this initramfs"; exit 0; }
. /tests/lib.sh
ok() { echo "PASS boardctl $1"; }
bad() { echo "FAIL boardctl $1"; }
pullof() { cat "$SYSFS/sim_gpio$1/pull"; }
log=/tmp/boardd-ctl.log
wait_log() { wait_for $log "$1" "$2"; }
sock=/tmp/boardd-ctl.sock
ctl() { boardctl --socket $sock "$@"; }
# The button's events as boardd counts them.
events() { ctl lines --json | grep -o '"name":"button"[^}]*"events":[0-9]*' | sed 's/.*"events"://'; }
BUTTON=17 LED=27
cfg=/tmp/boardd-ctl.yaml
cat > $cfg <<'YAML'
board: gpio-sim
lines:
  button: { pin: BUTTON, input: { edge: both, bias: pull-up, active_low: true } }
  led:    { pin: LED, output: { initial: off, safe: off } }
reactions:
  - name: press toggles the led
    on: { line: button, press: true }
    do: [ toggle: led ]
YAML
echo pull-up > "$SYSFS/sim_gpio$BUTTON/pull"
boardd --config $cfg --socket $sock 2> $log &
pid=$!
show_log() { echo "--- boardd log (last 30 lines)"; tail -n 30 $log; echo "---"; }
if ! wait_log 'ready: every loop is running' 120; then
    bad "boardd did not report ready within 120 s"; show_log; kill -9 $pid 2>/dev/null; exit 1
fi

out=$(ctl press button 2>&1) && [ "$out" = "button: pressed" ] && ok "press: exit 0, '$out'" || bad "press: '$out'"
[ "$(pullof $BUTTON)" = pull-down ] && ok "press wrote pull-down (active low)" || bad "press left pull '$(pullof $BUTTON)'"
wait_value $LED 1 10 && ok "the press toggled the LED on" || bad "LED $(value $LED) after the press"
ctl release button >/dev/null && [ "$(pullof $BUTTON)" = pull-up ] && ok "release wrote pull-up" || bad "release: pull '$(pullof $BUTTON)'"
ctl click button >/dev/null || bad "click: exit $?"
wait_value $LED 0 10 && ok "a click toggled the LED off" || bad "LED $(value $LED) after the click"
ctl click button --count 3 --hold 150ms >/dev/null || bad "click --count 3: exit $?"
wait_value $LED 1 10 && ok "three clicks toggled it on" || bad "LED $(value $LED) after three clicks"
end=$(( $(now_cs) + 1000 ))
until [ "$(events)" = 10 ] || [ "$(now_cs)" -gt "$end" ]; do sleep 0.05; done
[ "$(events)" = 10 ] && ok "boardd counted the 10 edges the drives made" || bad "button events $(events), wanted 10"
[ "$(pullof $BUTTON)" = pull-up ] && ok "the clicks ended released" || bad "pull '$(pullof $BUTTON)' after the clicks"

json=$(ctl flood button --edges 6 --rate 20Hz --json 2>&1)
echo "$json" | grep -q '"timestamps":"kernel"' && echo "$json" | grep -q '"duration_ns":250000000' \
    && ok "flood: the reply at once ($json)" || bad "flood: '$json'"
wait_log 'control: flood button done (6 edges)' 20 && ok "the flood ran its 6 edges" || { bad "the flood did not finish"; show_log; }
wait_value $LED 0 10 && ok "the flood's 3 presses toggled the LED off" || bad "LED $(value $LED) after the flood"
end=$(( $(now_cs) + 1000 ))
until [ "$(events)" = 16 ] || [ "$(now_cs)" -gt "$end" ]; do sleep 0.05; done
[ "$(events)" = 16 ] && ok "and boardd counted its 6 edges" || bad "button events $(events), wanted 16"

# A fast flood (a figure): 2000 edges at 10 kHz, paced a batch at a time
# (under emulation each pull write takes a few hundred microseconds, so it
# runs behind). With libgpiod 2.x every edge is an event or counted lost
# (sequence numbers); 1.6's FIFO drops newer events uncounted. Either way
# at least 95% arrive.
lost() { ctl lines --json | grep -o '"name":"button"[^}]*"lost":[0-9]*' | sed 's/.*"lost"://'; }
backend=$(ctl status --json | grep -o '"backend":"[^"]*"')
t0=$(now_cs)
ctl flood button --edges 2000 --rate 10kHz >/dev/null || bad "flood of 2000: exit $?"
if wait_log 'control: flood button done (2000 edges)' 60; then
    t1=$(now_cs)
    end=$(( $(now_cs) + 500 ))
    until [ $(( $(events) + $(lost) )) -ge 2016 ] || [ "$(now_cs)" -gt "$end" ]; do sleep 0.05; done
    e=$(( $(events) - 16 )); l=$(lost)
    figure="about $(( (t1 - t0) * 10 )) ms (0.2 s due): $e events, $l counted lost ($backend)"
    case $backend in
    *'libgpiod 2'*) [ $((e + l)) = 2000 ] && [ $e -ge 1900 ] && ok "a 2000-edge flood at 10kHz: every edge accounted for, $figure" \
        || bad "2000-edge flood: $figure; wanted 2000 in all, at least 1900 events" ;;
    *) [ $((e + l)) -le 2000 ] && [ $e -ge 1900 ] && ok "a 2000-edge flood at 10kHz: $figure" \
        || bad "2000-edge flood: $figure; wanted at least 1900 events, at most 2000 in all" ;;
    esac
else
    bad "the 2000-edge flood did not finish within 60 s"; show_log
fi

out=$(ctl press led 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "is an output" && ok "press on an output: exit 1 ($out)" || bad "press led: exit $rc, '$out'"
grep -q "control: press button (uid 0 gid 0 pid" $log && ok "the drives are logged with the peer" || { bad "no 'control: press button' in the log"; show_log; }

kill -TERM $pid
end=$(( $(now_cs) + 3000 ))
while kill -0 $pid 2>/dev/null && [ "$(now_cs)" -lt "$end" ]; do sleep 0.05; done
kill -0 $pid 2>/dev/null && { bad "boardd did not exit within 30 s of SIGTERM"; kill -9 $pid; }
echo pull-up > "$SYSFS/sim_gpio$BUTTON/pull"
exit 0
