#!/usr/bin/env bash
# Tests scripts/deploy.sh against a "board" that is the throwaway Debian 12
# root of scripts/deb-root.sh (docs/deploy.md, "Deploy over ssh").
#   scripts/deploy-test.sh [--bin-dir DIR] [--package FILE]
#
# Unpacks the root fresh into a temporary directory, mounts /proc, /dev and
# /dev/pts in it, and runs the root's own sshd there by chroot, on 127.0.0.1
# and a free port, with an ed25519 key made for the run (root may log in by
# key only). sshd and every process of the root are killed, and the mounts
# undone, on every exit.
#
# systemd cannot run here (no systemd as PID 1 in a container, no
# systemd-nspawn), so the root gets a TEST DOUBLE of systemctl, installed by
# this test only, in /usr/local/sbin (first on the ssh session's PATH): it
# reads ExecStartPre=, ExecStart= and ExecStopPost= from boardd.service where
# systemd would find it, starts boardd in the background (as root, not as the
# user boardd; no sandbox, no watchdog), its pid in /run/boardd.pid, and
# calls it active once boardd has logged its READY line ("ready: every loop
# is running") and the process lives. The systemd paths of deploy.sh are
# exercised through this double here, not through systemd.
#
# The config is examples/demo.yaml (board: demo, mock chips: no GPIO).
# Scenarios, each check printing PASS or FAIL (exit 1 on any FAIL):
#  a. a first deploy with --package and a good config: active, boardctl
#     status shows the config;
#  b. a broken config: refused with its FILE:LINE:COLUMN errors, the running
#     boardd untouched (same pid, the old config in place);
#  c. a package whose boardd passes --check but exits 1 when run: rolled
#     back to the previous package and config, the previous boardd running,
#     exit 1;
#  d. --dry-run (of each install kind): the steps printed, nothing changed
#     (checksums of the installed files, the package version, the pid);
#  e. --bin-dir with good binaries (install.sh on the board, /usr/local/bin),
#     then a --bin-dir whose boardd is a stub that exits 1: rolled back to
#     the *.previous binaries;
#  f. as the user pi (not root; sudo without a password, as on Raspberry Pi
#     OS): a config deployed, its privileged steps by sudo -n.
# --bin-dir DIR: the release boardd and boardctl to use (else .build-static's,
# built by package-deb.sh); --package FILE: a .deb of them already built.
# Needs root (chroot, mount).
set -euo pipefail
package=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=
deb1=
while [ $# -gt 0 ]; do
    case "$1" in
        --bin-dir) bin_dir=$(cd "${2:?--bin-dir needs a directory}" && pwd); shift ;;
        --package) deb1=$(realpath "${2:?--package needs a .deb}"); shift ;;
        -h | --help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "deploy-test.sh: unknown option $1" >&2; exit 64 ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || { echo "deploy-test.sh: needs root (chroot, mount)" >&2; exit 1; }
started=$(date +%s)
note() { echo "deploy-test.sh: $*"; }
# shellcheck source=lib/checks.sh
. "$package/scripts/lib/checks.sh"
# shellcheck source=lib/root.sh
. "$package/scripts/lib/root.sh"

