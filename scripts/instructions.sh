#!/usr/bin/env bash
# Instructions per event, counted by callgrind: the same binary and input
# give the same count whatever else the machine is doing, so these figures
# are reproducible where wall-clock ones swing with the hypervisor.
#
#   scripts/instructions.sh [--top] [--only fd,wake-item,...]   (--top: each scenario's costliest functions)
#       the table: boardloop beside the raw kernel mechanism and libuv doing
#       the same fixed work (Benchmarks/Sources/instr-driver, CInstrRef), and
#       boardd's reaction path beside the same reaction written by hand
#       (instr-daemon), and a deadline-heavy config (50 inputs with filters
#       and gesture groups) beside the same with one input
#   scripts/instructions.sh --gate
#       fails if a scenario's count exceeds its budget in
#       Benchmarks/instruction-budgets.txt by more than 3%, and checks a
#       control (closure-literal posts measured against the work-item
#       budget must exceed it, or the gate could not see a regression).
#       Only single-thread scenarios are gated: their counts are exact.
#
# Method: each scenario runs twice under `valgrind --tool=callgrind`, with
# N and 2N events; (count(2N) - count(N)) / N is the cost of one event with
# start-up and tear-down cancelled out. All threads are counted (a wake
# round trip is both sides' work). Release build. valgrind runs one thread
# at a time, so a spin-wait across threads inflates a count: libuv's
# cross-thread wake-up spins in uv_async_send's handshake, and is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
mode=table top=0 only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --gate) mode=gate ;;
        --top) top=1 ;;
        --only) only="$2"; shift ;;
        -h|--help) sed -n "2,24p" "$0"; exit 0 ;;
        *) echo "instructions.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
scripts/install-deps.sh libuv1-dev valgrind >&2
(cd Benchmarks && swift build -c release --product instr-driver >&2 && swift build -c release --product instr-daemon >&2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# valgrind 3.19 cannot read the debug information the Swift toolchain
# writes; copies without it keep the symbol names callgrind reports. The
# daemon's scenario has a driver of its own (instr-driver does not link
# the daemon and libyaml).
for d in instr-driver instr-daemon; do
    cp "$(cd Benchmarks && swift build -c release --show-bin-path)/$d" "$work/$d"
    strip --strip-debug "$work/$d"
done
driver() { case "$1" in reaction|deadlines|post|start) echo "$work/instr-daemon" ;; *) echo "$work/instr-driver" ;; esac; }

# Events per scenario (the shorter run; the longer one has twice as many).
events() {
    # boardd at info: both runs within the loop's trace ring (2048
    # records), so every record is stored, none dropped.
    [ "${2:-}" = boardd-info ] && { echo 1000; return; }
    case "$1" in
        start) echo 2 ;;
        wake-item|wake-closure|message|timer|deadlines|post) echo 1000 ;;
        *) echo 2000 ;;
    esac
}

# total instructions of one run: scenario impl events
count() {
    local out="$work/cg.$1.$2.$3"
    # Deterministic hashing: Swift seeds its hashes per process, and the
    # daemon's scenario (config loading, dictionaries) would vary with it.
    # boardd at info: only the edges' own work on the loop's thread (inside
    # callgrindWindowEdges); the log writer formats and writes the trace lines
    # on its own thread, off the reaction, and the stop drains what is left.
    local collect=()
    if [ "$2" = boardd-info ]; then collect=(--collect-atstart=no --toggle-collect='*callgrindWindowEdges*'); fi
    if ! SWIFT_DETERMINISTIC_HASHING=1 valgrind --tool=callgrind "${collect[@]}" --callgrind-out-file="$out" "$(driver "$1")" "$1" "$2" "$3" >"$work/log" 2>&1; then
        echo "instructions.sh: $(basename "$(driver "$1")") $1 $2 $3 failed:" >&2
        tail -5 "$work/log" >&2
        return 1
    fi
    awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

# instructions per event: scenario impl
once() {
    local n a b
    n=$(events "$1" "$2")
    a=$(count "$1" "$2" "$n")
    b=$(count "$1" "$2" $((2 * n)))
    echo $(( (b - a) / n ))
}

# Single-threaded scenarios give the same count every run. Where two threads
# hand work to each other, the count depends on whether the receiver was
# asleep (a wake-up written and read) or still awake, which valgrind's
# thread switching varies by a few percent: the median of three runs.
per_event() {
    case "$1" in
        wake-item|wake-closure|message)
            { once "$1" "$2"; once "$1" "$2"; once "$1" "$2"; } | sort -n | sed -n 2p ;;
        *) once "$1" "$2" ;;
    esac
}

