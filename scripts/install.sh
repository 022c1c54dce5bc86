#!/usr/bin/env bash
# Installs boardd and boardctl as a system service (docs/deploy.md).
#   scripts/install.sh [--prefix P] [--destdir D] [--no-build] [--bin-dir DIR] [--uninstall]
#
# Builds release with the Swift standard library linked in (scratch
# .build-static; --no-build: use what is there, .build-static/release, or
# --bin-dir DIR: the binaries there), then
# installs, each only when it differs from what is there:
#   P/bin/boardd, P/bin/boardctl                   (P: --prefix, default /usr/local)
#   shell completions: P/share/bash-completion/completions/,
#     P/share/zsh/site-functions/, P/share/fish/vendor_completions.d/
#   the unit, boardd.service (its paths under P): P/lib/systemd/system/
#     when P is /usr or /usr/local (systemd reads both), else /etc/systemd/system/
#   /etc/boardd/boardd.yaml                        (packaging/boardd.yaml; only when there is none)
#   /etc/systemd/system/boardd.service.d/realtime.conf when the config has a
#     worker with priority: or mlockall:, network.conf when a command of the
#     config runs a network client or the config has an mqtt: block (both
#     removed again when it no longer does)
#   /etc/udev/rules.d/60-boardd-gpio.rules         when no udev rule gives /dev/gpiochip* a group
# and makes the system user boardd (group boardd, member of gpio; the gpio
# group too when the system has none), then reloads systemd. --destdir D
# installs every file under D (for a package) and only prints the users,
# groups, udevadm and systemctl it would run. A second run changes nothing
# and says so. --uninstall removes what it installed but the config (and
# the user, which files may still belong to).
set -euo pipefail
package=$(cd "$(dirname "$0")/.." && pwd)

prefix=/usr/local
destdir=
build=1
bin_dir=
uninstall=0
usage() { sed -n '2,3p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=${2:?--prefix needs a directory}; shift ;;
        --destdir) destdir=${2:?--destdir needs a directory}; shift ;;
        --no-build) build=0 ;;
        --bin-dir) bin_dir=${2:?--bin-dir needs a directory}; build=0; shift ;;
        --uninstall) uninstall=1 ;;
        -h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown option $1" >&2; usage >&2; exit 64 ;;
    esac
    shift
