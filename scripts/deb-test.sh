#!/usr/bin/env bash
# Tests the Debian package in a throwaway Debian 12 root booted with systemd
# as PID 1 (docs/deploy.md, "Debian package"): install, the service under
# the real systemd, upgrade, remove and purge, with apt as a user runs it.
#   scripts/deb-test.sh [--bin-dir DIR]
#
# Builds the package twice with scripts/package-deb.sh (--bin-dir DIR: of the
# boardd and boardctl there, else it builds them), the second time with a
# higher version, and repacks that one with a changed config and a higher
# version again. Unpacks the root scripts/deb-root.sh keeps (debootstrap,
# cached) into a temporary directory and boots it with systemd-nspawn
# (scripts/lib/boot.sh: private network, killed on every exit), then checks
# in it, after lintian on the package: the install (postinst enables and
# starts the service; the packaged config, board: auto, has no board to
# find there, so the start fails, postinst says why, and the start limit
# stops the retries); the files, the user and groups, the conffile,
# boardd --version and --demo, systemd-analyze verify and security. Then
# boardd.service on the demo config (mock chips: the root has no GPIO):
# active only after READY=1, its STATUS=, a quiet ExecStartPre=; the sandbox
# as systemd applies it (uid, capabilities, NoNewPrivs and seccomp from
# /proc/PID/status, read-only paths, an AF_INET socket refused); reload
# applied and refused; the watchdog (boardd SIGSTOPped: killed,
# ExecStopPost= run, restarted); stop with safe values then ExecStopPost=;
# a broken config stopped after a few tries (and, found by boardd itself,
# exit 78 and no restart); an mqtt: config naming the
# network drop-in, and running with it; two upgrades keeping an edited
# config (a running boardd restarted); a remove stopping it and keeping the
# config; a purge removing it with the user and groups (but a gpio group
# that was there before). Each check prints PASS or FAIL; exits 1 on any
# FAIL. Needs root and systemd-nspawn (systemd-container).
set -euo pipefail
package=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=
while [ $# -gt 0 ]; do
    case "$1" in
        --bin-dir) bin_dir=$(cd "${2:?--bin-dir needs a directory}" && pwd); shift ;;
        -h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "deb-test.sh: unknown option $1" >&2; exit 64 ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || { echo "deb-test.sh: needs root (systemd-nspawn)" >&2; exit 1; }
started=$(date +%s)
note() { echo "deb-test.sh: $*"; }

# shellcheck source=lib/checks.sh
. "$package/scripts/lib/checks.sh"
# shellcheck source=lib/root.sh
. "$package/scripts/lib/root.sh"
# shellcheck source=lib/boot.sh
. "$package/scripts/lib/boot.sh"

work=$(mktemp -d /tmp/boardloop-debtest.XXXXXX)
root=$work/root
trap 'boot_stop; root_remove deb-test.sh "$work"' EXIT
trap 'exit 130' INT TERM

# The packages: this tree's, the same with a higher version, and that one
# repacked with a changed config and a higher version again (dpkg then has
# an edited conffile that the package changed too).
t=$(date +%s)
if [ -z "$bin_dir" ]; then
    # package-deb.sh builds them (.build-static/release), once.
    deb1=$("$package/scripts/package-deb.sh" --version 0.0.1-1 --out "$work/debs")
    bin_dir=$package/.build-static/release
else
    deb1=$("$package/scripts/package-deb.sh" --version 0.0.1-1 --bin-dir "$bin_dir" --out "$work/debs")
fi
deb2=$("$package/scripts/package-deb.sh" --version 0.0.2-1 --bin-dir "$bin_dir" --out "$work/debs")
tree=$work/repack
dpkg-deb -R "$deb2" "$tree"
printf '%s\n' "# A line the next version added." >> "$tree/etc/boardd/boardd.yaml"
sed -i 's/^Version: .*/Version: 0.0.3-1/' "$tree/DEBIAN/control"
(cd "$tree" && sed -i "s|^[0-9a-f]*  etc/boardd/boardd.yaml\$|$(md5sum etc/boardd/boardd.yaml)|" DEBIAN/md5sums)
deb3=$work/debs/boardd_0.0.3-1_$(dpkg --print-architecture).deb
dpkg-deb --root-owner-group -Zgzip -z1 --build "$tree" "$deb3" > /dev/null
note "packages built in $(( $(date +%s) - t )) s"