top_functions() {
    local n out demangle=cat
    n=$(events "$1")
    out="$work/cg.$1.$2.$((2 * n))"
    command -v swift >/dev/null && demangle="swift demangle --simplified"
    echo "    top functions by own cost ($1, $2, $((2 * n)) events; the dynamic loader's start-up left out):"
    callgrind_annotate "$out" 2>/dev/null \
        | awk '/^-+$/ { sep++; next } sep >= 3 && NF > 1 && !/ld-linux|\/elf\/|PROGRAM TOTALS|file:function/ { print }' \
        | head -12 | $demangle | cut -c1-140 | sed 's/^/      /' || true
    # (|| true: head stops reading after 12 lines, and the SIGPIPE that
    # ends the writers would otherwise fail the pipeline and, under
    # set -e and pipefail, end the table after its first scenario.)
}

wanted() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

if [ "$mode" = table ]; then
    printf '%-14s %12s %10s %10s %10s %10s\n' scenario boardloop raw libuv "vs raw" "vs libuv"
    for s in fd perform-item perform-closure wake-item wake-closure timer message message-burst message-self gpio reaction deadlines post start; do
        wanted "$s" || continue
        impl=boardloop
        case "$s" in reaction|deadlines|post|start) impl=boardd ;; esac
        bl=$(per_event "$s" "$impl")
        raw="—" uv="—" rr="" ru=""
        case "$s" in
            fd) raw=$(per_event "$s" raw); uv=$(per_event "$s" uv) ;;
            perform-item) uv=$(per_event "$s" uv) ;;
            message-self) uv=$(per_event perform-item uv) ;;
            wake-item|message-burst) raw=$(per_event "$s" raw) ;;
            reaction) raw=$(per_event reaction engine) ;;
            deadlines) raw=$(per_event deadlines boardd-1) ;;
            start) raw=$(per_event start boardd-detect) ;;
            post) raw=$(per_event post boardd-local); uv=$(per_event perform-item uv) ;;
            timer) r1=$(per_event timer raw); r2=$(per_event timer raw-periodic)
                   raw=$(( r1 < r2 ? r1 : r2 )) ;;  # the better of the two raw mechanisms
        esac
        [ "$raw" != "—" ] && rr=$(awk -v a="$bl" -v b="$raw" 'BEGIN { printf "%.2f×", a / b }')
        [ "$uv" != "—" ] && ru=$(awk -v a="$bl" -v b="$uv" 'BEGIN { printf "%.2f×", a / b }')
        printf '%-14s %12s %10s %10s %10s %10s\n' "$s" "$bl" "$raw" "$uv" "$rr" "$ru"
        [ "$s" = timer ] && echo "    (timer raw: the better of a one-shot timerfd re-armed like the engine, $r1, and a periodic one, $r2)"
        case "$s" in wake-item|wake-closure|message)
            echo "    (two threads: the median of three runs; varies by a few percent with valgrind's thread switching, so not gated)" ;; esac
        [ "$s" = message-burst ] && echo "    (one thread: bursts of 16 sends through a stored reference to the port, then one pass of the loop receives them; per message, send and receive; raw: CBenchRaw's mutex ring, eventfd and epoll)"
        [ "$s" = message-self ] && echo "    (one thread, the loop running: a message re-sent from its handler to its own port, one a pass, each with its wake-up write — the mechanism of the daemon's posts in the shape of libuv's uv_async_send re-sent from its callback, the libuv column)"
        [ "$s" = perform-item ] && echo "    (libuv: uv_async_send from the loop's own thread, through its eventfd; callgrind counts user space only, so neither side's system calls count)"
        [ "$s" = wake-item ] && echo "    (libuv: not comparable here — uv_async_send's handshake spin-waits up to 997 iterations while valgrind runs one thread at a time, which a real CPU never does)"
        [ "$s" = reaction ] && echo "    (boardd's config path: an edge toggles an output; raw column: the same reaction written by hand with the engine and the GPIO layer)"
        [ "$s" = post ] && echo "    (boardd, every loop on one thread: an edge's action posted to the worker that owns the output, $((bl - raw)) more than the same reaction on the main loop (raw column) — the post: the send, the worker's pass that receives it, the message's decoding; libuv column: uv_async_send's own-thread round trip, the nearest single-thread counterpart)"
        [ "$s" = start ] && echo "    (a start of examples/doorbell.yaml on mock chips: loaded, checked, planned, its daemon made and stopped; raw column: the same with board detection over every board file, which a start ran before it was asked only when a command's program is missing)"
        [ "$s" = deadlines ] && echo "    (boardd, manual clock: one click — press, delayed_on passes, release, delayed_off passes, the click fires — on the next of 50 inputs with filters and a gesture group; raw column: the same config with one input)"
        if [ "$s" = reaction ]; then
            b2=$(per_event reaction boardd-2) e2=$(per_event reaction engine-2)
            printf '%-14s %12s %10s %10s %10s\n' "+1 reaction" "$((b2 - bl))" "$((e2 - raw))" "" "$(awk -v a="$((b2 - bl))" -v b="$((e2 - raw))" 'BEGIN { printf "%.2f×", a / b }')"
            echo "    (what a second reaction on the same edge adds, toggling a second output: boardd's config path against one more write in the hand-written handler)"
            printf '%-14s %12s\n' "reaction@info" "$(per_event reaction boardd-info)"
            echo "    (the same at boardd's default log level, info: each reaction traced as a record in the loop's trace ring; the loop's thread alone, inside the edge loop: the log writer formats and writes the lines on its own thread; gated against the quiet budget)"
            fl=$(per_event reaction boardd-flood) fn=$(per_event reaction boardd-flood-notice) fd=$(per_event reaction boardd-flood-described)
            printf '%-14s %12s %10s %10s %10s\n' "reaction@flood" "$fl" "$fn" "$fd" "$(awk -v a="$fl" -v b="$fn" 'BEGIN { printf "%.2f×", a / b }')"
            echo "    (at info in a flood the rate limit throttles (200 lines, then every record suppressed), every thread's part counted: the loop's record and the writer's deciding; raw column: the same at notice, nothing traced; libuv column: each record described and formatted before the limit drops it, as before the level and the limit were asked first)"
            printf '%-14s %12s\n' "reaction@thread" "$(per_event reaction boardd-thread)"
            echo "    (the same on a thread of its own, whose loop the thread remembers weakly, as a worker's: a retain of the loop there takes the runtime's slow path, so this row shows any the reaction path makes)"
        fi
        [ "$top" = 1 ] && top_functions "$s" "$impl"
    done
    exit 0
