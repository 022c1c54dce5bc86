#!/bin/sh
# Outputs of one loop on one chip share one line request on the real
# kernel: a reaction that sets four outputs (`set: { a: on, b: on, c: on,
# d: on }`) makes one set-values ioctl, where a request per line made
# four. strace (ioctls only) is attached to boardd once it is ready, and
# the edges start only once every thread is traced; the button is pressed
# and released, the four lines read back through sysfs `value` each time,
# then driven N more edges; the set-values ioctls over the window, divided
# by the edges, are the figure (boardd's idle chip-presence check is a
# get-values ioctl, not counted). The scenario fails unless every edge was
# one set-values ioctl and every line followed.
command -v boardd >/dev/null 2>&1 || { echo "SKIP grouped-outputs: boardd not in this initramfs"; exit 0; }
command -v strace >/dev/null 2>&1 || { echo "SKIP grouped-outputs: strace not in this initramfs"; exit 0; }
. /tests/reaction-lib.sh
N=${GROUPED_EDGES:-40}
OUTS="20 21 22 23"
ok() { echo "PASS grouped-outputs $1"; }
bad() { echo "FAIL grouped-outputs $1"; }
# all VALUE SECONDS: 0 when every output reads VALUE in time.
all() {
    for o in $OUTS; do wait_value "$o" "$1" "$2" || { bad "line $o did not read $1 within $2 s"; return 1; }; done
}
pull $BUTTON up
sleep 0.2
cat > /tmp/grouped.yaml <<'YAML'
board: gpio-sim
lines:
  button: { pin: BUTTON, input: { edge: both, bias: pull-up, active_low: true } }
  a: { pin: SIM0_20, output: { initial: off } }
  b: { pin: SIM0_21, output: { initial: off } }
  c: { pin: SIM0_22, output: { initial: off } }
  d: { pin: SIM0_23, output: { initial: off } }
reactions:
  - name: on
    on: { line: button, press: true }
    do: [ set: { a: on, b: on, c: on, d: on } ]
  - name: off
    on: { line: button, release: true }
    do: [ set: { a: off, b: off, c: off, d: off } ]
YAML
boardd --config /tmp/grouped.yaml 2> /tmp/grouped.log &
pid=$!
if ! wait_for /tmp/grouped.log 'ready: every loop is running' 120; then
    bad "boardd did not report ready within 120 s"; tail -n 20 /tmp/grouped.log; kill -9 $pid 2>/dev/null; exit 1
fi
all 0 10 || { kill -9 $pid; exit 1; }
# strace on every thread (the ioctls only), attached before the first edge.
trace_calls $pid ioctl /tmp/grouped.trace || { bad "strace did not attach to boardd within 30 s"; kill -9 $pid; exit 1; }
pull $BUTTON down
all 1 10 || { tail -n 20 /tmp/grouped.log; kill $spid; kill -9 $pid; exit 1; }
pull $BUTTON up
all 0 10 || { tail -n 20 /tmp/grouped.log; kill $spid; kill -9 $pid; exit 1; }
drive "$N"
# N is even: the last edge releases the button.
all 0 10 || { kill $spid; kill -9 $pid; exit 1; }
kill -INT $spid
wait $spid 2>/dev/null
kill -TERM $pid
if ! wait_exit $pid 30; then bad "boardd did not exit within 30 s of SIGTERM"; kill -9 $pid; exit 1; fi
edges=$((N + 2))
# The stop's summary: "reaction on: K fires (M in all), ..." for each.
fires=$(grep -o 'reaction o[nf]*: [0-9]* fires ([0-9]* in all)' /tmp/grouped.log |
    awk '{ sub(/:$/, "", $2); gsub(/[(]/, "", $5); n[$2] = $5 } END { print n["on"] + n["off"] }')
if [ "$fires" != "$edges" ]; then
    bad "boardd reacted to $fires of $edges edges"; tail -n 20 /tmp/grouped.log; exit 1
fi
# GPIO_V2_LINE_SET_VALUES_IOCTL (libgpiod 2.x), GPIOHANDLE_SET_LINE_VALUES_IOCTL
# (1.6), named or, where strace does not name them, as numbers.
sets=$(grep -c 'GPIO_V2_LINE_SET_VALUES_IOCTL\|GPIOHANDLE_SET_LINE_VALUES_IOCTL\|0xb4, 0xf, 0x10)\|0xb4, 0x9, 0x40)' /tmp/grouped.trace)
per=$(awk -v s="$sets" -v e="$edges" 'BEGIN { printf "%.2f", s / e }')
line="set-values ioctls per edge, four outputs set: $per ($sets over $edges edges; a request per line: 4.00)"
if [ "$sets" = "$edges" ]; then ok "$line"; else bad "$line"; grep -m 8 'ioctl' /tmp/grouped.trace | cut -c1-160; fi