# lintian: nothing but what the package's overrides name (docs/deploy.md).
if command -v lintian > /dev/null; then
    if lintian --pedantic --info --fail-on error,warning,info,pedantic "$deb1" > "$work/lintian.log" 2>&1; then
        pass "lintian --pedantic --info: nothing but the overrides ($(grep -c '^boardd:' "$package/packaging/deb/lintian-overrides") of them)"
    else
        fail "lintian --pedantic --info"
        grep -v 'root privileges' "$work/lintian.log" | sed 's/^/    /'
    fi
else
    fail "lintian is not installed (apt-get install lintian)"
fi

# The root, booted.
t=$(date +%s)
root_unpack
mkdir -p "$root/root/debs"
cp "$deb1" "$deb2" "$deb3" "$root/root/debs/"
# The configs: the demo (mock chips), the same with a command that tries an
# AF_INET socket from inside the sandbox (bash's /dev/tcp), one line more
# (a reload), a broken one, and one with an mqtt: block (no broker).
mkdir -p "$root/root/configs"
cfg=$root/root/configs
cp "$package/examples/demo.yaml" "$cfg/demo.yaml"
{
    sed 's/^tasks:$/tasks:\n  probe: { every: 1s, do: [ run: probe ] }/' "$package/examples/demo.yaml"
    printf '%s\n' "" "commands:" "  probe:" \
        "    argv: [\"/bin/bash\", \"-c\", \"exec 3<>/dev/tcp/127.0.0.1/9 && echo made-\$((6 * 7))\"]"
} > "$cfg/probe.yaml"
{ cat "$package/examples/demo.yaml"; echo "# deb-test.sh: a reload"; } > "$cfg/demo2.yaml"
sed 's/initial: off, safe: off/initial: offf, safe: off/' "$package/examples/demo.yaml" > "$cfg/bad.yaml"
{ cat "$package/examples/demo.yaml"; printf '%s\n' "" "mqtt:" "  broker: 127.0.0.1" "  port: 1883"; } > "$cfg/mqtt.yaml"
note "root unpacked in $(( $(date +%s) - t )) s ($tarball)"
t=$(date +%s)
if boot_start boardd-deb-test 60 2> "$work/boot.log"; then
    pass "the root booted: $(inbox systemctl --version | head -n 1), PID 1 of its container, in $(( $(date +%s) - t )) s$( [ -s "$work/boot.log" ] && echo " ($(head -c 200 "$work/boot.log"))")"
else
    fail "the root did not boot"
    sed 's/^/    /' "$work/boot.log"
    exit 1