fi

# --gate
budgets=Benchmarks/instruction-budgets.txt
fail=0
while read -r scenario impl budget _; do
    case "$scenario" in ''|'#'*) continue ;; esac
    wanted "$scenario" || continue
    got=$(per_event "$scenario" "$impl")
    [ "$scenario" = reaction ] && eval "reaction_${impl//-/_}=$got"
    limit=$(( budget * 103 / 100 ))
    if [ "$got" -le "$limit" ]; then
        echo "ok    $scenario $impl: $got instructions per event (budget $budget, +3% = $limit)"
    else
        echo "FAIL  $scenario $impl: $got instructions per event, over the budget $budget (+3% = $limit)"
        fail=1
    fi
done < "$budgets"
# The reaction's ratio to the same reaction written by hand, at boardd's
# default log level (the goal: within 1.15×), reported from this run's
# counts; the budgets above are what fails.
if [ -n "${reaction_boardd_info:-}" ] && [ -n "${reaction_engine:-}" ]; then
    echo "info  reaction at info / by hand: $reaction_boardd_info / $reaction_engine = $(awk -v a="$reaction_boardd_info" -v b="$reaction_engine" 'BEGIN { printf "%.3f×", a / b }') (goal 1.15×)"
fi
# At info in a flood, every thread counted, against the same at notice
# (the goal: within 1.3×).
if [ -n "${reaction_boardd_flood:-}" ]; then
    notice=$(per_event reaction boardd-flood-notice)
    echo "info  reaction at info in a flood / at notice: $reaction_boardd_flood / $notice = $(awk -v a="$reaction_boardd_flood" -v b="$notice" 'BEGIN { printf "%.3f×", a / b }') (goal 1.3×)"
fi
# The control: a known-costlier path measured against the cheaper path's
# budget must fail it, or the gate could not tell a regression.
item_budget=$(awk '$1 == "perform-item" && $2 == "boardloop" { print $3 }' "$budgets")
closure=$(per_event perform-closure boardloop)
if [ "$closure" -gt $(( item_budget * 103 / 100 )) ]; then
    echo "ok    control: closure-literal posts cost $closure per event, over the work-item budget $item_budget: the gate sees a costlier path"
else
    echo "FAIL  control: closure-literal posts cost $closure, within the work-item budget $item_budget: the gate would not see a regression"
    fail=1
fi
[ "$fail" = 0 ] && echo "instruction gate: passed" || { echo "instruction gate: FAILED"; exit 1; }