work=$(mktemp -d /tmp/boardloop-deploytest.XXXXXX)
root=$work/root
# Processes whose root directory is the test's root (sshd, its sessions,
# boardd started by the double): found by their /proc/PID/root.
root_pids() {
    local p
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/root" 2> /dev/null)" = "$root" ] && echo "${p#/proc/}"
    done
    return 0
}
cleanup() {
    local pids
    pids=$(root_pids)
    [ -z "$pids" ] || kill $pids 2> /dev/null || true
    sleep 0.5
    pids=$(root_pids)
    [ -z "$pids" ] || kill -KILL $pids 2> /dev/null || true
    root_remove deploy-test.sh "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The packages: this tree's (0.0.1-1), and 0.0.2-1 whose boardd is a stub
# that passes --check but exits 1 when run.
t=$(date +%s)
if [ -z "$deb1" ]; then
    if [ -z "$bin_dir" ]; then
        deb1=$("$package/scripts/package-deb.sh" --version 0.0.1-1 --out "$work/debs")
        bin_dir=$package/.build-static/release
    else
        deb1=$("$package/scripts/package-deb.sh" --version 0.0.1-1 --bin-dir "$bin_dir" --out "$work/debs")
    fi
fi
dpkg-deb -x "$deb1" "$work/deb1"
# The binaries of the package given, when no --bin-dir.
[ -n "$bin_dir" ] || bin_dir=$work/deb1/usr/bin
v1=$(dpkg-deb -f "$deb1" Version)
mkdir -p "$work/stub"
cat > "$work/stub/boardd" << 'EOF'
#!/bin/sh
# A boardd that cannot start (scripts/deploy-test.sh): it passes any
# --check, and exits 1 at once when run.
case " $* " in *" --check "*) echo "stub: OK"; exit 0 ;; esac
echo "stub boardd: cannot start" >&2
exit 1
EOF
chmod 755 "$work/stub/boardd"
cp "$bin_dir/boardctl" "$work/stub/boardctl"
tree=$work/repack
dpkg-deb -R "$deb1" "$tree"
cp "$work/stub/boardd" "$tree/usr/bin/boardd"
sed -i 's/^Version: .*/Version: 0.0.2-1/' "$tree/DEBIAN/control"
(cd "$tree" && sed -i "s|^[0-9a-f]*  usr/bin/boardd\$|$(md5sum usr/bin/boardd)|" DEBIAN/md5sums)
deb2=$work/debs/boardd_0.0.2-1_$(dpkg --print-architecture).deb
mkdir -p "$work/debs"
dpkg-deb --root-owner-group -Zgzip -z1 --build "$tree" "$deb2" > /dev/null
note "packages ready in $(( $(date +%s) - t )) s ($(basename "$deb1"), $(basename "$deb2") with the stub)"

# The configs: the demo, the demo with one line more, and a broken one.
good=$work/good.yaml
good2=$work/good2.yaml
bad=$work/bad.yaml
{ echo "# deploy-test.sh: the first config"; cat "$package/examples/demo.yaml"; } > "$good"
{ echo "# deploy-test.sh: the second config"; cat "$package/examples/demo.yaml"; } > "$good2"
sed 's/initial: off, safe: off/initial: offf, safe: off/' "$good" > "$bad"

# The board.
t=$(date +%s)
root_unpack
[ -x "$root/usr/sbin/sshd" ] || { echo "deploy-test.sh: no sshd in $tarball (scripts/deb-root.sh too old?)" >&2; exit 1; }
# The systemctl test double (see the top of this file).
mkdir -p "$root/usr/local/sbin"
cat > "$root/usr/local/sbin/systemctl" << 'EOF'
#!/bin/sh
# TEST DOUBLE of systemctl for boardd.service, installed by
# scripts/deploy-test.sh only: systemd does not run in the test's root.
# Starts the unit's ExecStart= in the background (as root; no sandbox, no
# watchdog), pid in /run/boardd.pid, log in /run/boardd.log; active once
# boardd logged "ready: every loop is running" and its process lives.
pidf=/run/boardd.pid
log=/run/boardd.log
verb=
quiet=0
lines=10
for a in "$@"; do
    case "$a" in
        --quiet | -q) quiet=1 ;;
        -n*) lines=${a#-n} ;;
        -*) ;;
        *) [ -n "$verb" ] || verb=$a ;;
    esac
done
unitfile() {
    for d in /etc/systemd/system /run/systemd/system /usr/local/lib/systemd/system /lib/systemd/system; do
        [ -f "$d/boardd.service" ] && { echo "$d/boardd.service"; return 0; }
    done
    return 1
}
execline() { sed -n "s/^$1=//p" "$(unitfile)" | head -n 1; }
alive() {
    pid=$(cat "$pidf" 2> /dev/null) || return 1
    [ -r "/proc/$pid/stat" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$pid/stat"
}
active() { alive && grep -q 'ready: every loop is running' "$log" 2> /dev/null; }
stop() {
    if alive; then
        kill -TERM "$pid"
        i=0
        while alive && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
        alive && kill -KILL "$pid"
    fi
    rm -f "$pidf"
    post=$(execline ExecStopPost)
    [ -z "$post" ] || $post >> "$log" 2>&1 || true
}
start() {
    unitfile > /dev/null || { echo "Unit boardd.service not found." >&2; exit 5; }
    pre=$(execline ExecStartPre)
    if [ -n "$pre" ] && ! $pre > /run/boardd.pre.log 2>&1; then
        cat /run/boardd.pre.log > "$log"
        echo "Job for boardd.service failed because the control process exited with error code." >&2
        exit 1
    fi
    mkdir -p /run/boardd
    RUNTIME_DIRECTORY=/run/boardd setsid $(execline ExecStart) > "$log" 2>&1 < /dev/null &
    echo $! > "$pidf"
}
case "$verb" in
    start) alive || start ;;
    stop) stop ;;
    restart) stop; start ;;
    try-restart) if alive; then stop; start; fi ;;
    is-active)
        if active; then s=active; elif [ -f "$pidf" ]; then s=failed; else s=inactive; fi
        [ $quiet = 1 ] || echo $s
        [ $s = active ] ;;
    status)
        if active; then echo "boardd.service (systemctl test double): active, pid $pid"
        else echo "boardd.service (systemctl test double): not active"; fi
        tail -n "$lines" "$log" 2> /dev/null
        active ;;
    daemon-reload | enable | disable | reload) ;;
    *) echo "systemctl (test double): $verb not supported" >&2; exit 1 ;;
