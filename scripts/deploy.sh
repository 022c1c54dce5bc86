#!/usr/bin/env bash
# Deploys a config and a boardd to a board over ssh, checking first and
# rolling back when the new one does not come up (docs/deploy.md, "Deploy
# over ssh").
#   scripts/deploy.sh [--dry-run] [--config FILE] [--build-on-target | --package FILE | --bin-dir DIR]
#                     [--port N] [--identity KEY] [--timeout S] [--ssh-option OPT]... [USER@]HOST
#
# One ssh connection (BatchMode, a ControlMaster) carries every step:
#  1. the new config (--config) and binaries (--package's boardd, --bin-dir's,
#     or those --build-on-target built on the board) go to a temporary
#     directory on the board, and that boardd checks the config there
#     (boardd --check): a config with errors is refused with them, and
#     nothing on the board is changed (exit 2);
#  2. the install: --package FILE by apt-get install (the conffile kept; the
#     .deb kept in /var/lib/boardd-deploy for a later rollback); --bin-dir DIR
#     and --build-on-target by scripts/install.sh --bin-dir on the board
#     (/usr/local/bin, the previous binaries kept as boardd.previous and
#     boardctl.previous); then the config, written beside and renamed over
#     /etc/boardd/boardd.yaml, the previous kept as boardd.yaml.previous;
#  3. systemctl restart boardd, systemctl is-active polled for --timeout S
#     (default 20), then boardctl status, which is printed. When either
#     fails, the previous package or binaries and config are put back,
#     boardd restarted, and what was rolled back and why is said (exit 1).
# --dry-run prints every step and remote command and connects to nothing.
# Not root on the board (USER@ other than root): privileged commands run
# with sudo -n. Exit status: 0 deployed, 1 rolled back (or the rollback
# failed too), 2 config refused, 3 ssh or copy failed before any change,
# 64 usage.
set -euo pipefail
package=$(cd "$(dirname "$0")/.." && pwd)

dry=0
config=
mode=
deb=
bin_dir=
port=
identity=
timeout=20
target=
extra=()
usage() { sed -n '5,6p' "$0" | sed 's/^# \{0,1\}//'; echo "  (scripts/deploy.sh --help for more)"; }
die_usage() { echo "deploy.sh: $*" >&2; usage >&2; exit 64; }
set_mode() { [ -z "$mode" ] || die_usage "give one of --build-on-target, --package, --bin-dir"; mode=$1; }
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) dry=1 ;;
        --config) config=${2:?--config needs a file}; shift ;;
        --build-on-target) set_mode build ;;
        --package) set_mode package; deb=${2:?--package needs a .deb}; shift ;;
        --bin-dir) set_mode bin; bin_dir=${2:?--bin-dir needs a directory}; shift ;;
        --port) port=${2:?--port needs a number}; shift ;;
        --identity) identity=${2:?--identity needs a key file}; shift ;;
        --timeout) timeout=${2:?--timeout needs seconds}; shift ;;
        --ssh-option) extra+=(-o "${2:?--ssh-option needs an option}"); shift ;;
        -h | --help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die_usage "unknown option $1" ;;
        *) [ -z "$target" ] || die_usage "one host only"; target=$1 ;;
    esac
    shift
done
[ -n "$target" ] || die_usage "no host"
[ -n "$mode$config" ] || die_usage "nothing to deploy: give --config, --package, --bin-dir or --build-on-target"
case "$timeout" in '' | *[!0-9]*) die_usage "--timeout takes whole seconds" ;; esac
[ -z "$config" ] || [ -f "$config" ] || die_usage "no config $config"
[ -z "$deb" ] || [ -f "$deb" ] || die_usage "no package $deb"
if [ "$mode" = bin ]; then
    for exe in boardd boardctl; do [ -x "$bin_dir/$exe" ] || die_usage "no $bin_dir/$exe"; done
fi

# Privileged commands: as root, or by sudo -n (no password prompt in BatchMode).
user=$(id -un)
case "$target" in *@*) user=${target%%@*} ;; esac
S=
[ "$user" = root ] || S="sudo -n "

