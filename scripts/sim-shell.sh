#!/bin/sh
# A gpio-sim machine for a machine without gpio-sim (CI, a container, a VM,
# a kernel built without it): boots the qemu guest of scripts/sim-test.sh
# (the same cached gpio-sim kernel) with boardd and boardctl (release
# builds, .build-guest), the gpiod tools, boards/, examples/, scripts/sim-host.sh
# and your config as /config/boardd.yaml, creates the sim chips
# (scripts/sim-host.sh up), then
#   - with no CMD: gives you a shell on the serial console (leave with
#     `poweroff -f`, `exit`, or Ctrl-A X);
#   - with -- CMD...: runs CMD in / (so scripts/sim-host.sh status works),
#     prints its output, and exits with CMD's exit status.
# usage: scripts/sim-shell.sh [--config FILE] [--kvm] [--timeout S] [-- CMD...]
#   --config FILE  the config copied to /config/boardd.yaml (default
#                  examples/sim-button.yaml); checked first with
#                  boardd --check --board gpio-sim
#   --kvm          use KVM (needs /dev/kvm) instead of software emulation (TCG)
#   --timeout S    end the VM after S seconds, exit 124 (default: 900 with a
#                  CMD, none for a shell)
# Exit status: CMD's; 124 when timed out; 125 when the guest gave no status
# (it crashed, or the chips could not be made); 2 for a bad argument.
#   SIM_LOG  where the serial log goes (default .build-guest/sim-shell.log)
set -eu
caller=$(pwd)
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
usage() {
    sed -n 's/^# usage: /usage: /p' "$0" >&2
    echo "       (scripts/sim-shell.sh --help for more)" >&2
    exit 2
}
die() { echo "sim-shell: $*" >&2; exit 2; }
config=""
kvm=0
limit=""
while [ $# -gt 0 ]; do
    case $1 in
    --config) [ $# -ge 2 ] || usage; config=$2; shift 2 ;;
    --config=*) config=${1#--config=}; shift ;;
    --kvm) kvm=1; shift ;;
    --timeout) [ $# -ge 2 ] || usage; limit=$2; shift 2 ;;
    --timeout=*) limit=${1#--timeout=}; shift ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
    -*) echo "sim-shell: unknown option '$1'" >&2; usage ;;
    *) break ;;
    esac
done
case $config in
'') config=examples/sim-button.yaml ;;
/*) ;;
*) config=$caller/$config ;;
esac
[ -r "$config" ] || die "cannot read the config $config"
case $limit in '' | *[!0-9]*) [ -z "$limit" ] || die "--timeout takes whole seconds, not '$limit'" ;; esac
if [ $# -eq 0 ] && [ ! -t 0 ]; then
    die "no command and no terminal for a shell: give one with -- CMD..., or run it in a terminal"
fi
if [ $kvm = 1 ]; then
    [ -c /dev/kvm ] || die "--kvm: no /dev/kvm here (no KVM on this machine, or its module is not loaded): leave --kvm out for software emulation"
    [ -r /dev/kvm ] && [ -w /dev/kvm ] || die "--kvm: /dev/kvm is not yours to use (ls -l /dev/kvm: add yourself to its group, often kvm)"
fi

scripts/sim/deps.sh >&2
kernel=$(scripts/sim/build-kernel.sh)
echo "sim-shell: building boardd and boardctl (release, .build-guest)" >&2
bin=$(scripts/sim/build-boardd.sh .build-guest)
"$bin/boardd" --check --config "$config" --board gpio-sim >/dev/null \
    || die "$config fails boardd --check --board gpio-sim (above): fix it, or if the errors are about pins, it does not run on the gpio-sim board: its lines must name pins of boards/gpio-sim.yaml (BUTTON, LED, SIM0_N, SIM1_N)"

work=$(mktemp -d /tmp/boardloop-sim-shell.XXXXXX)
qpid=""
cleanup() { [ -n "$qpid" ] && kill "$qpid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir "$work/config"
cp "$config" "$work/config/boardd.yaml"
token=$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')
echo "$token" > "$work/config/token"
if [ $# -gt 0 ]; then
    # The command, each argument single-quoted for the guest's sh.
    for a in "$@"; do
        printf "'%s' " "$(printf '%s' "$a" | sed "s/'/'\\\\''/g")"
    done > "$work/config/cmd"
    echo >> "$work/config/cmd"
fi
GUEST_MODE=shell SHELL_DIR="$work/config" BOARDD="$bin/boardd" BOARDCTL="$bin/boardctl" \
    scripts/sim/build-initramfs.sh "$work/initramfs.gz"

append="console=ttyS0 panic=-1 quiet tsc=reliable"
if [ $kvm = 1 ]; then
    accel="-accel kvm -cpu host"
else
    accel="-accel tcg"
    append="$append $(scripts/sim/tsc-arg.sh)"
fi
ncmd=$#
# From here on, the positional parameters are qemu's command line.
# shellcheck disable=SC2086
set -- qemu-system-x86_64 $accel -m 512 -smp 1 -nic none -nographic -no-reboot \
    -kernel "$kernel" -initrd "$work/initramfs.gz" -append "$append" -monitor none

if [ "$ncmd" -eq 0 ]; then
    echo "sim-shell: booting the guest ($([ $kvm = 1 ] && echo KVM || echo TCG, software emulation: boardd takes a while to start)); leave with poweroff -f, or Ctrl-A X" >&2
    if [ -n "$limit" ]; then
        timeout --foreground "$limit" "$@" -serial mon:stdio || exit $?
    else
        "$@" -serial mon:stdio
    fi
    exit 0
fi

log=${SIM_LOG:-.build-guest/sim-shell.log}
mkdir -p "$(dirname "$log")"
: > "$log"
start=$(date +%s)
timeout "${limit:-900}" "$@" -serial "file:$log" </dev/null >/dev/null 2>"$work/qemu.err" &
qpid=$!
# The command's output as it comes: the console from the begin line to the exit line.
tail -n +1 -f --pid="$qpid" "$log" | awk -v b="SIM-SHELL-BEGIN $token" -v e="SIM-SHELL-EXIT $token " '
    { sub(/\r+$/, "") }
    !on && index($0, b) { on = 1; next }
    on && (i = index($0, e)) { if (i > 1) print substr($0, 1, i - 1); on = 0; fflush(); next }
    on { print; fflush() }' &
shown=$!
qrc=0
wait "$qpid" || qrc=$?
qpid=""
wait "$shown" || true
secs=$(( $(date +%s) - start ))
status=$(tr -d '\r' < "$log" | sed -n "s/.*SIM-SHELL-EXIT $token \([0-9][0-9]*\).*/\1/p" | tail -n 1)
if [ -n "$status" ]; then
    echo "sim-shell: the command exited with status $status (guest ran ${secs} s; serial log in $log)" >&2
    exit "$status"
fi
if [ $qrc = 124 ]; then
    echo "sim-shell: timed out after ${limit:-900} s (--timeout); serial log in $log" >&2
    exit 124
fi
echo "sim-shell: the guest ended (qemu status $qrc) without the command's exit status; the end of $log:" >&2
tail -n 20 "$log" | tr -d '\r' >&2
if [ -s "$work/qemu.err" ]; then
    echo "sim-shell: qemu said:" >&2
    sed 's/^/  /' "$work/qemu.err" >&2
    [ $kvm = 1 ] && echo "sim-shell: KVM did not work here (a VM inside a VM often cannot): leave --kvm out" >&2
fi
exit 125
