#!/bin/sh
# gpio-sim chips on your own machine (a laptop whose kernel has the gpio-sim
# module): the chips of boards/sim-chips.conf, which the gpio-sim board
# (boards/gpio-sim.yaml) names, so boardd runs a config on the real kernel's
# GPIO character devices without hardware.
#   sudo scripts/sim-host.sh up [--chips FILE]     create them (scripts/gpio-sim-up.sh), say what to run
#   sudo scripts/sim-host.sh down [--chips FILE]   remove them (scripts/gpio-sim-down.sh)
#   scripts/sim-host.sh status [--chips FILE]      each chip: /dev/gpiochipN, its lines and levels
# status exits 0 when every chip of the file is up, 1 when one is not.
# SIM_HOST_CONFIG: the config `up` suggests (default examples/sim-button.yaml).
# With sudo, `up` gives the chips' device files and lines' pull attributes
# to the user who ran sudo, so boardd and boardctl run without root.
# POSIX sh: runs under bash on a laptop and busybox ash in the qemu guest
# (scripts/sim-shell.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
me=scripts/sim-host.sh
cfs=/sys/kernel/config/gpio-sim
run=${BOARDLOOP_SIM_RUN:-/run/boardloop-sim}
export BOARDLOOP_SIM_RUN="$run"

usage() {
    echo "usage: sudo $me up|down [--chips FILE]" >&2
    echo "       $me status [--chips FILE]" >&2
    exit 2
}
die() { echo "sim-host: $*" >&2; exit 1; }

[ $# -ge 1 ] || usage
action=$1; shift
chips=$here/../boards/sim-chips.conf
while [ $# -gt 0 ]; do
    case $1 in
    --chips) [ $# -ge 2 ] || usage; chips=$2; shift 2 ;;
    --chips=*) chips=${1#--chips=}; shift ;;
    -h | --help) usage ;;
    *) echo "sim-host: unknown argument '$1'" >&2; usage ;;
    esac
done
case $action in up | down | status) ;; -h | --help) usage ;; *) echo "sim-host: unknown action '$action'" >&2; usage ;; esac
[ -r "$chips" ] || die "cannot read the chips file $chips"
labels=$(awk '$1 == "chip" { print $2 }' "$chips")
[ -n "$labels" ] || die "$chips names no chip ('chip LABEL LINES' lines)"

is_root() { [ "$(id -u)" = 0 ]; }
need_root() {
    is_root || die "$action needs root (it writes to configfs): run it with sudo: sudo $me $action${chips_arg:-}"
}
configfs_mounted() { grep -q ' /sys/kernel/config configfs ' /proc/mounts 2>/dev/null; }

# Why gpio-sim cannot be used here, and how to get it.
no_module() {
    kernel=$(uname -r)
    {
        echo "sim-host: this kernel ($kernel) has no gpio-sim: $cfs is missing${1:+ ($1)}."
        echo "  Check:   modinfo gpio-sim     (or: grep GPIO_SIM /boot/config-$kernel; 'm' is a module, 'y' built in)"
        echo "  Where the module comes from (CONFIG_GPIO_SIM, Linux 5.17 and later):"
        echo "    Ubuntu:  sudo apt install linux-modules-extra-$kernel"
        echo "    Fedora:  sudo dnf install kernel-modules-extra   (dnf provides '*/gpio-sim.ko*' names the package)"
        echo "    Debian:  its stock amd64 kernels (6.1, 6.12) are built without it ('# CONFIG_GPIO_SIM is not set'"
        echo "             in /boot/config-*): build a kernel with CONFIG_GPIO_SIM=m, or use scripts/sim-shell.sh"
        echo "  then: sudo modprobe gpio-sim && sudo $me up"
        echo "  No such kernel (a container, a CI runner, a VM without modules)? scripts/sim-shell.sh boots one under qemu."
    } >&2
    exit 1
}

# Makes sure configfs is mounted and gpio-sim is there (loading the module).
has_configfs() { grep -qw configfs /proc/filesystems 2>/dev/null || modprobe configfs 2>/dev/null; }
ensure_gpio_sim() {
    if ! configfs_mounted; then
        # gpio-sim is configured through configfs: a kernel without it has no gpio-sim either.
        has_configfs || no_module "the kernel has no configfs either (CONFIG_CONFIGFS_FS), which gpio-sim needs"
        if ! err=$(mount -t configfs none /sys/kernel/config 2>&1); then
            die "configfs is not mounted on /sys/kernel/config and mounting it failed${err:+ ($err)}: mount it with 'sudo mount -t configfs none /sys/kernel/config'"
        fi
        echo "sim-host: mounted configfs on /sys/kernel/config"
    fi
    [ -d "$cfs" ] && return 0
    if command -v modprobe >/dev/null 2>&1; then
        err=$(modprobe gpio-sim 2>&1) || no_module "modprobe gpio-sim: ${err:-failed}"
    else
        no_module "no modprobe on this system"
    fi
    [ -d "$cfs" ] || no_module "modprobe gpio-sim loaded nothing"
}

