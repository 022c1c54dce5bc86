#!/bin/sh
# Builds boardd and boardctl in release mode into SCRATCH and prints the
# directory that holds them. WITH, when given, runs in front of swift
# (scripts/with-libgpiod2.sh: against libgpiod 2.x). Used by
# scripts/sim-test.sh and scripts/sim-shell.sh; run from the package root.
# usage: build-boardd.sh SCRATCH [WITH]
set -eu
scratch=$1; with=${2:-}
$with swift build -c release --product boardd --scratch-path "$scratch" >/dev/null
$with swift build -c release --product boardctl --scratch-path "$scratch" >/dev/null
$with swift build -c release --scratch-path "$scratch" --show-bin-path
