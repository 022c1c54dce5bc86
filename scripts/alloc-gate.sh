#!/usr/bin/env bash
# The allocation gate: runs the engine's steady-state scenarios
# with a malloc interposer counting on the loop threads; exits 1 if any
# allocates, or if the controls that must allocate count too little.
set -euo pipefail
cd "$(dirname "$0")/../Benchmarks"
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
swift build -c release --product alloc-gate >&2
exec "$(swift build -c release --show-bin-path)/alloc-gate" "$@"