fi
inroot() { inbox "$@"; }
apt() { inroot apt-get -y -q -o Dpkg::Options::=--force-confold "$@"; }
has_user() { inroot getent passwd "$1" > /dev/null; }
has_group() { inroot getent group "$1" > /dev/null; }
version_of() { inroot dpkg-query -W -f='${Version}' boardd 2> /dev/null; }
status_of() { inroot dpkg-query -W -f='${db:Status-Abbrev}' boardd 2> /dev/null | tr -d ' '; }
# prop NAME: boardd.service's property NAME, as systemctl show gives it.
prop() { inroot systemctl show --property="$1" --value boardd.service; }
main_pid() { prop MainPID; }
is_active() { inroot systemctl is-active --quiet boardd.service; }
# settled: the unit is failed or inactive, with no restart pending.
settled() { case "$(prop ActiveState)/$(prop SubState)" in failed/failed | inactive/dead) return 0 ;; esac; return 1; }
# wait_for SECONDS COMMAND...: until the command succeeds, at most SECONDS.
wait_for() {
    local limit=$(( $1 * 5 ))
    shift
    for _ in $(seq "$limit"); do "$@" && return 0; sleep 0.2; done
    return 1
}
# mark, then journal: the journal of boardd.service since the mark.
# tries: the checks ExecStartPre= ran since the mark (each ends with
# "FILE: N error(s)"; systemd's "Starting" line is not logged for every try).
tries() { jgrep -c '^/etc/boardd/boardd.yaml: [0-9]* errors\{0,1\}$' || true; }
mark() { cursor=$(inroot journalctl -n 1 -o cat --show-cursor | sed -n 's/^-- cursor: //p'); }
journal() { inroot journalctl -u boardd.service --after-cursor="$cursor" --no-pager -o cat; }
# jgrep ARGS...: grep in that journal (kept in a file: a grep that stops
# early must not end journalctl with SIGPIPE, which pipefail would count).
jgrep() { journal > "$work/journal.txt"; grep "$@" "$work/journal.txt"; }
journal_has() { jgrep -q -- "$1"; }
put_config() { inroot install -m 0644 "/root/configs/$1" /etc/boardd/boardd.yaml; }
show() { sed 's/^/    /' "$1"; }
# start_config FILE: the config in place, the unit's failures forgotten,
# started; 0 when it is active.
start_config() {
    put_config "$1"
    inroot systemctl reset-failed boardd.service 2> /dev/null || true
    inroot systemctl restart boardd.service > "$work/start.log" 2>&1
}

echo "== install $(basename "$deb1") (postinst enables and starts boardd.service)"
mark
if apt install "/root/debs/$(basename "$deb1")" > "$work/install.log" 2>&1; then
    pass "apt-get install ./$(basename "$deb1") (Depends resolved in the root)"
else
    fail "apt-get install ./$(basename "$deb1")"
    show "$work/install.log"
fi
check "installed: version 0.0.1-1" test "$(version_of)" = 0.0.1-1
check "postinst enabled boardd.service" test "$(inroot systemctl is-enabled boardd.service 2>&1)" = enabled
# The packaged config has board: auto, and the root no board to detect:
# ExecStartPre='s check fails, so postinst's start did.
if grep -q 'boardd: boardd.service did not start' "$work/install.log" &&
    grep -qF 'journalctl -u boardd -n 20' "$work/install.log" &&
    grep -qF 'boardd --check --config /etc/boardd/boardd.yaml' "$work/install.log"; then
    pass "the start failed (board: auto, no board here): postinst said why and what to run: $(grep -m 1 'did not start' "$work/install.log")"
else
    fail "postinst's message for a failed start"
    show "$work/install.log"
fi
check "no 'Could not execute systemctl' left in postinst's output" test "$(grep -c 'Could not execute systemctl' "$work/install.log")" = 0
if wait_for 30 settled; then
    pass "the broken config at the start: $(prop NRestarts) restart(s), then systemd stopped trying ($(prop ActiveState), result $(prop Result))"
else
    fail "the broken config restarts still after 30 s ($(prop ActiveState)/$(prop SubState), $(prop NRestarts) restarts)"
fi
n=$(tries)
check "at most 3 tries (StartLimitBurst=3): $n checks failed" test "$n" -ge 1 -a "$n" -le 3
check "the journal says why each try failed (the config's error) and that systemd gave up" \
    test "$(jgrep -c 'error')" -ge 1 -a "$(jgrep -c 'Start request repeated too quickly')" = 1
jgrep -m 2 -e 'error' | sed 's/^/    (journal) /' || true

