#!/bin/sh
# The kernel's GPIO character device and gpio-sim, driven by libgpiod's own
# tools: proves the guest before any boardloop program runs.
. /run/boardloop-sim/boardloop-sim0.env
ok() { echo "PASS gpiod-tools $1"; }
bad() { echo "FAIL gpiod-tools $1"; }

gpiodetect | grep -q '\[boardloop-sim0\] (32 lines)' && gpiodetect | grep -q '\[boardloop-sim1\] (8 lines)' \
    && ok "gpiodetect lists both chips by label" || bad "gpiodetect: $(gpiodetect | tr '\n' ';')"
f=$(gpiofind BUTTON)
[ "$f" = "${DEV#/dev/} 17" ] && ok "gpiofind BUTTON = $f" || bad "gpiofind BUTTON gave '$f'"

# Edges from pull changes: only once the line is requested (used).
echo pull-down > "$SYSFS/sim_gpio17/pull"
gpiomon boardloop-sim0 17 > /tmp/mon 2>&1 &
mon=$!
i=0
until gpioinfo boardloop-sim0 | grep 'line  17' | grep -q used; do
    i=$((i + 1)); [ $i -gt 200 ] && break; sleep 0.05
done
# Under emulation the v1 kernel samples the level in its interrupt thread,
# late, so a single quick toggle can be reported as two equal edges: toggle
# slowly, three times. (gpiomon's output is buffered until it exits.)
for round in 1 2 3; do
    sleep 0.3; echo pull-up > "$SYSFS/sim_gpio17/pull"
    sleep 0.3; echo pull-down > "$SYSFS/sim_gpio17/pull"
done
sleep 0.3
kill $mon 2>/dev/null
wait $mon 2>/dev/null
grep -q 'RISING EDGE offset: 17' /tmp/mon && grep -q 'FALLING EDGE offset: 17' /tmp/mon \
    && ok "gpiomon sees rising and falling edges from pull toggles" || bad "gpiomon: $(tr '\n' ';' < /tmp/mon)"

gpioset --mode=time --sec=2 boardloop-sim0 27=1 &
set=$!
i=0
until [ "$(cat "$SYSFS/sim_gpio27/value")" = 1 ] || [ $i -gt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ "$(cat "$SYSFS/sim_gpio27/value")" = 1 ] && ok "gpioset LED=1 shows in sim_gpio27/value" || bad "sim_gpio27/value stayed $(cat "$SYSFS/sim_gpio27/value")"
wait $set
