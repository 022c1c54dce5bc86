# shellcheck shell=bash
# The throwaway Debian 12 root booted with systemd as PID 1, as a board
# runs it (deb-test.sh, deploy-test.sh); sourced, bash. Uses $root (the
# root, unpacked by root_unpack of lib/root.sh) and $work (where the logs
# go).
#
# boot_start boots it with `systemd-nspawn --keep-unit --register=no
# --private-network --boot` in the background, in a cgroup of its own (so
# that two runs at once do not share one), and waits, bounded, until its
# systemd says the boot is done. inbox runs a command in the container:
# `nsenter` into every namespace of its PID 1 (systemctl, journalctl, apt
# there talk to that systemd). boot_stop kills the container (its PID 1,
# and with it every process of its PID namespace), waits for nspawn, and
# removes the cgroup; call it on every exit (it is safe to call twice).
# Needs root and systemd-nspawn (systemd-container).

boot_pid=
leader=
boot_cgroups=

# boot_start NAME [SECONDS]: boots $root as machine NAME; sets $boot_pid
# (nspawn's pid) and $leader (the container's PID 1, as the host sees it).
# Returns 1, with the end of nspawn's log, when it is not up within
# SECONDS (default 60).
boot_start() {
    local name=$1 limit=${2:-60} h cg state p
    command -v systemd-nspawn > /dev/null || { echo "boot: no systemd-nspawn (apt-get install systemd-container)" >&2; return 1; }
    boot_cgroups=
    # A hybrid host (this kind: v1 controllers, name=systemd and the
    # unified v2 tree) or a pure cgroup v2 one (not tried here).
    local trees="/sys/fs/cgroup/systemd /sys/fs/cgroup/unified"
    [ "$(stat -fc %T /sys/fs/cgroup 2> /dev/null)" = cgroup2fs ] && trees=/sys/fs/cgroup
    for h in $trees; do
        [ -f "$h/cgroup.procs" ] || continue
        cg=$h/boardloop-$name.$$
        if mkdir -p "$cg" 2> /dev/null; then boot_cgroups="$boot_cgroups $cg"; fi
    done
    (
        for cg in $boot_cgroups; do echo "$BASHPID" > "$cg/cgroup.procs" || true; done
        exec systemd-nspawn --keep-unit --register=no --private-network --console=passive --quiet \
            --directory="$root" --machine="$name" --boot
    ) > "$work/nspawn.log" 2>&1 < /dev/null &
    boot_pid=$!
    leader=
    for _ in $(seq $((limit * 10))); do
        for p in $(pgrep -P "$boot_pid" 2> /dev/null); do
            # The child of nspawn that is PID 1 of its own PID namespace.
            grep -q '^NSpid:.*[[:space:]]1$' "/proc/$p/status" 2> /dev/null && leader=$p
        done
        [ -n "$leader" ] && break
        kill -0 "$boot_pid" 2> /dev/null || break
        sleep 0.1
    done
    if [ -z "$leader" ]; then
        echo "boot: systemd-nspawn did not start the container" >&2
        tail -n 20 "$work/nspawn.log" >&2
        return 1
    fi
    # "running", or "degraded" when a unit of the root failed (listed);
    # nothing while its systemd has no socket yet.
    local deadline=$((SECONDS + limit))
    state=
    while [ $SECONDS -lt $deadline ]; do
        state=$(inbox_for $((deadline - SECONDS + 1)) systemctl is-system-running --wait 2> /dev/null) || true
        case "$state" in running | degraded) break ;; esac
        sleep 0.1
    done
    case "$state" in
        running) ;;
        degraded) echo "boot: degraded: $(inbox systemctl --failed --plain --no-legend 2> /dev/null | tr '\n' ' ')" >&2 ;;
        *)
            echo "boot: not up within ${limit}s (systemctl is-system-running: ${state:-no answer})" >&2
            tail -n 20 "$work/nspawn.log" >&2
            return 1
            ;;
    esac
}

# inbox_for SECONDS COMMAND...: runs it in the container with a clean
# environment, killed after SECONDS.
inbox_for() {
    local limit=$1
    shift
    timeout --kill-after=5 "$limit" nsenter --target "$leader" --all /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 HOME=/root \
        DEBIAN_FRONTEND=noninteractive SYSTEMD_PAGER= SYSTEMD_COLORS=0 "$@"
}
# inbox COMMAND...: the same, killed after 120 s.
inbox() { inbox_for 120 "$@"; }

# host_pid PID: the host's pid of the container's process PID (empty when
# none).
host_pid() {
    local p
    for p in /proc/[0-9]*; do
        grep -q "^NSpid:.*[[:space:]]$1$" "$p/status" 2> /dev/null || continue
        # In the container's PID namespace (that of its PID 1).
        [ "$(readlink "$p/ns/pid")" = "$(readlink "/proc/$leader/ns/pid")" ] && { echo "${p#/proc/}"; return 0; }
    done
    return 0
}

# boot_stop: kills the container and waits (bounded) for nspawn to exit.
boot_stop() {
    local cg
    if [ -n "$boot_pid" ]; then
        [ -z "$leader" ] || kill -KILL "$leader" 2> /dev/null || true
        for _ in $(seq 100); do
            kill -0 "$boot_pid" 2> /dev/null || break
            sleep 0.1
        done
        kill -KILL "$boot_pid" 2> /dev/null || true
        wait "$boot_pid" 2> /dev/null || true
        boot_pid=
        leader=
    fi
    # The cgroups, deepest first (systemd made its own under them).
    for cg in $boot_cgroups; do
        [ ! -d "$cg" ] || find "$cg" -depth -type d -exec rmdir {} \; 2> /dev/null || true
    done
    boot_cgroups=
    return 0
}
