#!/usr/bin/env bash
# The side-by-side benchmark table: boardloop against raw
# epoll/eventfd/timerfd and Foundation's RunLoop, measured in the same run.
#
#   scripts/bench.sh                 full run (5 repeats, about 4 minutes)
#   scripts/bench.sh --quick         smoke run (seconds; figures not meaningful)
#   scripts/bench.sh --only wake,fd  some scenarios; --help for the rest
#   scripts/bench.sh --ops           package-benchmark's per-operation figures
#   scripts/bench.sh --instructions  instructions per event under callgrind (scripts/instructions.sh)
#
# Release build of Benchmarks/ (its own package: the library's users never
# build package-benchmark). Run as root for the PM QoS hold (see BENCHMARKS.md).
set -euo pipefail
scripts="$(cd "$(dirname "$0")" && pwd)"
cd "$scripts/../Benchmarks"
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"

if [ "${1:-}" = "--instructions" ]; then
    shift
    exec "$scripts/instructions.sh" "$@"
fi
if [ "${1:-}" = "--ops" ]; then
    shift
    exec swift package --disable-sandbox benchmark "$@"
fi

swift build -c release --product boardloop-bench >&2
exec "$(swift build -c release --show-bin-path)/boardloop-bench" "$@"