esac
EOF
chmod 755 "$root/usr/local/sbin/systemctl"
# sshd: a host key and a client key of this run, root by key only.
rm -f "$root"/etc/ssh/ssh_host_*
ssh-keygen -q -t ed25519 -N '' -C deploy-test-host -f "$root/etc/ssh/ssh_host_ed25519_key"
ssh-keygen -q -t ed25519 -N '' -C deploy-test -f "$work/id_ed25519"
mkdir -p "$root/root/.ssh" && chmod 700 "$root/root/.ssh"
cp "$work/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
# The user pi: a key login (no password: '*', not a locked '!', which sshd
# refuses without PAM), sudo without a password.
inroot_setup() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
inroot_setup useradd --create-home --shell /bin/bash pi
inroot_setup usermod -p '*' pi
echo 'pi ALL=(ALL) NOPASSWD: ALL' > "$root/etc/sudoers.d/pi"
chmod 440 "$root/etc/sudoers.d/pi"
mkdir -p "$root/home/pi/.ssh"
cp "$work/id_ed25519.pub" "$root/home/pi/.ssh/authorized_keys"
inroot_setup chown -R pi:pi /home/pi/.ssh
chmod 700 "$root/home/pi/.ssh"
mkdir -p "$root/run/sshd"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$root/etc/ssh/ssh_host_ed25519_key.pub")" > "$work/known_hosts"
chroot "$root" /usr/sbin/sshd -D -e -p "$port" -o ListenAddress=127.0.0.1 -o PermitRootLogin=prohibit-password \
    -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no -o UsePAM=no \
    -o HostKey=/etc/ssh/ssh_host_ed25519_key -o PidFile=/run/sshd.pid 2> "$work/sshd.log" &
ssh_test=(ssh -o BatchMode=yes -o UserKnownHostsFile="$work/known_hosts" -i "$work/id_ed25519" -p "$port" root@127.0.0.1)
for _ in $(seq 50); do "${ssh_test[@]}" true 2> /dev/null && break; sleep 0.2; done
if "${ssh_test[@]}" 'command -v systemctl' > "$work/which.txt" 2>&1 && grep -qx /usr/local/sbin/systemctl "$work/which.txt"; then
    pass "sshd in the root on 127.0.0.1:$port; the ssh session finds the systemctl double first"
else
    fail "sshd in the root on 127.0.0.1:$port"
    sed 's/^/    /' "$work/which.txt" "$work/sshd.log"
    exit 1
fi
note "board ready in $(( $(date +%s) - t )) s"

deploy_as() {
    local who=$1
    shift
    "$package/scripts/deploy.sh" --port "$port" --identity "$work/id_ed25519" --timeout 10 \
        --ssh-option UserKnownHostsFile="$work/known_hosts" "$@" "$who@127.0.0.1"
}
deploy() { deploy_as root "$@"; }
inroot() { chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 HOME=/root "$@"; }
boardd_pid() { cat "$root/run/boardd.pid" 2> /dev/null; }
is_active() { inroot systemctl is-active --quiet boardd; }
version_of() { inroot dpkg-query -W -f='${Version}' boardd 2> /dev/null; }
# runs PID EXE: the process PID lives and runs EXE (a path in the root).
runs() { [ -n "$1" ] && [ "$(readlink "/proc/$1/exe" 2> /dev/null)" = "$root$2" ]; }
show() { sed 's/^/    /' "$1"; }

