#!/bin/sh
# One command for the real-kernel GPIO tests: installs the packages, builds
# (or reuses) the gpio-sim kernel, builds the guest programs in release mode,
# packs the initramfs, boots it under qemu and exits with the guest's verdict.
#   GUEST_PRODUCTS  Swift products to run in the guest (default: gpio-sim-guest)
#   SIM_LOG         where the serial log goes (default: .build-guest/guest.log)
set -eu
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
products=${GUEST_PRODUCTS:-gpio-sim-guest}
scripts/sim/deps.sh
kernel=$(scripts/sim/build-kernel.sh)
bins=""
for p in $products; do
    swift build -c release --product "$p" --scratch-path .build-guest >/dev/null
    bins="$bins $(swift build -c release --scratch-path .build-guest --show-bin-path)/$p"
done
mkdir -p .build-guest
scripts/sim/build-initramfs.sh .build-guest/initramfs.gz $bins
scripts/sim/run-guest.sh "$kernel" .build-guest/initramfs.gz "${SIM_LOG:-.build-guest/guest.log}" 900
