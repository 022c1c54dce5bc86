#!/bin/sh
# Creates the simulated GPIO chips described in a chips file (default
# boards/sim-chips.conf) through gpio-sim's configfs, and writes where each
# landed to $BOARDLOOP_SIM_RUN/LABEL.env (default /run/boardloop-sim):
#   LABEL, DEV (/dev/gpiochipN), SYSFS (dir holding sim_gpioN/{pull,value}).
# POSIX sh: runs under bash on a laptop and busybox ash in the qemu guest.
# Needs root and a kernel with CONFIG_GPIO_SIM (`modprobe gpio-sim`).
set -eu
conf=${1:-$(dirname "$0")/../boards/sim-chips.conf}
cfs=/sys/kernel/config/gpio-sim
run=${BOARDLOOP_SIM_RUN:-/run/boardloop-sim}
[ -r "$conf" ] || { echo "gpio-sim-up: cannot read $conf" >&2; exit 1; }
if [ ! -d "$cfs" ]; then
    modprobe gpio-sim 2>/dev/null || true
    if [ ! -d /sys/kernel/config ] || ! grep -q configfs /proc/mounts; then
        mount -t configfs none /sys/kernel/config 2>/dev/null || true
    fi
fi
[ -d "$cfs" ] || { echo "gpio-sim-up: $cfs missing: this kernel needs gpio-sim (sudo modprobe gpio-sim; CONFIG_GPIO_SIM)" >&2; exit 1; }
mkdir -p "$run"

chips=""
chip=""
while read -r kind a b rest; do
    case "$kind" in
    chip)
        chip=$a
        [ -e "$cfs/$chip" ] && { echo "gpio-sim-up: $chip exists already (run gpio-sim-down.sh first)" >&2; exit 1; }
        mkdir "$cfs/$chip" "$cfs/$chip/bank0"
        echo "$b" > "$cfs/$chip/bank0/num_lines"
        echo "$chip" > "$cfs/$chip/bank0/label"
        chips="$chips $chip"
        ;;
    line)
        [ -n "$chip" ] || { echo "gpio-sim-up: 'line' before any 'chip' in $conf" >&2; exit 1; }
        mkdir -p "$cfs/$chip/bank0/line$a"
        echo "$b" > "$cfs/$chip/bank0/line$a/name"
        ;;
    ''|\#*) ;;
    *) echo "gpio-sim-up: $conf: unknown entry '$kind'" >&2; exit 1 ;;
    esac
done < "$conf"

for chip in $chips; do
    echo 1 > "$cfs/$chip/live"
    # Never assume numbers: read back what the kernel chose.
    dev=$(cat "$cfs/$chip/dev_name")
    name=$(cat "$cfs/$chip/bank0/chip_name")
    sysfs=/sys/devices/platform/$dev/$name
    printf 'LABEL=%s\nDEV=/dev/%s\nSYSFS=%s\n' "$chip" "$name" "$sysfs" > "$run/$chip.env"
    echo "$chip: /dev/$name, lines in $sysfs/sim_gpioN/{pull,value}"
done
