#!/bin/sh
# Runs a command against libgpiod 2.x (built and cached by
# scripts/libgpiod2.sh) instead of the system's 1.6: PKG_CONFIG_PATH finds
# its libgpiod.pc, and `swift build|test|run` also get an rpath to its lib/
# (-Xlinker -rpath), so the programs load libgpiod.so.3 from there. E.g.
#   scripts/with-libgpiod2.sh swift test --scratch-path .build-gpiod2 --filter BoardloopGPIOTests
# Use a scratch path of its own: a .build made against 1.6 must not be reused.
set -eu
prefix=$("$(dirname "$0")/libgpiod2.sh")
PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
if [ "${1:-}" = swift ]; then
    case "${2:-}" in
    build | test | run)
        sub=$2
        shift 2
        exec swift "$sub" -Xlinker -rpath -Xlinker "$prefix/lib" "$@"
        ;;
    esac
fi
exec "$@"