missing=
for f in /usr/bin/boardd /usr/bin/boardctl /lib/systemd/system/boardd.service /lib/udev/rules.d/60-boardd-gpio.rules \
    /etc/boardd/boardd.yaml /usr/share/bash-completion/completions/boardd /usr/share/bash-completion/completions/boardctl \
    /usr/share/zsh/site-functions/_boardd /usr/share/zsh/site-functions/_boardctl \
    /usr/share/fish/vendor_completions.d/boardd.fish /usr/share/fish/vendor_completions.d/boardctl.fish \
    /usr/share/man/man1/boardd.1.gz /usr/share/man/man1/boardctl.1.gz /usr/share/doc/boardd/copyright /usr/share/doc/boardd/changelog.Debian.gz /usr/share/lintian/overrides/boardd \
    /usr/share/boardd/network.conf; do
    [ -f "$root$f" ] || missing="$missing $f"
done
check "files in place (binaries, unit, udev rule, config, completions, man pages, docs, the network drop-in)${missing:+: missing$missing}" test -z "$missing"
unit_file=$root/lib/systemd/system/boardd.service
check "the unit runs /usr/bin/boardd" grep -q '^ExecStart=/usr/bin/boardd ' "$unit_file"
check "no /usr/local left in the unit" test "$(grep -c /usr/local "$unit_file")" = 0
check "user boardd (system user, no login shell)" test "$(inroot getent passwd boardd | cut -d: -f7)" = /usr/sbin/nologin
check "group boardd exists" has_group boardd
check "group gpio exists" has_group gpio
check "boardd is in the group gpio" grep -qx gpio <<< "$(inroot id -nG boardd | tr ' ' '\n')"
check "/etc/boardd/boardd.yaml is a conffile" grep -q '^ /etc/boardd/boardd.yaml ' <<< "$(inroot dpkg-query -W -f='${Conffiles}' boardd)"
inroot boardd --version > "$work/version.txt" 2>&1 || true
check "boardd --version runs in the root: $(head -n 1 "$work/version.txt")" grep -q '^boardd [0-9]' "$work/version.txt"
check "boardd loads libmosquitto in the root (Depends: libmosquitto1): $(tail -n 1 "$work/version.txt")" grep -q '^MQTT: libmosquitto [0-9]' "$work/version.txt"
inroot boardctl --version > "$work/version.txt" 2>&1 || true
check "boardctl --version runs in the root" grep -q '^boardctl [0-9]' "$work/version.txt"
if inroot boardd --demo --for 2s > "$work/demo.log" 2>&1 && grep -q 'stopped:' "$work/demo.log"; then
    pass "boardd --demo --for 2s runs in the root ($(grep -c . "$work/demo.log") lines, ends stopped)"
else
    fail "boardd --demo --for 2s in the root"
    tail -n 10 "$work/demo.log" | sed 's/^/    /'
fi
if inroot systemd-analyze verify /lib/systemd/system/boardd.service > "$work/verify.log" 2>&1; then
    pass "systemd-analyze verify boardd.service$( [ -s "$work/verify.log" ] && echo " (said: $(head -c 200 "$work/verify.log" | tr '\n' ' '))")"
else
    fail "systemd-analyze verify boardd.service"
    show "$work/verify.log"
fi
inroot systemd-analyze security --no-pager boardd.service > "$work/security.log" 2>&1 || true
exposure=$(sed -n 's/.*Overall exposure level for boardd.service: \([0-9.]*\).*/\1/p' "$work/security.log")
check "systemd-analyze security boardd.service: ${exposure:-no score} (at most 1.5)" \
    awk -v e="${exposure:-99}" 'BEGIN { exit !(e <= 1.5) }'

echo "== boardd.service on the demo config (mock chips)"
mark
# systemd's debug log says when a notification came and what it did.
inroot systemd-analyze log-level debug
t0=$(date +%s%N)
if start_config demo.yaml; then
    pass "systemctl restart boardd: active in $(( ($(date +%s%N) - t0) / 1000000 )) ms (it returns once READY=1 came)"
else
    fail "systemctl restart boardd on the demo config"
    show "$work/start.log"
    inroot journalctl -u boardd.service -n 30 --no-pager | sed 's/^/    /'