done
case "$prefix" in /*) ;; *) echo "install.sh: --prefix must be an absolute path" >&2; exit 64 ;; esac
if [ -n "$destdir" ]; then
    mkdir -p "$destdir"
    destdir=$(cd "$destdir" && pwd)
fi
prefix=${prefix%/}
[ -n "$prefix" ] || prefix=/

# What goes where (paths on the target system; $destdir is put in front).
bin=$prefix/bin
case "$prefix" in
    /usr | /usr/local) unit_dir=$prefix/lib/systemd/system ;;
    *) unit_dir=/etc/systemd/system ;;
esac
unit=$unit_dir/boardd.service
dropin_dir=/etc/systemd/system/boardd.service.d
config=/etc/boardd/boardd.yaml
udev_rule=/etc/udev/rules.d/60-boardd-gpio.rules
completions=(
    "bash:$prefix/share/bash-completion/completions/boardd:boardd"
    "bash:$prefix/share/bash-completion/completions/boardctl:boardctl"
    "zsh:$prefix/share/zsh/site-functions/_boardd:boardd"
    "zsh:$prefix/share/zsh/site-functions/_boardctl:boardctl"
    "fish:$prefix/share/fish/vendor_completions.d/boardd.fish:boardd"
    "fish:$prefix/share/fish/vendor_completions.d/boardctl.fish:boardctl"
)
# The first line of every file install.sh writes itself: only such a file
# is replaced or removed (never one a person or the distribution wrote).
marker="# Written by boardloop's scripts/install.sh"

changes=0
note() { echo "install.sh: $*"; }
change() { changes=$((changes + 1)); note "$*"; }
# Runs a system command, or with --destdir prints it.
system() {
    if [ -n "$destdir" ]; then
        note "would run: $*"
    else
        change "running: $*"
        "$@"
    fi
}
systemd_running() { [ -z "$destdir" ] && [ -d /run/systemd/system ] && command -v systemctl > /dev/null; }

# put MODE SOURCE TARGET: installs SOURCE as $destdir$TARGET unless the same.
put() {
    local mode=$1 source=$2 target=$destdir$3
    if [ -f "$target" ] && cmp -s "$source" "$target" && [ "$(stat -c %a "$target")" = "${mode#0}" ]; then
        return 0
    fi
    mkdir -p "$(dirname "$target")"
    install -m "$mode" "$source" "$target.install-tmp"
    mv -f "$target.install-tmp" "$target"
    change "installed $3"
}

# remove TARGET: removes $destdir$TARGET when it is there.
remove() {
    local target=$destdir$1
    if [ -e "$target" ] || [ -L "$target" ]; then
        rm -f "$target"
        change "removed $1"
    fi
}

# ours TARGET: whether install.sh wrote $destdir$TARGET (its first line).
ours() { [ -f "$destdir$1" ] && [ "$(head -n 1 "$destdir$1")" = "$marker" ]; }

# prune DIR...: removes each directory that is empty now (under --destdir,
# its parents up to the tree's root too).
prune() {
    local d
    for d in "$@"; do
        while [ "$d" != / ] && [ -d "$destdir$d" ] && rmdir "$destdir$d" 2> /dev/null; do
            [ -n "$destdir" ] || break
            d=$(dirname "$d")
        done
    done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ $uninstall = 1 ]; then
    remove "$bin/boardd"
    remove "$bin/boardctl"
    for c in "${completions[@]}"; do
        IFS=: read -r _ path _ <<< "$c"
        remove "$path"
    done
    remove "$unit"
    for f in realtime.conf network.conf; do ours "$dropin_dir/$f" && remove "$dropin_dir/$f"; done
    ours "$udev_rule" && remove "$udev_rule"
    prune "$dropin_dir"
    # Under --destdir the tree is install.sh's: empty directories go too (on
    # a system they stay, as they may have been there before).
    [ -n "$destdir" ] && prune "$bin" "$prefix/share/bash-completion/completions" "$prefix/share/zsh/site-functions" \
        "$prefix/share/fish/vendor_completions.d" "$unit_dir" /etc/udev/rules.d
    if [ $changes -gt 0 ]; then
        if systemd_running; then
            systemctl disable --now boardd.service 2> /dev/null || true
            systemctl daemon-reload
        elif [ -n "$destdir" ]; then
            note "would run: systemctl disable --now boardd.service; systemctl daemon-reload"
        fi
    fi
    [ -f "$destdir$config" ] && note "kept $config (remove it yourself when it is no longer wanted)"
    [ -z "$destdir" ] && getent passwd boardd > /dev/null && note "kept the user boardd (userdel boardd removes it)"
    if [ $changes = 0 ]; then note "nothing to remove: nothing changed"; else note "$changes change(s)"; fi
    exit 0
fi

# The binaries.
if [ -z "$bin_dir" ]; then
    if [ $build = 1 ]; then
        [ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
        flags=(-c release --static-swift-stdlib --scratch-path "$package/.build-static" --package-path "$package")
        note "building: swift build ${flags[*]} (boardd, boardctl)"
        swift build "${flags[@]}" --product boardd >&2
        swift build "${flags[@]}" --product boardctl >&2
    fi
    # SwiftPM's link to the release directory (no swift needed: sudo's
    # PATH may not have it).
    bin_dir=$package/.build-static/release
fi
for exe in boardd boardctl; do
    [ -x "$bin_dir/$exe" ] || { echo "install.sh: no $bin_dir/$exe (build it, or give --bin-dir)" >&2; exit 1; }
done
put 0755 "$bin_dir/boardd" "$bin/boardd"
put 0755 "$bin_dir/boardctl" "$bin/boardctl"

# Shell completions, from the binaries themselves (swift-argument-parser).
for c in "${completions[@]}"; do
    IFS=: read -r shell path exe <<< "$c"
    "$bin_dir/$exe" --generate-completion-script "$shell" > "$tmp/completion"
    put 0644 "$tmp/completion" "$path"
done

# The unit, with this prefix's paths.
sed "s|/usr/local/bin/|$bin/|g" "$package/packaging/boardd.service" > "$tmp/boardd.service"
put 0644 "$tmp/boardd.service" "$unit"

# The config: only when there is none.
if [ -e "$destdir$config" ]; then
    cmp -s "$package/packaging/boardd.yaml" "$destdir$config" || note "kept $config as it is (yours)"
else
    put 0644 "$package/packaging/boardd.yaml" "$config"
fi

# The drop-ins the config asks for (docs/deploy.md): written when it does,
# removed when it no longer does (only install.sh's own files).
summary=$tmp/summary.json
if "$bin_dir/boardd" --check --json --config "$destdir$config" > "$summary" 2> "$tmp/check.err"; then
    checked=1
else
    checked=0
    note "warning: $config does not check (boardd --check --config $config): drop-ins left as they are"
    sed 's/^/    /' "$tmp/check.err" | head -n 5
fi
dropin() { # NAME WANTED TEXT
    local name=$1 wanted=$2 text=$3
    if [ "$wanted" = 1 ]; then
        printf '%s\n%s\n' "$marker" "$text" > "$tmp/$name"
        if [ -e "$destdir$dropin_dir/$name" ] && ! ours "$dropin_dir/$name"; then
            note "kept $dropin_dir/$name as it is (not written by install.sh)"
        else
            put 0644 "$tmp/$name" "$dropin_dir/$name"
        fi
    elif ours "$dropin_dir/$name"; then
        remove "$dropin_dir/$name"
        prune "$dropin_dir"
    fi
}
if [ $checked = 1 ]; then
    # A worker with priority: (SCHED_FIFO) or mlockall: (the summary's loop settings).
    realtime=0
    grep -Eq '"settings" *: *"[^"]*(SCHED_FIFO|mlockall)' "$summary" && realtime=1
    dropin realtime.conf $realtime "# The config has a worker with priority: or mlockall: (docs/config.md, workers).
[Service]
CapabilityBoundingSet=CAP_SYS_NICE CAP_IPC_LOCK
AmbientCapabilities=CAP_SYS_NICE CAP_IPC_LOCK
LimitRTPRIO=99
LimitMEMLOCK=infinity
RestrictRealtime=no"
    # A command that runs a network client, or names a URL; or an mqtt: block.
    network=0
    grep -Eq '"detail" *: *"argv \[[^]]*([/"](curl|wget|mosquitto_pub|mosquitto_sub|ssh|scp|rsync|nc|ncat|ping)\\"|[a-z]+://)' "$summary" && network=1
    grep -Eq '"mqtt" *: *"' "$summary" && network=1
    # The text is packaging/network.conf's (the package ships it), without its comments.
    dropin network.conf $network "# The config talks to a network: a command, or its MQTT broker (docs/deploy.md, the network drop-in).
$(sed '/^#/d' "$package/packaging/network.conf")"
fi

# The gpio group and a udev rule giving it /dev/gpiochip*, where the
# system has none (Raspberry Pi OS has both).
rule_exists=0
for d in /etc/udev/rules.d /run/udev/rules.d /usr/lib/udev/rules.d /lib/udev/rules.d; do
    [ -d "$d" ] || continue
    for f in "$d"/*.rules; do
        [ -f "$f" ] && [ "$f" != "$udev_rule" ] && grep -q 'gpiochip' "$f" && grep -q 'GROUP="gpio"' "$f" && rule_exists=1
    done
done
if [ -n "$destdir" ] || [ $rule_exists = 0 ]; then
    # A package carries the rule (where the system has one, it gives the
    # same group and mode).
    printf '%s\n%s\n' "$marker" 'SUBSYSTEM=="gpio", KERNEL=="gpiochip*", GROUP="gpio", MODE="0660"' > "$tmp/rule"
    if [ -e "$destdir$udev_rule" ] && ! ours "$udev_rule"; then
        note "kept $udev_rule as it is (not written by install.sh)"
    else
        before=$changes
        put 0644 "$tmp/rule" "$udev_rule"
        if [ $changes != "$before" ]; then
            if [ -n "$destdir" ] || command -v udevadm > /dev/null; then
                system udevadm control --reload && system udevadm trigger --subsystem-match=gpio
            else
                note "no udevadm here (no udev running): the rule applies once udev starts"
            fi
        fi
    fi
fi
useradd=(useradd --system --user-group --groups gpio --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin boardd)
if [ -n "$destdir" ]; then
    note "would run, where there is no group gpio: groupadd --system gpio"
    note "would run, where there is no user boardd: ${useradd[*]} (else usermod --append --groups gpio boardd)"
else
    getent group gpio > /dev/null 2>&1 || system groupadd --system gpio
    if ! getent passwd boardd > /dev/null 2>&1; then
        system "${useradd[@]}"
    elif ! id -nG boardd | tr ' ' '\n' | grep -qx gpio; then
        system usermod --append --groups gpio boardd
    fi
fi

if [ $changes = 0 ]; then
    note "everything is installed already: nothing changed"
else
    if systemd_running; then
        systemctl daemon-reload
        # A running boardd restarts with the new files (its config is
        # checked first: ExecStartPre=).
        systemctl try-restart boardd.service
    elif [ -n "$destdir" ]; then
        note "would run: systemctl daemon-reload; systemctl try-restart boardd.service"
    else
        note "systemd is not running here: no systemctl"
    fi
    note "$changes change(s). Next: edit $config, boardd --check --config $config, systemctl enable --now boardd"
fi
