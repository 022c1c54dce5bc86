#!/bin/sh
# Tests scripts/sim-shell.sh and, inside its guest, scripts/sim-host.sh on a
# real gpio-sim kernel:
#   1. sim-shell.sh --config examples/sim-button.yaml -- sh -c '...': in the
#      guest boardd runs the config on the sim chips; once it is ready,
#      `boardctl click button` toggles the LED (`boardctl get led`, and
#      sim-host.sh status shows line 27 at 1); then sim-host.sh down, status,
#      up again (configfs unmounted first: up mounts it; SUDO_UID given: the
#      chips go to that user, and boardd and boardctl run as that user), up
#      twice (refused), down. Exit status 0.
#   2. a command that fails: its exit status (7) comes back.
#   3. a config for another board: refused before the guest boots (status 2).
#   4. on this host: sim-host.sh up without root says to use sudo.
# Prints PASS/FAIL lines, the time of each run, and "N passed, N failed".
# usage: scripts/sim-shell-test.sh [--kvm]
set -u
cd "$(dirname "$0")/.."
pass=0
fail=0
ok() { echo "PASS sim-shell $1"; pass=$((pass + 1)); }
bad() { echo "FAIL sim-shell $1"; fail=$((fail + 1)); }
out=$(mktemp /tmp/boardloop-sim-shell-test.XXXXXX)
trap 'rm -f "$out"' EXIT

# The guest's part: every check prints PASS or FAIL, and the command exits
# with the number of failures.
guest='
pass=0 fail=0
ok() { echo "PASS guest $1"; pass=$((pass + 1)); }
bad() { echo "FAIL guest $1"; fail=$((fail + 1)); }
now_cs() { read -r up _ < /proc/uptime; echo "${up%.*}${up#*.}" | sed "s/^0*//;s/^\$/0/"; }
# wait_for SECONDS COMMAND...: runs COMMAND every 100 ms until it succeeds.
wait_for() { end=$(( $(now_cs) + $1 * 100 )); shift
    until "$@" >/dev/null 2>&1; do [ "$(now_cs)" -gt "$end" ] && return 1; sleep 0.1; done; }
led_is() { [ "$(boardctl get led)" = "led: $1" ]; }
ready() { grep -q "ready: every loop is running" /tmp/boardd.log; }

t0=$(now_cs)
boardd --config /config/boardd.yaml --board gpio-sim 2> /tmp/boardd.log &
pid=$!
if wait_for 180 ready; then ok "boardd is ready on the sim chips in $(( ($(now_cs) - t0) * 10 )) ms"
else bad "boardd not ready within 180 s"; tail -n 20 /tmp/boardd.log; kill -9 $pid; exit 99; fi
led_is off && ok "boardctl get led: off at the start" || bad "at the start: $(boardctl get led 2>&1)"
boardctl click button
wait_for 10 led_is on && ok "boardctl click button turns the LED on" || bad "after a click: $(boardctl get led 2>&1)"
st=$(scripts/sim-host.sh status); rc=$?
echo "$st" | grep -q "^boardloop-sim0: /dev/gpiochip[0-9]*, 32 lines" && [ $rc = 0 ] \
    && ok "sim-host.sh status: $(echo "$st" | grep "^boardloop-sim" | tr "\n" ";")" || bad "status ($rc): $st"
echo "$st" | grep -Eq "^ +27 LED +1 " && ok "status shows the LED (line 27) at 1" || bad "status LED line: $(echo "$st" | grep " 27 ")"
echo "$st" | grep -Eq "^ +17 BUTTON +1 +pull-up" && ok "status shows the button (line 17) released, pull-up" || bad "status button line: $(echo "$st" | grep " 17 ")"
boardctl click button
wait_for 10 led_is off && ok "a second click turns it off" || bad "after a second click: $(boardctl get led 2>&1)"
kill -TERM $pid; wait $pid; rc=$?
[ $rc = 0 ] && ok "boardd stops on SIGTERM, status 0" || bad "boardd exit status $rc"

scripts/sim-host.sh down > /tmp/down 2>&1 && grep -q "boardloop-sim0: removed" /tmp/down \
    && ok "sim-host.sh down removes the chips" || bad "down: $(cat /tmp/down)"
