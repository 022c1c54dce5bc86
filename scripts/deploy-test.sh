#!/usr/bin/env bash
# Tests scripts/deploy.sh against a "board" that is the throwaway Debian 12
# root of scripts/deb-root.sh (docs/deploy.md, "Deploy over ssh").
#   scripts/deploy-test.sh [--bin-dir DIR] [--package FILE]
#
# Unpacks the root fresh into a temporary directory and boots it with
# systemd 252 as PID 1 (scripts/lib/boot.sh: systemd-nspawn, a private
# network namespace), as a board runs: the root's own ssh.service serves
# 127.0.0.1:22 there, with an ed25519 host key and client key made for the
# run (root may log in by key only), and deploy.sh runs on the host inside
# that network namespace only (nsenter --net). Every systemctl of deploy.sh
# is the real one: boardd.service as the package installs it, sandbox,
# Type=notify, watchdog and start limit included. The container is killed
# on every exit.
#
# The config is examples/demo.yaml (board: demo, mock chips: no GPIO).
# Scenarios, each check printing PASS or FAIL (exit 1 on any FAIL):
#  a. a first deploy with --package and a good config: postinst's own start
#     fails on the packaged config (board: auto, no board to detect here)
#     and says why; deploy.sh's restart (reset-failed first: the start limit)
#     makes it active, boardctl status shows the config;
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
# Needs root and systemd-nspawn (systemd-container).
set -euo pipefail
package=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=
deb1=
while [ $# -gt 0 ]; do
    case "$1" in
        --bin-dir) bin_dir=$(cd "${2:?--bin-dir needs a directory}" && pwd); shift ;;
        --package) deb1=$(realpath "${2:?--package needs a .deb}"); shift ;;
        -h | --help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "deploy-test.sh: unknown option $1" >&2; exit 64 ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || { echo "deploy-test.sh: needs root (systemd-nspawn)" >&2; exit 1; }
started=$(date +%s)
note() { echo "deploy-test.sh: $*"; }
# shellcheck source=lib/checks.sh
. "$package/scripts/lib/checks.sh"
# shellcheck source=lib/root.sh
. "$package/scripts/lib/root.sh"

# shellcheck source=lib/boot.sh
. "$package/scripts/lib/boot.sh"

work=$(mktemp -d /tmp/boardloop-deploytest.XXXXXX)
root=$work/root
trap 'boot_stop; root_remove deploy-test.sh "$work"' EXIT
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
# sshd: a host key and a client key of this run, root by key only; the
# root's ssh.service reads the drop-in at boot.
rm -f "$root"/etc/ssh/ssh_host_*
ssh-keygen -q -t ed25519 -N '' -C deploy-test-host -f "$root/etc/ssh/ssh_host_ed25519_key"
ssh-keygen -q -t ed25519 -N '' -C deploy-test -f "$work/id_ed25519"
mkdir -p "$root/root/.ssh" && chmod 700 "$root/root/.ssh"
cp "$work/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
cat > "$root/etc/ssh/sshd_config.d/deploy-test.conf" << 'EOF'
# scripts/deploy-test.sh: keys only, this run's host key.
ListenAddress 127.0.0.1
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
HostKey /etc/ssh/ssh_host_ed25519_key
EOF
port=22
echo "127.0.0.1 $(cut -d' ' -f1,2 "$root/etc/ssh/ssh_host_ed25519_key.pub")" > "$work/known_hosts"
if boot_start boardd-deploy-test 60 2> "$work/boot.log"; then
    pass "the board booted: $(inbox systemctl --version | head -n 1) as PID 1, in $(( $(date +%s) - t )) s"
else
    fail "the board did not boot"
    sed 's/^/    /' "$work/boot.log"
    exit 1
fi
# The user pi: a key login (no password: '*', not a locked '!', which sshd
# refuses without PAM), sudo without a password.
inbox useradd --create-home --shell /bin/bash pi
inbox usermod -p '*' pi
echo 'pi ALL=(ALL) NOPASSWD: ALL' > "$root/etc/sudoers.d/pi"
chmod 440 "$root/etc/sudoers.d/pi"
mkdir -p "$root/home/pi/.ssh"
cp "$work/id_ed25519.pub" "$root/home/pi/.ssh/authorized_keys"
inbox chown -R pi:pi /home/pi/.ssh
chmod 700 "$root/home/pi/.ssh"
# in_net COMMAND...: runs it on the host, in the board's network namespace.
in_net() { timeout --kill-after=5 300 nsenter --target "$leader" --net "$@"; }
ssh_test=(ssh -o BatchMode=yes -o UserKnownHostsFile="$work/known_hosts" -i "$work/id_ed25519" -p "$port" root@127.0.0.1)
for _ in $(seq 50); do in_net "${ssh_test[@]}" true 2> /dev/null && break; sleep 0.2; done
if in_net "${ssh_test[@]}" 'systemctl is-system-running; readlink /proc/1/exe' > "$work/which.txt" 2>&1 &&
    grep -qx -e running -e degraded "$work/which.txt" && grep -q '/lib/systemd/systemd$' "$work/which.txt"; then
    pass "ssh.service of the board on 127.0.0.1:$port (its network namespace); the session's systemctl talks to systemd, PID 1 ($(head -n 1 "$work/which.txt"))"
