#!/bin/sh
# Installs Debian/Raspberry Pi OS packages that are not installed yet.
#   scripts/install-deps.sh            what boardloop builds against: libgpiod
#                                      (headers + library, via pkg-config) and the gpiod tools;
#                                      libmosquitto (boardd's MQTT client); libyaml (the config
#                                      reader's YAML parser); for the tests, the
#                                      mosquitto broker and its clients, openssl (a throwaway CA),
#                                      and paho-mqtt from PyPI in a venv (~/.cache/boardloop/venv)
#                                      for the fleet test's controller;
#                                      for the tests, python3's prometheus_client (boardctl stats
#                                      --prometheus is checked with its text parser)
#   scripts/install-deps.sh PKG...     the given packages (scripts/sim/deps.sh uses this)
# Swift itself is expected on PATH (swift.org toolchain, 6.1 or later).
set -eu
default=0
[ $# -gt 0 ] || { default=1; set -- libgpiod-dev gpiod pkg-config python3 python3-prometheus-client python3-venv libmosquitto-dev libyaml-dev mosquitto mosquitto-clients openssl; }
need=""
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need="$need $p"
done
if [ -n "$need" ]; then
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    echo "installing:$need"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need
fi
# The fleet test's MQTT controller: paho-mqtt from PyPI, in a venv of its
# own (Debian's python3 takes no pip packages outside one); the test finds
# it at the same path.
if [ $default = 1 ]; then
    venv=${XDG_CACHE_HOME:-$HOME/.cache}/boardloop/venv
    if ! "$venv/bin/python3" -c 'import paho.mqtt.client' 2> /dev/null; then
        echo "installing: paho-mqtt (PyPI) into $venv"
        rm -rf "$venv"
        /usr/bin/python3 -m venv "$venv"
        "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check 'paho-mqtt>=2,<3'
    fi
fi
