#!/bin/sh
# Installs Debian/Raspberry Pi OS packages that are not installed yet.
#   scripts/install-deps.sh            what boardloop builds against: libgpiod
#                                      (headers + library, via pkg-config) and the gpiod tools;
#                                      libmosquitto (boardd's MQTT client); for the tests, the
#                                      mosquitto broker and its clients, and openssl (a throwaway CA);
#                                      for the tests, python3's prometheus_client (boardctl stats
#                                      --prometheus is checked with its text parser)
#   scripts/install-deps.sh PKG...     the given packages (scripts/sim/deps.sh uses this)
# Swift itself is expected on PATH (swift.org toolchain, 6.1 or later).
set -eu
[ $# -gt 0 ] || set -- libgpiod-dev gpiod pkg-config python3 python3-prometheus-client libmosquitto-dev mosquitto mosquitto-clients openssl
need=""
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need="$need $p"
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
echo "installing:$need"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need