note() { echo "deploy.sh: $*"; }
step() { echo "== $*"; }
ctl=$(mktemp -d /tmp/boardd-deploy-ssh.XXXXXX)
ssh_opts=(-o BatchMode=yes -o ControlPath="$ctl/master" -o ConnectTimeout=10 "${extra[@]}")
[ -z "$port" ] || ssh_opts+=(-p "$port")
[ -z "$identity" ] || ssh_opts+=(-i "$identity" -o IdentitiesOnly=yes)
# remote COMMAND: runs the shell command on the board (printed first).
remote() {
    echo "+ ssh $target: $1"
    [ $dry = 1 ] && return 0
    ssh "${ssh_opts[@]}" "$target" "$1"
}
# quiet COMMAND: the same, printed, its output kept for the caller.
quiet() {
    echo "+ ssh $target: $1" >&2
    [ $dry = 1 ] && return 0
    ssh "${ssh_opts[@]}" "$target" "$1"
}
# send LOCAL REMOTE: copies a file to the board over the same connection.
send() {
    echo "+ copy $1 -> $target:$2"
    [ $dry = 1 ] && return 0
    ssh "${ssh_opts[@]}" "$target" "cat > '$2'" < "$1"
}

rtmp=
cleanup() {
    if [ $dry = 0 ] && [ -S "$ctl/master" ]; then
        [ -z "$rtmp" ] || ssh "${ssh_opts[@]}" "$target" "${S}rm -rf '$rtmp'" 2> /dev/null || true
        ssh "${ssh_opts[@]}" -O exit "$target" 2> /dev/null || true
    fi
    rm -rf "$ctl"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ $dry = 1 ] && note "dry run: every step is printed, nothing is copied, run or changed"
step "connect to $target (one ControlMaster connection for every step)"
echo "+ ssh -M $target (BatchMode${port:+, port $port}${identity:+, key $identity})"
if [ $dry = 0 ]; then
    ssh "${ssh_opts[@]}" -o ControlMaster=yes -o ControlPersist=600 -fN "$target" ||
        { echo "deploy.sh: cannot connect to $target" >&2; exit 3; }
fi
if [ $dry = 1 ]; then
    rtmp=/tmp/boardd-deploy.XXXXXX
    echo "+ ssh $target: mktemp -d /tmp/boardd-deploy.XXXXXX"
else
    rtmp=$(quiet "mktemp -d /tmp/boardd-deploy.XXXXXX") || { echo "deploy.sh: no temporary directory on $target" >&2; exit 3; }
fi

# 1. What is new goes to $rtmp; the boardd that will run checks the config.
step "copy what is new to $target:$rtmp (nothing installed yet)"
new_boardd=boardd
rbin=
case "$mode" in
    package)
        send "$deb" "$rtmp/boardd.deb" || exit 3
        remote "dpkg-deb -x '$rtmp/boardd.deb' '$rtmp/pkg'" || exit 3
        new_boardd=$rtmp/pkg/usr/bin/boardd
        ;;
    bin)
        remote "mkdir -p '$rtmp/bin' '$rtmp/tree/scripts' '$rtmp/tree/packaging'" || exit 3
        for f in "$bin_dir/boardd:bin/boardd" "$bin_dir/boardctl:bin/boardctl" \
            "$package/scripts/install.sh:tree/scripts/install.sh" \
            "$package/packaging/boardd.service:tree/packaging/boardd.service" \
            "$package/packaging/boardd.yaml:tree/packaging/boardd.yaml" \
            "$package/packaging/network.conf:tree/packaging/network.conf"; do
            send "${f%%:*}" "$rtmp/${f#*:}" || exit 3
        done
        remote "chmod 755 '$rtmp/bin/boardd' '$rtmp/bin/boardctl' '$rtmp/tree/scripts/install.sh'" || exit 3
        rbin=$rtmp/bin
        new_boardd=$rbin/boardd
        ;;
    build)
        # The checkout (without build directories and packages) into
        # ~/boardloop-build, kept between deploys so a build is incremental.
        echo "+ tar -C $package --exclude=./.build* --exclude=./out -cf - . | ssh $target: mkdir -p boardloop-build && tar -C boardloop-build -xf -"
        if [ $dry = 0 ]; then
            tar -C "$package" --exclude='./.build*' --exclude=./out --exclude=./.git -cf - . |
                ssh "${ssh_opts[@]}" "$target" "mkdir -p boardloop-build && tar -C boardloop-build -xf -" || exit 3
        fi
        step "build on $target (swift build -c release, the static Swift runtime, as install.sh does)"
        flags="-c release --static-swift-stdlib --scratch-path .build-static"
        remote "cd boardloop-build && swift build $flags --product boardd && swift build $flags --product boardctl" ||
            { echo "deploy.sh: the build on $target failed: nothing installed" >&2; exit 3; }
        remote "mkdir -p '$rtmp/tree/scripts' '$rtmp/tree/packaging' && cp boardloop-build/scripts/install.sh '$rtmp/tree/scripts/' && cp boardloop-build/packaging/boardd.service boardloop-build/packaging/boardd.yaml boardloop-build/packaging/network.conf '$rtmp/tree/packaging/'" || exit 3
        rbin=\$HOME/boardloop-build/.build-static/release
        new_boardd=$rbin/boardd
        ;;
