#!/bin/sh
# Debian packages the gpio-sim guest needs (kernel build, initramfs, qemu),
# installed if missing. Used by scripts/sim-test.sh.
set -eu
exec "$(dirname "$0")/../install-deps.sh" linux-source-6.1 build-essential bc flex bison libelf-dev libssl-dev \
    cpio xz-utils qemu-system-x86 busybox-static gpiod libgpiod-dev pkg-config strace