fi
check "is-active: active" is_active
inroot systemd-analyze log-level info
journal > "$work/start.journal"
ready_line=$(grep -n -m 1 'Got notification message from PID [0-9]* (READY=1' "$work/start.journal" | cut -d: -f1)
running_line=$(grep -n -m 1 'Changed start -> running' "$work/start.journal" | cut -d: -f1)
start_line=$(grep -n -m 1 'Changed start-pre -> start' "$work/start.journal" | cut -d: -f1)
check "active only after READY=1: the main process started (journal line ${start_line:-?}), READY=1 came (line ${ready_line:-?}), then start -> running (line ${running_line:-?})" \
    test -n "$start_line" -a -n "$ready_line" -a -n "$running_line" -a "${start_line:-0}" -lt "${ready_line:-0}" -a "${ready_line:-0}" -lt "${running_line:-0}"
line=$(grep -m 1 -o 'Got notification message from PID [0-9]* (READY=1.*' "$work/start.journal" || true)
echo "    (journal) ${line:0:300}"
status_text=$(prop StatusText)
check "STATUS= shown by systemctl: '$status_text'" test -n "$status_text"
inroot systemctl status boardd.service --no-pager -n 0 > "$work/status.txt" 2>&1 || true
check "systemctl status shows it: $(grep -m 1 'Status:' "$work/status.txt" | sed 's/^ *//')" grep -q 'Status: "' "$work/status.txt"
pre_lines=$(jgrep -c -e '^board:' -e '^lines:' -e ': OK$' || true)
check "ExecStartPre='s check is quiet on a good config (no summary in the journal: $pre_lines lines)" test "$pre_lines" = 0
check "boardctl status (as root, in the root): board demo" grep -q '^board: *demo' <<< "$(inroot boardctl status 2>&1)"

echo "== the sandbox, as systemd applies it"
pid=$(main_pid)
hpid=$(host_pid "$pid")
st=$(cat "/proc/$hpid/status" 2> /dev/null || true)
field() { sed -n "s/^$1:[[:space:]]*//p" <<< "$st" | awk '{ print $1 }'; }
uid=$(inroot id -u boardd)
check "boardd (pid $pid) runs as the user boardd (uid $uid)" test "$(field Uid)" = "$uid"
check "no capability: CapEff $(field CapEff), CapPrm $(field CapPrm), CapBnd $(field CapBnd), CapAmb $(field CapAmb)" \
    test "$(field CapEff)$(field CapPrm)$(field CapBnd)$(field CapAmb)" = 0000000000000000000000000000000000000000000000000000000000000000
check "NoNewPrivs: $(field NoNewPrivs)" test "$(field NoNewPrivs)" = 1
check "seccomp: mode $(field Seccomp) (a filter)" test "$(field Seccomp)" = 2
# In boardd's own mount namespace (as root: only a read-only mount refuses).
in_ns() { timeout 10 nsenter --target "$hpid" --mount "$@"; }
ro=
for d in /usr/bin /etc/boardd /var/lib /root; do
    if in_ns touch "$d/.deb-test" 2> /dev/null; then ro="$ro $d(writable)"; in_ns rm -f "$d/.deb-test"; fi
done
check "read-only there: /usr/bin /etc/boardd /var/lib; /root not there (ProtectHome=)${ro:+:$ro}" test -z "$ro"
if in_ns touch /run/boardd/.deb-test 2> /dev/null; then
    in_ns rm -f /run/boardd/.deb-test
    pass "/run/boardd writable there (RuntimeDirectory=)"
else
    fail "/run/boardd not writable in boardd's namespace"
fi
mark
if start_config probe.yaml && wait_for 10 journal_has 'command probe.*exited'; then
    # made-42 only where the socket was made (the argv says made-$((6 * 7))).
    if journal_has 'Address family not supported by protocol' && ! journal_has 'made-42'; then
        line=$(jgrep -m 1 'Address family' || true)
        pass "a command's AF_INET socket refused: ${line:0:160}"
    else
        fail "a command of boardd made an AF_INET socket"
        journal | tail -n 10 | sed 's/^/    /'
    fi
else
    fail "the probe config did not run its command"
    journal | tail -n 10 | sed 's/^/    /'
