#!/bin/sh
# Debian packages the gpio-sim guest needs (kernel build, initramfs, qemu).
# Installs only what is missing. Used by scripts/sim-test.sh and .ci/run.
set -eu
PKGS="linux-source-6.1 build-essential bc flex bison libelf-dev libssl-dev cpio xz-utils qemu-system-x86 busybox-static gpiod libgpiod-dev pkg-config"
need=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need="$need $p"
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
echo "sim deps: installing$need"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