esac
if [ -n "$config" ]; then
    send "$config" "$rtmp/boardd.yaml" || exit 3
    step "check the config with the boardd that will run it (before anything changes)"
    echo "+ ssh $target: $new_boardd --check --config $rtmp/boardd.yaml"
    if [ $dry = 0 ]; then
        if ! out=$(ssh "${ssh_opts[@]}" "$target" "$new_boardd --check --config '$rtmp/boardd.yaml'" 2>&1); then
            # Its errors name the file given here, not the copy.
            printf '%s\n' "$out" | sed "s|$rtmp/boardd.yaml|$config|g" >&2
            echo "deploy.sh: $config does not check on $target: refused; nothing was installed or restarted" >&2
            exit 2
        fi
        note "$config: OK"
    fi
fi

# 2. The install, remembering what to put back.
prev_version=
rolled=()
if [ "$mode" = package ]; then
    step "install the package (apt-get install, the conffile kept)"
    [ $dry = 1 ] || prev_version=$(quiet "dpkg-query -W -f='\${Version}' boardd 2> /dev/null || true")
    new_version=$(dpkg-deb -f "$deb" Version)
    [ $dry = 1 ] || note "installed now: ${prev_version:-none}; deploying $new_version"
    remote "${S}mkdir -p /var/lib/boardd-deploy && ${S}cp '$rtmp/boardd.deb' '/var/lib/boardd-deploy/boardd_$new_version.deb'" || exit 3
    if ! remote "${S}env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades -o Dpkg::Options::=--force-confold '$rtmp/boardd.deb'"; then
        failed="apt-get install of $(basename "$deb") failed"
    fi
elif [ -n "$mode" ]; then
    step "install the binaries (scripts/install.sh --bin-dir: /usr/local/bin, the previous kept as *.previous)"
    remote "for b in boardd boardctl; do if [ -f /usr/local/bin/\$b ]; then ${S}cp -p /usr/local/bin/\$b /usr/local/bin/\$b.previous; else ${S}rm -f /usr/local/bin/\$b.previous; fi; done" || exit 3
    if ! remote "${S}bash '$rtmp/tree/scripts/install.sh' --bin-dir \"$rbin\""; then
        failed="scripts/install.sh on $target failed"
    fi
fi
if [ -n "$config" ] && [ -z "${failed:-}" ]; then
    step "install the config (written beside, renamed over; the previous kept as boardd.yaml.previous)"
    remote "${S}mkdir -p /etc/boardd && ${S}install -m 0644 '$rtmp/boardd.yaml' /etc/boardd/boardd.yaml.deploy-tmp && if [ -f /etc/boardd/boardd.yaml ]; then ${S}cp -p /etc/boardd/boardd.yaml /etc/boardd/boardd.yaml.previous; else ${S}rm -f /etc/boardd/boardd.yaml.previous; fi && ${S}mv -f /etc/boardd/boardd.yaml.deploy-tmp /etc/boardd/boardd.yaml" ||
        failed="installing the config failed"