fi

echo "== systemctl reload"
start_config demo.yaml || { fail "back to the demo config"; show "$work/start.log"; }
pid=$(main_pid)
put_config demo2.yaml
mark
if inroot systemctl reload boardd.service > "$work/reload.log" 2>&1; then pass "systemctl reload of a changed config exits 0"; else fail "systemctl reload of a changed config"; show "$work/reload.log"; fi
check "applied: boardctl status says 1 applied" grep -q 'reloads: *1 applied' <<< "$(inroot boardctl status 2>&1)"
check "the same boardd (pid $pid), active" test "$(main_pid)" = "$pid" -a "$(inroot systemctl is-active boardd.service)" = active
put_config bad.yaml
mark
rc=0
inroot systemctl reload boardd.service > "$work/reload.log" 2>&1 || rc=$?
check "systemctl reload of a broken config fails (exit $rc)" test "$rc" != 0
check "the journal has its error (FILE:LINE:COLUMN)" journal_has '/etc/boardd/boardd.yaml:[0-9]*:[0-9]*: error'
check "refused: boardctl status says 1 refused, the running config kept" grep -q 'reloads: *1 applied, 1 refused' <<< "$(inroot boardctl status 2>&1)"
check "the same boardd (pid $pid), still active" test "$(main_pid)" = "$pid" -a "$(inroot systemctl is-active boardd.service)" = active
jgrep -m 3 -e error -e refused | sed 's/^/    (journal) /' || true
put_config demo.yaml

echo "== the watchdog: boardd stopped by SIGSTOP"
pid=$(main_pid)
restarts=$(prop NRestarts)
mark
t0=$(date +%s)
kill -STOP "$(host_pid "$pid")"
restarted() { local p; p=$(main_pid); [ "$p" != 0 ] && [ "$p" != "$pid" ] && is_active; }
if wait_for 30 restarted; then
    pass "a new boardd (pid $pid -> $(main_pid)) active $(( $(date +%s) - t0 )) s after the SIGSTOP (WatchdogSec=5s, RestartSec=2s)"
else
    fail "no restart within 30 s of the SIGSTOP ($(prop ActiveState)/$(prop SubState))"
fi
check "systemd saw the watchdog timeout" journal_has 'Watchdog timeout'
check "ExecStopPost= ran boardd --safe-outputs (its safe values in the journal)" journal_has 'safe'
check "NRestarts counted it ($restarts -> $(prop NRestarts))" test "$(prop NRestarts)" -gt "$restarts"
jgrep -m 4 -e 'Watchdog' -e 'safe' -e 'Scheduled restart' | sed 's/^/    (journal) /' || true

echo "== systemctl stop"
mark
if inroot systemctl stop boardd.service > "$work/stop.log" 2>&1; then pass "systemctl stop boardd exits 0"; else fail "systemctl stop boardd"; show "$work/stop.log"; fi
check "inactive after a clean stop (result $(prop Result))" test "$(prop ActiveState)/$(prop Result)" = inactive/success
journal > "$work/stop.journal"
stop_line=$(grep -n -m 1 -i 'stopping' "$work/stop.journal" | cut -d: -f1)
post_line=$(grep -n -i 'safe' "$work/stop.journal" | tail -n 1 | cut -d: -f1)
check "boardd stopped (set its safe values) and then ExecStopPost= ran (journal lines ${stop_line:-?} then ${post_line:-?})" \
    test -n "$stop_line" -a -n "$post_line" -a "${post_line:-0}" -gt "${stop_line:-0}"
grep -i -e stopping -e safe "$work/stop.journal" | tail -n 4 | sed 's/^/    (journal) /' || true

echo "== a broken config: stopped after a few tries"
mark
rc=0
start_config bad.yaml || rc=$?
check "systemctl restart with a broken config fails (exit $rc)" test "$rc" != 0
if wait_for 30 settled; then
    pass "no restart loop: $(prop NRestarts) restart(s), then $(prop ActiveState)"