echo "== a. first deploy: --package $(basename "$deb1") --config (the demo)"
t=$(date +%s)
logins() { grep -c 'Accepted publickey' "$work/sshd.log" || true; }
logins_before=$(logins)
if deploy --package "$deb1" --config "$good" > "$work/a.log" 2>&1; then pass "deploy.sh exits 0 ($(( $(date +%s) - t )) s)"; else fail "deploy.sh exit status"; show "$work/a.log"; fi
check "package $v1 installed" test "$(version_of)" = "$v1"
check "one ssh login for all of its $(grep -c '^+ \(ssh\|copy\) ' "$work/a.log") remote commands and copies (the ControlMaster)" \
    test "$(( $(logins) - logins_before ))" = 1
check "the config installed as /etc/boardd/boardd.yaml" cmp -s "$good" "$root/etc/boardd/boardd.yaml"
check "boardd active (systemctl double: READY logged, process alive)" is_active
pid_a=$(boardd_pid)
check "the running boardd is /usr/bin/boardd (pid $pid_a)" runs "$pid_a" /usr/bin/boardd
check "deploy.sh printed boardctl status, with the config" grep -q '^config: *.*/etc/boardd/boardd.yaml' "$work/a.log"
check "boardctl status on the board: board demo" grep -q '^board: *demo' <<< "$(inroot boardctl status 2>&1)"

echo "== b. a broken config"
cp -p "$root/etc/boardd/boardd.yaml" "$work/config.before"
rc=0
deploy --config "$bad" > "$work/b.log" 2>&1 || rc=$?
check "refused: exit 2 (it was $rc)" test "$rc" = 2
check "its error printed as FILE:LINE:COLUMN of the file given" grep -q "^$bad:[0-9]*:[0-9]*: error: lines.led.output.initial" "$work/b.log"
check "it said nothing was installed or restarted" grep -q 'nothing was installed or restarted' "$work/b.log"
check "no restart step was run" test "$(grep -c 'systemctl restart' "$work/b.log")" = 0
check "the running boardd untouched (same pid $pid_a, active)" test "$(boardd_pid)" = "$pid_a" -a -d "/proc/$pid_a"
is_active || fail "boardd still active"
check "the old config in place" cmp -s "$work/config.before" "$root/etc/boardd/boardd.yaml"
if [ "$rc" = 2 ]; then echo "    (what it said:)"; grep -A 20 "^$bad:" "$work/b.log" | sed 's/^/    /'; else show "$work/b.log"; fi

echo "== c. a package whose boardd cannot start (0.0.2-1, a stub) and a new config"
t=$(date +%s)
rc=0
deploy --package "$deb2" --config "$good2" > "$work/c.log" 2>&1 || rc=$?
check "exit 1 (it was $rc, $(( $(date +%s) - t )) s)" test "$rc" = 1
check "it said why: not active within the timeout" grep -q 'boardd not active within 10s' "$work/c.log"
check "it said it rolled the package back to $v1" grep -q "the package back to $v1" "$work/c.log"
check "it said it rolled the config back" grep -q 'boardd.yaml back to the previous' "$work/c.log"
check "package $v1 installed again" test "$(version_of)" = "$v1"
check "/usr/bin/boardd is $v1's again" cmp -s "$work/deb1/usr/bin/boardd" "$root/usr/bin/boardd"
check "the previous config back" cmp -s "$good" "$root/etc/boardd/boardd.yaml"
check "the deployed config kept as boardd.yaml.failed" cmp -s "$good2" "$root/etc/boardd/boardd.yaml.failed"
check "boardd active again" is_active
pid_c=$(boardd_pid)
check "the previous binary running again (pid $pid_c, /usr/bin/boardd)" runs "$pid_c" /usr/bin/boardd
check "it said the previous boardd is running again" grep -q 'the previous boardd is running again' "$work/c.log"
if [ "$rc" = 1 ]; then echo "    (what it said:)"; sed -n '/: rolling back$/p; /^deploy.sh: deploy failed/,$p' "$work/c.log" | sed 's/^/    /'; else show "$work/c.log"; fi

