#!/bin/sh
# Installs Debian/Raspberry Pi OS packages that are not installed yet.
#   scripts/install-deps.sh            what boardloop builds against: libgpiod
#                                      (headers + library, via pkg-config) and the gpiod tools;
#                                      libmosquitto (boardd's MQTT client); libyaml (the config
#                                      reader's YAML parser); for the tests, the
#                                      mosquitto broker and its clients, openssl (a throwaway CA),
#                                      and paho-mqtt from PyPI in a venv (~/.cache/boardloop/venv)
#                                      for the fleet test's controller;
#                                      Home Assistant 2025.4.4's own code from PyPI in a
#                                      Python 3.13 venv (~/.cache/boardloop/ha-venv), which
#                                      tests-ha/check_discovery.py checks the discovery
#                                      payloads with (pins: tests-ha/requirements.txt);
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
    # Home Assistant's MQTT discovery code, for tests-ha/check_discovery.py:
    # the homeassistant wheel with no dependencies but the pinned few its
    # discovery and schema modules import (tests-ha/requirements.txt), as
    # wheels only, in a Python 3.13 venv (2025.4.4 wants 3.13; Debian 12 has
    # 3.11, so the python3.13 on PATH or pyenv's). Made again when the pins
    # change or the checker no longer imports (its --help imports all it uses).
    root=$(cd "$(dirname "$0")/.." && pwd)
    havenv=${XDG_CACHE_HOME:-$HOME/.cache}/boardloop/ha-venv
    reqs=$root/tests-ha/requirements.txt
    if ! cmp -s "$reqs" "$havenv/requirements.txt" \
        || ! "$havenv/bin/python" "$root/tests-ha/check_discovery.py" --help > /dev/null 2>&1; then
        # (pyenv's shim on PATH fails unless 3.13 is its selected version:
        # each candidate must run.)
        py=""
        for c in "$(command -v python3.13 || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13; do
            if [ -z "$py" ] && [ -x "$c" ] && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2> /dev/null; then
                py=$c
            fi
        done
        if [ -z "$py" ]; then
            echo "install-deps: no Python 3.13 (python3.13 on PATH or in pyenv's versions) for $havenv" >&2
            exit 1
        fi
        echo "installing: homeassistant 2025.4.4 (PyPI) into $havenv"
        rm -rf "$havenv"
        "$py" -m venv "$havenv"
        "$havenv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: -r "$reqs"
        "$havenv/bin/python" "$root/tests-ha/check_discovery.py" --help > /dev/null
        cp "$reqs" "$havenv/requirements.txt"
    fi
fi
