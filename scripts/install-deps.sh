#!/bin/sh
# Installs the Debian/Raspberry Pi OS packages boardloop builds against:
# libgpiod (headers + library, found through pkg-config) and the gpiod tools.
# Swift itself is expected on PATH (swift.org toolchain, 6.1 or later).
set -eu
need=""
for p in libgpiod-dev gpiod pkg-config; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need="$need $p"
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
echo "installing:$need"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need