else
    fail "a broken config still restarts after 30 s"
fi
n=$(tries)
check "at most 3 tries ($n), the error each time, systemd's 'Start request repeated too quickly' once" \
    test "$n" -ge 1 -a "$n" -le 3 -a "$(jgrep -c 'lines.led.output.initial' || true)" -ge "$n" -a "$(jgrep -c 'Start request repeated too quickly' || true)" = 1
sleep 3
check "and none after ($(tries) tries, 3 s later)" test "$(tries)" = "$n"

echo "== a broken config found by boardd itself (ExecStartPre= emptied by a drop-in): exit 78, no restart"
inroot mkdir -p /etc/systemd/system/boardd.service.d
printf '%s\n' "[Service]" "ExecStartPre=" | inroot sh -c 'cat > /etc/systemd/system/boardd.service.d/no-check.conf'
inroot systemctl daemon-reload
mark
start_config bad.yaml || true
wait_for 15 settled || true
check "boardd exited 78 (systemd: $(prop ExecMainStatus)/$(prop Result))" test "$(prop ExecMainStatus)" = 78
sleep 3
n=$(jgrep -c 'not started (exit status 78)' || true)
check "RestartPreventExitStatus=78: no restart ($(prop NRestarts) restarts, $n run, 3 s later)" \
    test "$(prop NRestarts)" = 0 -a "$n" = 1
check "its journal line says so: $(jgrep -m 1 'not started' || true)" journal_has 'error(s); not started (exit status 78)'
inroot rm -f /etc/systemd/system/boardd.service.d/no-check.conf
inroot rmdir /etc/systemd/system/boardd.service.d
inroot systemctl daemon-reload

echo "== an mqtt: config under the packaged unit (no network)"
mark
start_config mqtt.yaml || { fail "start with an mqtt: block"; show "$work/start.log"; }
if wait_for 15 journal_has 'mqtt: cannot connect'; then
    line=$(jgrep -m 1 'mqtt: cannot connect' || true)
    if grep -qF '/usr/share/boardd/network.conf /etc/systemd/system/boardd.service.d/network.conf' <<< "$line"; then
        pass "the sandbox's refusal names the network drop-in to install"
    else
        fail "the sandbox's refusal does not name the drop-in"
    fi
    echo "    (journal) ${line:0:300}"
else
    fail "no mqtt: cannot connect line within 15 s"
    journal | tail -n 10 | sed 's/^/    /'
fi
inroot install -D -m 0644 /usr/share/boardd/network.conf /etc/systemd/system/boardd.service.d/network.conf
inroot systemctl daemon-reload
mark
inroot systemctl restart boardd.service > "$work/start.log" 2>&1 || { fail "restart with the network drop-in"; show "$work/start.log"; }
if wait_for 15 journal_has 'mqtt: cannot connect'; then
    line=$(jgrep -m 1 'mqtt: cannot connect' || true)
    check "with the shipped drop-in: the broker's refusal, not the sandbox's (${line##*: })" \
        test "$(grep -c 'Address family not supported' <<< "$line")" = 0
else
    fail "no mqtt: cannot connect line with the drop-in"
fi
inroot rm -f /etc/systemd/system/boardd.service.d/network.conf
inroot rmdir /etc/systemd/system/boardd.service.d
inroot systemctl daemon-reload
start_config demo.yaml || { fail "back to the demo config"; show "$work/start.log"; }

# upgrade DEB VERSION: apt-get install of DEB over what is there.
upgrade() {
    if apt install "/root/debs/$(basename "$1")" > "$work/upgrade.log" 2>&1; then
        pass "apt-get install ./$(basename "$1") with --force-confold"
    else
        fail "apt-get install ./$(basename "$1")"
        show "$work/upgrade.log"
    fi
    check "upgraded: version $2" test "$(version_of)" = "$2"
}
echo "== upgrade to $(basename "$deb2") (the same config), with /etc/boardd/boardd.yaml edited, boardd running"
edit="# An edit of this machine's own (deb-test.sh)."
printf '%s\n' "$edit" >> "$root/etc/boardd/boardd.yaml"
pid=$(main_pid)
upgrade "$deb2" 0.0.2-1
check "the edited config survived the upgrade" grep -qxF "$edit" "$root/etc/boardd/boardd.yaml"
check "user boardd kept over the upgrade" has_user boardd
check "the running boardd restarted on the new binary (pid $pid -> $(main_pid)), active" test "$(main_pid)" != "$pid" -a "$(inroot systemctl is-active boardd.service)" = active

