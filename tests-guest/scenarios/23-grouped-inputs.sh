#!/bin/sh
# Inputs of one loop, chip and priority share one line request on the real
# kernel: a flood spread over eight inputs is read as a flood on one line
# is. boardd runs eight inputs and a marker on the sim chip; strace (reads
# only) is attached once it is ready. boardd is stopped (SIGSTOP), 16 edges
# are driven — two on each of the eight lines, then in a second round all
# 16 on one line — and a marker edge after them; it is continued
# (SIGCONT), and the marker's reaction says every edge before it was
# handled. The reads on the inputs' event fds in each round are the figure.
# With libgpiod 2.x the nine inputs are one request (one `gpio-line` fd,
# and one for the outputs): the spread round must take no more reads than
# the one-line round. libgpiod
# 1.6 gives each input line an event fd of its own (the v1 kernel
# interface): its reads are reported, not gated. Every edge must fire its
# reaction, on both.
command -v boardd >/dev/null 2>&1 || { echo "SKIP grouped-inputs: boardd not in this initramfs"; exit 0; }
command -v strace >/dev/null 2>&1 || { echo "SKIP grouped-inputs: strace not in this initramfs"; exit 0; }
. /tests/reaction-lib.sh
INS="0 1 2 3 4 5 6 7"
MARK=8 DONE=9
ok() { echo "PASS grouped-inputs $1"; }
bad() { echo "FAIL grouped-inputs $1"; }
for o in $INS $MARK; do pull "$o" up; done
sleep 0.2
{
    echo "board: gpio-sim"
    echo "lines:"
    for o in $INS; do echo "  i$o: { pin: SIM0_$o, input: { edge: both, debounce: 0ms } }"; done
    echo "  mark: { pin: SIM0_$MARK, input: { edge: both, debounce: 0ms } }"
    echo "  led: { pin: LED, output: { initial: off } }"
    echo "  done: { pin: SIM0_$DONE, output: { initial: off } }"
    echo "reactions:"
    for o in $INS; do echo "  - { name: r$o, on: { line: i$o, edge: both }, do: [ toggle: led ] }"; done
    echo "  - { name: mark, on: { line: mark, edge: both }, do: [ toggle: done ] }"
} > /tmp/inputs.yaml
boardd --config /tmp/inputs.yaml 2> /tmp/inputs.log &
pid=$!
if ! wait_for /tmp/inputs.log 'ready: every loop is running' 120; then
    bad "boardd did not report ready within 120 s"; tail -n 20 /tmp/inputs.log; kill -9 $pid 2>/dev/null; exit 1
fi
# The event fds: libgpiod 2.x, the requests' `gpio-line` fds (the
# outputs' request reads no events); 1.6, a `gpio-event` fd per line.
fds=$(ls -l /proc/$pid/fd | awk '/anon_inode:gpio-(line|event)$/ { print $(NF-2) }' | tr '\n' ' ')
v2fds=$(ls -l /proc/$pid/fd | grep -c 'anon_inode:gpio-line$')
# The requests: the kernel's fdinfo names each request's lines (one
# request can be open through more than one fd).
for f in $fds; do echo "fd $f: $(grep '^gpio-line' /proc/$pid/fdinfo/$f | tr -s '\t\n' '  ')"; done > /tmp/inputs.fds
requests=$(sed 's/^fd [0-9]*: //' /tmp/inputs.fds | sort -u | grep -c .)
trace_calls $pid read /tmp/inputs.trace || { bad "strace did not attach to boardd within 30 s"; kill -9 $pid; exit 1; }
# stopped PID: 0 once every thread of PID is stopped.
stopped() {
    for s in /proc/$1/task/*/stat; do
        st=$(sed 's/.*) //' "$s" | cut -d' ' -f1)
        [ "$st" = T ] || [ "$st" = t ] || return 1
    done
}
# reads: the reads on the inputs' fds in the trace so far.
reads() {
    awk -v fds=" $fds" '{ l = $0; sub(/^[0-9]+ +/, "", l); if (l ~ /^read\(/) { split(substr(l, 6), a, ","); if (index(fds, " " a[1] " ")) n++ } } END { print n + 0 }' /tmp/inputs.trace
}
# round NAME EDGES... : stop boardd, drive the edges (OFFSET:up|down), mark,
# continue; 0 when the marker's reaction came. Prints the round's reads.
round() {
    name=$1; shift
    before=$(reads)
    kill -STOP $pid
    i=0
    until stopped $pid; do
        i=$((i + 1))
        [ $i -gt 600 ] && { bad "boardd did not stop within 30 s"; return 1; }
        sleep 0.05
    done
    for e in "$@"; do pull "${e%:*}" "${e#*:}"; done
    want=$(( 1 - $(value $DONE) ))
    if [ "$(value $MARK)" = 1 ]; then pull $MARK down; else pull $MARK up; fi
    kill -CONT $pid
    wait_value $DONE $want 30 || { bad "$name: the marker's reaction did not come within 30 s"; return 1; }
    echo $(( $(reads) - before ))
}
spread=""
for o in $INS; do spread="$spread $o:down"; done
for o in $INS; do spread="$spread $o:up"; done
one=""
k=0
while [ $k -lt 8 ]; do one="$one 0:down 0:up"; k=$((k + 1)); done
# shellcheck disable=SC2086
r_spread=$(round spread $spread) || { echo "$r_spread"; kill $spid; kill -9 $pid; exit 1; }
# shellcheck disable=SC2086
r_one=$(round one $one) || { echo "$r_one"; kill $spid; kill -9 $pid; exit 1; }
kill -INT $spid
wait $spid 2>/dev/null
kill -TERM $pid
if ! wait_exit $pid 30; then bad "boardd did not exit within 30 s of SIGTERM"; kill -9 $pid; exit 1; fi
edges=34
fires=$(grep -o 'reaction [a-z0-9]*: [0-9]* fires ([0-9]* in all)' /tmp/inputs.log |
    awk '{ gsub(/[(]/, "", $5); n += $5 } END { print n + 0 }')
if [ "$fires" != "$edges" ]; then
    bad "boardd reacted to $fires of $edges edges"; tail -n 20 /tmp/inputs.log; exit 1
fi
line="reads for 16 edges and a marker: over 8 lines $r_spread, on one line $r_one (event fds: $(echo $fds | wc -w), line requests: $requests)"
if [ "$v2fds" = 0 ]; then
    ok "$line (libgpiod 1.6: an event fd per line; reported, not gated)"
elif [ "$requests" != 2 ]; then
    bad "$line: the nine inputs and the two outputs should be two requests; $(tr '\n' ';' < /tmp/inputs.fds)"
elif [ "$r_spread" -ge 1 ] && [ "$r_spread" -le "$r_one" ]; then
    ok "$line"
else
    bad "$line"; grep -m 12 'read(' /tmp/inputs.trace | cut -c1-120
fi
