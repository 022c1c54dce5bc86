#!/usr/bin/env bash
# The instruction gate: fails if a scenario costs more instructions per event
# than its budget in Benchmarks/instruction-budgets.txt allows (3% slack), and
# checks that a known-costlier path would fail it. See scripts/instructions.sh.
exec "$(dirname "$0")/instructions.sh" --gate "$@"
