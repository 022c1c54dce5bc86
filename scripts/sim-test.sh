#!/bin/sh
# One command for the real-kernel GPIO tests: installs the packages, builds
# (or reuses) the gpio-sim kernel, builds the guest programs in release mode,
# packs the initramfs, boots it under qemu and exits with the guest's verdict.
# Runs the guest twice: with the programs built against the system's
# libgpiod 1.6, then against libgpiod 2.x (scripts/libgpiod2.sh; the 2.x
# library goes into the initramfs by the programs' rpath).
#   GUEST_PRODUCTS  Swift products to run in the guest (default: gpio-sim-guest; empty: none)
#   GUEST_BOARDD    0 leaves boardd and boardctl (release builds) and their scenarios out (default 1)
#   GUEST_STATIC    1 builds them with the Swift runtime linked in, as the .deb does
#                   (scratch .build-guest-static, .build-guest-gpiod2-static; default 0)
#   SIM_LIBGPIOD    which runs: "1 2" (default), "1" or "2"
#   SIM_LOG         where the serial log goes (default: .build-guest/guest-libgpiodN.log)
#   GUEST_SCENARIOS which of tests-guest/scenarios/ run (default: all)
#   SIM_APPEND      more kernel arguments; NAME=VALUE ones reach the scenarios' environment
#   SIM_TIMEOUT     seconds one guest may run (default 900)
#   SIM_SMP         the guest's CPUs (default 1); more boots a kernel built for them
#                   (cached beside the default one)
set -eu
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
products=${GUEST_PRODUCTS-gpio-sim-guest}
scripts/sim/deps.sh
kernel=$(scripts/sim/build-kernel.sh)
mkdir -p .build-guest
for v in ${SIM_LIBGPIOD:-1 2}; do
    case $v in
    1) with=""; scratch=.build-guest ;;
    2) with=scripts/with-libgpiod2.sh; scratch=.build-guest-gpiod2 ;;
    *) echo "sim-test: SIM_LIBGPIOD must list 1 and/or 2, not '$v'" >&2; exit 2 ;;
    esac
    echo "== gpio-sim guest, programs built against libgpiod $v"
    bins=""
    for p in $products; do
        $with swift build -c release --product "$p" --scratch-path "$scratch" >/dev/null
        bins="$bins $($with swift build -c release --scratch-path "$scratch" --show-bin-path)/$p"
    done
    boardd=""
    boardctl=""
    if [ "${GUEST_BOARDD:-1}" = 1 ]; then
        bscratch=$scratch
        [ "${GUEST_STATIC:-0}" = 1 ] && bscratch=$scratch-static
        bin=$(scripts/sim/build-boardd.sh "$bscratch" $with)
        boardd=$bin/boardd
        boardctl=$bin/boardctl
    fi
    # The C reference of the reaction-latency scenario, against the same libgpiod.
    ref=.build-guest/react-ref-libgpiod$v
    $with sh -c 'cc -O2 -Wall -o "$1" tests-guest/react-ref.c $(pkg-config --cflags --libs libgpiod) \
        -Wl,-rpath,"$(pkg-config --variable=libdir libgpiod)" \
        -DREF_LIBGPIOD_MAJOR=$(pkg-config --modversion libgpiod | cut -d. -f1)' sh "$ref"
    log=${SIM_LOG:-.build-guest/guest-libgpiod$v.log}
    BOARDD=$boardd BOARDCTL=$boardctl REACT_REF=$ref scripts/sim/build-initramfs.sh ".build-guest/initramfs-libgpiod$v.gz" $bins
    scripts/sim/run-guest.sh "$kernel" ".build-guest/initramfs-libgpiod$v.gz" "$log" "${SIM_TIMEOUT:-900}"
    # The guest program (or, without it, react-ref) says which library it was
    # built against: it must be this one.
    case " $products " in
    *" gpio-sim-guest "*) says="gpio-sim-guest: libgpiod" ;;
    *) says="react-ref (C, libgpiod" ;;
    esac
    grep -q "$says $v\." "$log" || {
        echo "sim-test: the guest did not run against libgpiod $v:" >&2
        grep "$says" "$log" >&2 || true
        exit 1
    }
done
