#!/bin/sh
# Boots the guest under qemu (software emulation: -accel tcg), streams its
# serial console to LOG, prints the scenario lines, and exits 0 only when the
# guest printed "GUEST-VERDICT: PASS".
# usage: [SIM_APPEND=ARGS] run-guest.sh BZIMAGE INITRAMFS LOG [TIMEOUT_SECONDS]
#   SIM_APPEND  more kernel command-line arguments (clocksource=jiffies tests
#               that the guest's init refuses to run on the jiffies clock)
#   SIM_QEMU    more qemu arguments (a TCG plugin: scripts/bench-guest-reaction.sh --profile)
#   SIM_SMP     the guest's CPUs (default 1; more needs a kernel built with the same SIM_SMP)
#
# The guest's clocksource is the TSC. Under TCG the kernel's own TSC
# calibration (against the PIT; the default guest kernel has no ACPI, so no
# HPET or ACPI PM timer to calibrate against or to fall back on) fails in
# some boots, which leaves the guest on the 4 ms jiffies clock. qemu's
# guest TSC counts at the host's TSC rate, so its frequency is measured here
# (host-tsc-khz.c) and given as tsc_early_khz=: the kernel then skips the
# calibration. tsc=reliable skips the clocksource watchdog, which has no
# other clock to check the TSC against.
set -eu
kernel=$1; initrd=$2; log=$3; limit=${4:-600}
here=$(cd "$(dirname "$0")" && pwd)
tsc=$("$here/tsc-arg.sh")
: > "$log"
start=$(date +%s)
append="console=ttyS0 panic=-1 quiet tsc=reliable $tsc ${SIM_APPEND:-}"
echo "run-guest: kernel command line: $append"
timeout "$limit" qemu-system-x86_64 -accel tcg -m 512 -smp "${SIM_SMP:-1}" -nic none -nographic -no-reboot \
    -kernel "$kernel" -initrd "$initrd" -serial "file:$log" -monitor none \
    -append "$append" ${SIM_QEMU:-} >/dev/null 2>&1 || echo "run-guest: qemu ended with status $? (124 = timed out after ${limit}s)"
echo "run-guest: guest ran $(( $(date +%s) - start )) s; serial log in $log"
grep -E '^(PASS|FAIL|GUEST-)' "$log" | tr -d '\r' || true
grep -q 'GUEST-VERDICT: PASS' "$log"