st=$(scripts/sim-host.sh status 2>&1); rc=$?
[ $rc = 1 ] && echo "$st" | grep -q "none of the chips" && ok "status after down: exit 1, $(echo "$st" | tail -n 1)" || bad "status after down ($rc): $st"
umount /sys/kernel/config
SUDO_UID=1000 SUDO_GID=1000 scripts/sim-host.sh up > /tmp/up 2>&1; rc=$?
[ $rc = 0 ] && grep -q "mounted configfs" /tmp/up && ok "sim-host.sh up mounts configfs and makes the chips" || { bad "up ($rc)"; cat /tmp/up; }
grep -q "boardd --config /config/boardd.yaml --board gpio-sim" /tmp/up && grep -q "boardctl click button" /tmp/up \
    && ok "up says what to run and how to drive inputs" || { bad "up printed"; cat /tmp/up; }
. /run/boardloop-sim/boardloop-sim0.env
[ "$(stat -c %u "$DEV")" = 1000 ] && [ "$(stat -c %u "$SYSFS/sim_gpio17/pull")" = 1000 ] \
    && ok "with SUDO_UID, $DEV and the pull attributes belong to that user" || bad "owners: $(ls -ln "$DEV" "$SYSFS/sim_gpio17/pull")"
# As that user: boardd on the chips, boardctl driving them.
u() { /usr/bin/setpriv --reuid=1000 --regid=1000 --clear-groups "$@"; }
u_led_is() { [ "$(u boardctl get led)" = "led: $1" ]; }
rm -f /tmp/boardd.log
u boardd --config /config/boardd.yaml --board gpio-sim 2> /tmp/boardd.log &
pid=$!
if wait_for 180 ready; then ok "boardd runs as uid 1000 on the chips up gave that user"
else bad "boardd as uid 1000 not ready within 180 s"; tail -n 20 /tmp/boardd.log; fi
u boardctl click button > /dev/null
wait_for 10 u_led_is on && ok "boardctl click button as uid 1000 turns the LED on" || bad "as uid 1000, after a click: $(u boardctl get led 2>&1)"
kill -TERM $pid; wait $pid
scripts/sim-host.sh up > /tmp/up2 2>&1; rc=$?
[ $rc = 1 ] && grep -q "exists already" /tmp/up2 && ok "up twice: refused, $(cat /tmp/up2)" || bad "up twice ($rc): $(cat /tmp/up2)"
scripts/sim-host.sh status > /dev/null && ok "status: every chip up (exit 0)" || bad "status after up: exit $?"
scripts/sim-host.sh down > /dev/null && [ ! -e /sys/kernel/config/gpio-sim/boardloop-sim0 ] && ok "down again" || bad "down again"
echo "guest: $pass passed, $fail failed"
exit $fail
'

run() { # NAME WANT_STATUS ARGS...: runs sim-shell.sh, checks its status, times it
    name=$1; want=$2; shift 2
    start=$(date +%s)
    scripts/sim-shell.sh "$@" > "$out" 2>&1; rc=$?
    secs=$(( $(date +%s) - start ))
    sed 's/^/  | /' "$out"
    if [ "$rc" = "$want" ]; then ok "$name: exit status $rc (${secs} s)"; else bad "$name: exit status $rc, wanted $want (${secs} s)"; fi
}

run "boardd, boardctl and sim-host.sh in the guest" 0 "$@" --config examples/sim-button.yaml --timeout 600 -- sh -c "$guest"
grep -q "^PASS guest boardctl click button turns the LED on" "$out" && grep -q "^guest: [0-9]* passed, 0 failed" "$out" \
    && ok "the guest's checks passed ($(grep "^guest: " "$out"))" || bad "the guest's checks: $(grep "^guest: " "$out")"
run "a failing command's status comes back" 7 "$@" --timeout 300 -- sh -c 'echo "it'\''s failing"; exit 7'
grep -qx "it's failing" "$out" && ok "its output is shown, quotes kept" || bad "its output: $(cat "$out")"
run "a config for another board is refused before booting" 2 --config examples/doorbell.yaml -- true
grep -q "does not run on the gpio-sim board" "$out" && ok "and says why" || bad "the refusal: $(cat "$out")"
# sim-host.sh on this host, where it needs no gpio-sim: a user who is not root is told to use sudo.
if [ "$(id -u)" = 0 ]; then as_nobody="setpriv --reuid=nobody --regid=nogroup --clear-groups"; else as_nobody=""; fi
$as_nobody scripts/sim-host.sh up > "$out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "run it with sudo: sudo scripts/sim-host.sh up" "$out" && ok "host: sim-host.sh up without root says to use sudo" \
    || bad "host: up without root ($rc): $(cat "$out")"
scripts/sim-host.sh status --chips /nonexistent > "$out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "cannot read the chips file /nonexistent" "$out" && ok "host: a missing chips file is named" || bad "host: --chips ($rc): $(cat "$out")"
echo "sim-shell-test: $pass passed, $fail failed"
[ $fail = 0 ]