echo "== d. --dry-run changes nothing"
sums() {
    (cd "$root" && sha256sum usr/bin/boardd usr/bin/boardctl etc/boardd/boardd.yaml 2> /dev/null
        ls -la usr/local/bin etc/boardd var/lib/boardd-deploy 2> /dev/null)
    version_of
    boardd_pid
}
sums > "$work/sums.before"
ok=1
for kind in "--package $deb2" "--bin-dir $work/stub" "--build-on-target"; do
    rc=0
    # shellcheck disable=SC2086
    deploy --dry-run $kind --config "$good2" > "$work/d.log" 2>&1 || rc=$?
    what=${kind%% *}
    check "--dry-run $what exits 0" test "$rc" = 0
    check "--dry-run $what prints the check, the install, the restart" \
        grep -q -e '--check --config' "$work/d.log"
    grep -q 'systemctl restart boardd' "$work/d.log" || { fail "--dry-run $what: no restart step printed"; ok=0; }
    case "$what" in
        --package) grep -q 'apt-get install' "$work/d.log" || { fail "--dry-run --package: no apt-get install printed"; ok=0; } ;;
        --bin-dir) grep -q 'install.sh.* --bin-dir' "$work/d.log" || { fail "--dry-run --bin-dir: no install.sh printed"; ok=0; } ;;
        --build-on-target) grep -q 'swift build' "$work/d.log" || { fail "--dry-run --build-on-target: no swift build printed"; ok=0; } ;;
    esac
    check "--dry-run $what: nothing changed on the board (checksums, version, pid)" cmp -s "$work/sums.before" <(sums)
done
[ $ok = 1 ] && pass "--dry-run printed each kind's install step"
echo "    (--dry-run --package, as printed:)"
deploy --dry-run --package "$deb2" --config "$good2" 2>&1 | sed 's/^/    /'

echo "== e. --bin-dir: good binaries (install.sh on the board), then a stub boardd"
rc=0
deploy --bin-dir "$bin_dir" --config "$good" > "$work/e.log" 2>&1 || rc=$?
check "--bin-dir deploy exits 0 (it was $rc)" test "$rc" = 0
check "boardd and boardctl in /usr/local/bin" cmp -s "$bin_dir/boardd" "$root/usr/local/bin/boardd"
check "the unit install.sh wrote runs /usr/local/bin/boardd" grep -q '^ExecStart=/usr/local/bin/boardd ' "$root/usr/local/lib/systemd/system/boardd.service"
pid_e=$(boardd_pid)
check "active, running /usr/local/bin/boardd (pid $pid_e)" runs "$pid_e" /usr/local/bin/boardd
is_active || fail "boardd active after --bin-dir"
[ "$rc" = 0 ] || show "$work/e.log"
rc=0
deploy --bin-dir "$work/stub" > "$work/f.log" 2>&1 || rc=$?
check "a stub --bin-dir: exit 1 (it was $rc)" test "$rc" = 1
check "it said it rolled the binaries back" grep -q 'boardd and boardctl back to the previous' "$work/f.log"
check "/usr/local/bin/boardd is the previous again" cmp -s "$bin_dir/boardd" "$root/usr/local/bin/boardd"
pid_f=$(boardd_pid)
check "the previous binary running again (pid $pid_f)" runs "$pid_f" /usr/local/bin/boardd
is_active || fail "boardd active after the --bin-dir rollback"
[ "$rc" = 1 ] || show "$work/f.log"

echo "== f. as the user pi, by sudo -n: a config"
pid_before=$(boardd_pid)
rc=0
deploy_as pi --config "$good2" > "$work/g.log" 2>&1 || rc=$?
check "deploy.sh as pi exits 0 (it was $rc)" test "$rc" = 0
check "its privileged steps ran with sudo -n" grep -q 'sudo -n systemctl restart boardd' "$work/g.log"
check "the config installed, owned by root" test "$(stat -c %U "$root/etc/boardd/boardd.yaml")" = root -a -z "$(cmp "$good2" "$root/etc/boardd/boardd.yaml" 2>&1)"
check "restarted (pid $pid_before -> $(boardd_pid)), active" test "$(boardd_pid)" != "$pid_before"
is_active || fail "boardd active after the deploy as pi"
check "boardctl status printed (by sudo)" grep -q '^config: *.*/etc/boardd/boardd.yaml' "$work/g.log"
check "no temporary directory left on the board" test -z "$(ls -d "$root"/tmp/boardd-deploy.* 2> /dev/null)"
[ "$rc" = 0 ] || show "$work/g.log"

note "took $(( $(date +%s) - started )) s"
echo "deploy-test: $passed passed, $failed failed"
[ "$failed" = 0 ]
