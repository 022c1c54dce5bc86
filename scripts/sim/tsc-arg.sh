#!/bin/sh
# Prints the kernel argument tsc_early_khz=N for a guest under qemu's TCG:
# the host's TSC frequency (host-tsc-khz.c), which the guest's TSC counts
# at (see run-guest.sh for why the guest must not calibrate its own).
# Prints nothing, and says why on stderr, where it cannot be measured;
# nothing on a host that is not x86.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
case $(uname -m) in
x86_64 | i?86)
    probe=$(mktemp /tmp/boardloop-tsc.XXXXXX)
    if cc -O2 -o "$probe" "$here/host-tsc-khz.c" && khz=$("$probe") && [ "$khz" -gt 0 ]; then
        echo "tsc_early_khz=$khz"
    else
        echo "run-guest: could not measure the host's TSC frequency; the guest calibrates its own" >&2
    fi
    rm -f "$probe"
    ;;
esac
