#!/bin/sh
# Builds boardd and boardctl in release mode into SCRATCH and prints the
# directory that holds them. WITH, when given, runs in front of swift
# (scripts/with-libgpiod2.sh: against libgpiod 2.x). With GUEST_STATIC=1,
# the Swift runtime is linked in (--static-swift-stdlib), as the .deb and
# scripts/install.sh build them. Used by scripts/sim-test.sh and
# scripts/sim-shell.sh; run from the package root.
# usage: [GUEST_STATIC=1] build-boardd.sh SCRATCH [WITH]
set -eu
scratch=$1; with=${2:-}
static=""
[ "${GUEST_STATIC:-0}" = 1 ] && static=--static-swift-stdlib
$with swift build -c release $static --product boardd --scratch-path "$scratch" >/dev/null
$with swift build -c release $static --product boardctl --scratch-path "$scratch" >/dev/null
$with swift build -c release $static --scratch-path "$scratch" --show-bin-path