# LABEL -> "DEV SYSFS" of a live chip, or nothing.
where() {
    [ "$(cat "$cfs/$1/live" 2>/dev/null)" = 1 ] || return 0
    dev=$(cat "$cfs/$1/dev_name" 2>/dev/null) || return 0
    name=$(cat "$cfs/$1/bank0/chip_name" 2>/dev/null) || return 0
    echo "/dev/$name /sys/devices/platform/$dev/$name"
}

shown=boards/sim-chips.conf
[ "$chips" = "$here/../boards/sim-chips.conf" ] || { chips_arg=" --chips $chips"; shown=$chips; }

case $action in
up)
    need_root
    ensure_gpio_sim
    for l in $labels; do
        [ -e "$cfs/$l" ] && die "chip $l exists already (see: $me status; remove it: sudo $me down${chips_arg:-})"
    done
    sh "$here/gpio-sim-up.sh" "$chips"
    uid=${SUDO_UID:-}
    gid=${SUDO_GID:-}
    if [ -n "$uid" ] && [ "$uid" != 0 ]; then
        for l in $labels; do
            set -- $(where "$l")
            [ $# = 2 ] || continue
            chown "$uid:$gid" "$1" "$2"/sim_gpio*/pull
        done
        echo "(the chips and their lines' pull attributes now belong to user $uid, who ran sudo: boardd and boardctl need no root)"
    fi
    set -- $(where "$(echo "$labels" | head -n 1)")
    button=$(awk '$1 == "line" && $3 == "BUTTON" { print $2; exit }' "$chips")
    led=$(awk '$1 == "line" && $3 == "LED" { print $2; exit }' "$chips")
    cat <<EOF

Run boardd on them (from a checkout: swift run boardd ...), a config for the gpio-sim board:
  boardd --config ${SIM_HOST_CONFIG:-examples/sim-button.yaml} --board gpio-sim
A config names the lines by the board's pins (boards/gpio-sim.yaml): BUTTON and LED
(lines ${button:-17} and ${led:-27} of boardloop-sim0), SIM0_0..SIM0_31 and SIM1_0..SIM1_7 by offset.
Drive its inputs from another terminal (boardctl writes the line's pull attribute):
  boardctl click button                        # a press and a release
  boardctl press button --hold 2s
  boardctl flood button --edges 600 --rate 2kHz
  boardctl get led
Or by hand, through sysfs (pull-down: an active-low button pressed; pull-up: released):
  echo pull-down > ${2:-SYSFS}/sim_gpio${button:-17}/pull
  cat ${2:-SYSFS}/sim_gpio${led:-27}/value
See them: $me status$([ -n "${chips_arg:-}" ] && echo "$chips_arg")    Remove them: sudo $me down${chips_arg:-}
EOF
    ;;
down)
    need_root
    configfs_mounted && [ -d "$cfs" ] || { echo "sim-host: gpio-sim is not set up here: no chips to remove"; exit 0; }
    up=0
    for l in $labels; do [ -d "$cfs/$l" ] && up=1; done
    [ $up = 1 ] || { echo "sim-host: none of the chips of $shown is up: nothing to remove"; exit 0; }
    sh "$here/gpio-sim-down.sh" "$chips"
    ;;
status)
    if ! configfs_mounted; then
        if grep -qw configfs /proc/filesystems 2>/dev/null; then
            echo "sim-host: no chips: configfs is not mounted on /sys/kernel/config (sudo $me up mounts it)"
        else
            echo "sim-host: no chips, and this kernel ($(uname -r)) cannot make any: it has no configfs, so no gpio-sim (modinfo gpio-sim; sudo $me up says what to install; scripts/sim-shell.sh boots a kernel that has it)"
        fi
        exit 1
    fi
    if [ ! -d "$cfs" ]; then
        echo "sim-host: no chips: gpio-sim is not loaded ($cfs missing); sudo $me up loads it, if this kernel has it (modinfo gpio-sim)"
        exit 1
    fi
    missing=0
    for l in $labels; do
        set -- $(where "$l")
        if [ $# != 2 ]; then
            if [ -d "$cfs/$l" ]; then echo "$l: made but not live ($cfs/$l/live is 0)"; else echo "$l: not up"; fi
            missing=1
            continue
        fi
        dev=$1 sysfs=$2
        n=$(cat "$cfs/$l/bank0/num_lines")
        echo "$l: $dev, $n lines, sysfs $sysfs"
        echo "  line name      value pull"
        i=0
        while [ $i -lt "$n" ]; do
            name=$(cat "$cfs/$l/bank0/line$i/name" 2>/dev/null || true)
            v=$(cat "$sysfs/sim_gpio$i/value" 2>/dev/null || echo '?')
            p=$(cat "$sysfs/sim_gpio$i/pull" 2>/dev/null || echo '?')
            printf '  %4d %-9s %-5s %s\n' "$i" "${name:--}" "$v" "$p"
            i=$((i + 1))
        done
    done
    if [ $missing = 1 ]; then
        any=0
        for l in $labels; do [ -d "$cfs/$l" ] && any=1; done
        [ $any = 1 ] || echo "sim-host: none of the chips of $shown is up (sudo $me up${chips_arg:-} creates them)"
        exit 1
    fi
    ;;
esac
