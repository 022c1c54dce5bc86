#!/bin/sh
# Boots the guest under qemu (software emulation: -accel tcg), streams its
# serial console to LOG, prints the scenario lines, and exits 0 only when the
# guest printed "GUEST-VERDICT: PASS".
# usage: run-guest.sh BZIMAGE INITRAMFS LOG [TIMEOUT_SECONDS]
set -eu
kernel=$1; initrd=$2; log=$3; limit=${4:-600}
: > "$log"
start=$(date +%s)
timeout "$limit" qemu-system-x86_64 -accel tcg -m 512 -smp 1 -nic none -nographic -no-reboot \
    -kernel "$kernel" -initrd "$initrd" -serial "file:$log" -monitor none \
    -append 'console=ttyS0 panic=-1 quiet tsc=reliable' >/dev/null 2>&1 || echo "run-guest: qemu ended with status $? (124 = timed out after ${limit}s)"
echo "run-guest: guest ran $(( $(date +%s) - start )) s; serial log in $log"
grep -E '^(PASS|FAIL|GUEST-)' "$log" | tr -d '\r' || true
grep -q 'GUEST-VERDICT: PASS' "$log"