else
    fail "sshd of the board on 127.0.0.1:$port"
    sed 's/^/    /' "$work/which.txt"
    inbox journalctl -u ssh.service -n 20 --no-pager | sed 's/^/    /'
    exit 1
fi
note "board ready in $(( $(date +%s) - t )) s"

deploy_as() {
    local who=$1
    shift
    in_net "$package/scripts/deploy.sh" --port "$port" --identity "$work/id_ed25519" --timeout 10 \
        --ssh-option UserKnownHostsFile="$work/known_hosts" "$@" "$who@127.0.0.1"
}
deploy() { deploy_as root "$@"; }
inroot() { inbox "$@"; }
# boardd_pid: boardd.service's main process (in the board), empty when none.
boardd_pid() { local p; p=$(inroot systemctl show --property=MainPID --value boardd.service 2> /dev/null); [ "${p:-0}" = 0 ] || echo "$p"; }
is_active() { inroot systemctl is-active --quiet boardd; }
version_of() { inroot dpkg-query -W -f='${Version}' boardd 2> /dev/null; }
# runs PID EXE: the process PID (of the board) lives and runs EXE.
runs() { [ -n "$1" ] && [ "$(inroot readlink "/proc/$1/exe" 2> /dev/null)" = "$2" ]; }
show() { sed 's/^/    /' "$1"; }

echo "== a. first deploy: --package $(basename "$deb1") --config (the demo)"
t=$(date +%s)
logins() { inroot journalctl -u ssh.service -o cat --no-pager | grep -c 'Accepted publickey' || true; }
logins_before=$(logins)
if deploy --package "$deb1" --config "$good" > "$work/a.log" 2>&1; then pass "deploy.sh exits 0 ($(( $(date +%s) - t )) s)"; else fail "deploy.sh exit status"; show "$work/a.log"; fi
check "package $v1 installed" test "$(version_of)" = "$v1"
check "postinst's start on the packaged config failed, and it said why" grep -q 'boardd: boardd.service did not start' "$work/a.log"
check "one ssh login for all of its $(grep -c '^+ \(ssh\|copy\) ' "$work/a.log") remote commands and copies (the ControlMaster)" \
    test "$(( $(logins) - logins_before ))" = 1
check "the config installed as /etc/boardd/boardd.yaml" cmp -s "$good" "$root/etc/boardd/boardd.yaml"
check "boardd active (Type=notify: READY=1 came)" is_active
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
untouched() { [ "$(boardd_pid)" = "$pid_a" ] && runs "$pid_a" /usr/bin/boardd; }
check "the running boardd untouched (same pid $pid_a, active)" untouched
is_active || fail "boardd still active"
check "the old config in place" cmp -s "$work/config.before" "$root/etc/boardd/boardd.yaml"
if [ "$rc" = 2 ]; then echo "    (what it said:)"; grep -A 20 "^$bad:" "$work/b.log" | sed 's/^/    /'; else show "$work/b.log"; fi

echo "== c. a package whose boardd cannot start (0.0.2-1, a stub) and a new config"
t=$(date +%s)
rc=0
deploy --package "$deb2" --config "$good2" > "$work/c.log" 2>&1 || rc=$?
check "exit 1 (it was $rc, $(( $(date +%s) - t )) s)" test "$rc" = 1
check "it said why: the restart failed (the stub exits at once; systemd fails the job)" grep -q 'systemctl restart boardd failed: rolling back' "$work/c.log"
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
check "systemd runs that unit: $(inroot systemctl show --property=FragmentPath --value boardd.service)" \
    test "$(inroot systemctl show --property=FragmentPath --value boardd.service)" = /usr/local/lib/systemd/system/boardd.service
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
check "no temporary directory left on the board" test -z "$(inroot sh -c 'ls -d /tmp/boardd-deploy.* 2> /dev/null' || true)"
[ "$rc" = 0 ] || show "$work/g.log"

boot_stop
note "took $(( $(date +%s) - started )) s"
echo "deploy-test: $passed passed, $failed failed"
[ "$failed" = 0 ]