echo "== upgrade to $(basename "$deb3") (its config changed too)"
upgrade "$deb3" 0.0.3-1
check "the edited config survived the upgrade" grep -qxF "$edit" "$root/etc/boardd/boardd.yaml"
check "the package's new config is beside it as boardd.yaml.dpkg-dist" \
    grep -qxF "# A line the next version added." "$root/etc/boardd/boardd.yaml.dpkg-dist"
check "active after the second upgrade" is_active

check "postinst ran three times, made the user once" test "$(grep -c '^boardd:' "$root/etc/passwd")" = 1
check "and noted each thing it made once" test "$(sort "$root/var/lib/boardd/created" | uniq -d | wc -l)" = 0

echo "== remove"
if apt remove boardd > "$work/remove.log" 2>&1; then pass "apt-get remove boardd"; else fail "apt-get remove boardd"; show "$work/remove.log"; fi
check "prerm stopped boardd: no boardd process left" test -z "$(inroot pgrep -x boardd)"
check "binaries and unit gone" test ! -e "$root/usr/bin/boardd" -a ! -e "$root/usr/bin/boardctl" -a ! -e "$root/lib/systemd/system/boardd.service"
check "systemd forgot the unit (daemon-reload): $(inroot systemctl show --property=LoadState --value boardd.service)" \
    test "$(inroot systemctl show --property=LoadState --value boardd.service)" = not-found
check "config kept, with the edit" grep -qxF "$edit" "$root/etc/boardd/boardd.yaml"
check "package in state config-files (dpkg's rc)" test "$(status_of)" = rc
check "user boardd kept by a remove" has_user boardd

echo "== purge"
if apt purge boardd > "$work/purge.log" 2>&1; then pass "apt-get purge boardd"; else fail "apt-get purge boardd"; show "$work/purge.log"; fi
check "/etc/boardd gone" test ! -e "$root/etc/boardd"
check "the enable link gone" test ! -e "$root/etc/systemd/system/multi-user.target.wants/boardd.service" -a ! -L "$root/etc/systemd/system/multi-user.target.wants/boardd.service"
# Gone, where getent still answers for root (a broken root is not "gone").
user_gone() { has_user root && ! has_user "$1"; }
group_gone() { has_group root && ! has_group "$1"; }
check "user boardd gone" user_gone boardd
check "group boardd gone" group_gone boardd
check "group gpio gone (postinst made it: the root had none)" group_gone gpio
check "boardd gone from dpkg's database" test "$(inroot dpkg-query -W -f='${Status}' boardd 2>&1 | grep -c 'no packages found')" = 1
check "/var/lib/boardd gone" test ! -e "$root/var/lib/boardd"

echo "== install and purge where the group gpio was there before (Raspberry Pi OS)"
inroot groupadd --system gpio
apt install "/root/debs/$(basename "$deb1")" > "$work/install2.log" 2>&1 || { fail "apt-get install again"; show "$work/install2.log"; }
check "boardd is in the group gpio that was there" grep -qx gpio <<< "$(inroot id -nG boardd | tr ' ' '\n')"
apt purge boardd > "$work/purge2.log" 2>&1 || { fail "apt-get purge again"; show "$work/purge2.log"; }
check "purge kept the group gpio it did not make" has_group gpio
check "purge removed the user boardd it made" user_gone boardd

boot_stop
note "took $(( $(date +%s) - started )) s"
echo "deb-test: $passed passed, $failed failed"
[ "$failed" = 0 ]