fi

# 3. Restart and wait for READY.
# up: restarts boardd, waits for active, asks boardctl status; says why not.
up() {
    step "restart boardd and wait for it (systemctl is-active for ${timeout}s, then boardctl status)"
    # reset-failed first: a boardd that failed again and again (the unit's
    # start limit) would refuse the restart, the rollback's too.
    remote "${S}systemctl reset-failed boardd; ${S}systemctl restart boardd" || { why="systemctl restart boardd failed"; return 1; }
    echo "+ ssh $target: ${S}systemctl is-active --quiet boardd (every second, at most ${timeout}s)"
    if [ $dry = 0 ]; then
        local waited=0
        until ssh "${ssh_opts[@]}" "$target" "${S}systemctl is-active --quiet boardd"; do
            waited=$((waited + 1))
            [ $waited -le "$timeout" ] || { why="boardd not active within ${timeout}s"; return 1; }
            sleep 1
        done
        note "active after ${waited}s"
    fi
    remote "${S}boardctl status" || { why="boardctl status failed"; return 1; }
}
# roll_back: the previous package or binaries and config back (what it put
# back in $rolled).
roll_back() {
    if [ "$mode" = package ]; then
        if [ $dry = 1 ]; then
            remote "${S}env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades -o Dpkg::Options::=--force-confold /var/lib/boardd-deploy/boardd_PREVIOUS_VERSION.deb"
        elif [ -z "$prev_version" ]; then
            rolled+=("no boardd package was installed before: $new_version left installed, nothing to go back to")
        elif remote "${S}env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades -o Dpkg::Options::=--force-confold /var/lib/boardd-deploy/boardd_$prev_version.deb"; then
            rolled+=("the package back to $prev_version (from /var/lib/boardd-deploy)")
        else
            rolled+=("NOT the package: no /var/lib/boardd-deploy/boardd_$prev_version.deb to go back to (it was not installed by deploy.sh)")
        fi
    elif [ -n "$mode" ]; then
        remote "for b in boardd boardctl; do if [ -f /usr/local/bin/\$b.previous ]; then ${S}mv -f /usr/local/bin/\$b.previous /usr/local/bin/\$b; else ${S}rm -f /usr/local/bin/\$b; fi; done" &&
            rolled+=("/usr/local/bin/boardd and boardctl back to the previous (removed where there was none)")
    fi
    if [ -n "$config" ]; then
        remote "if [ -f /etc/boardd/boardd.yaml.previous ]; then ${S}cp -p /etc/boardd/boardd.yaml /etc/boardd/boardd.yaml.failed; ${S}mv -f /etc/boardd/boardd.yaml.previous /etc/boardd/boardd.yaml; fi" &&
            rolled+=("/etc/boardd/boardd.yaml back to the previous (the deployed one kept as boardd.yaml.failed)")
    fi
    return 0
}
if [ -z "${failed:-}" ]; then
    if up; then
        if [ $dry = 1 ]; then
            step "only when boardd is not active within ${timeout}s or boardctl status fails: roll back, then restart and wait again"
            roll_back
            note "dry run: nothing was changed"
        else
            note "deployed to $target"
        fi
        exit 0
    fi
    failed=$why
fi

echo "deploy.sh: $failed: rolling back" >&2
remote "${S}systemctl status boardd --no-pager -n 15" >&2 || true
roll_back
first=$failed
if up; then
    back="the previous boardd is running again"
else
    back="the previous did not come up either: $why"
fi
echo "deploy.sh: deploy failed ($first); rolled back:" >&2
for r in "${rolled[@]}"; do echo "  - $r" >&2; done
echo "deploy.sh: $back" >&2
exit 1
