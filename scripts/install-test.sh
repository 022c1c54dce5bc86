#!/usr/bin/env bash
# Tests scripts/install.sh in temporary DESTDIRs with the binaries of BIN_DIR
# (default: the debug build's): the tree it installs against the list
# below, modes and the unit's paths; a second run that changes nothing and
# says so; a config of the user's never overwritten; the realtime and
# network drop-ins written when the config asks for them and removed when
# it no longer does; another prefix; --uninstall leaving the config alone.
# Exit status 0 when every check passes.
#   scripts/install-test.sh [BIN_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
bin_dir=${1:-$(swift build --show-bin-path)}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
install() { scripts/install.sh --no-build --bin-dir "$bin_dir" "$@" > "$root/out" 2>&1 || { cat "$root/out" >&2; fail "install.sh $* exited $?"; }; }
tree() { (cd "$1" && find . \( -type f -o -type l \) -printf '%P %m\n' | sort); }
expect_tree() { # DIR, then the expected "path mode" lines on stdin
    local got want
    got=$(tree "$1")
    want=$(sort)
    if [ "$got" = "$want" ]; then pass "$2"; else fail "$2"; diff <(echo "$want") <(echo "$got") >&2 || true; fi
}
says() { if grep -q -- "$1" "$root/out"; then pass "$2"; else fail "$2: no '$1' in:"; cat "$root/out" >&2; fi; }

# 1. A fresh install.
d=$root/a
install --destdir "$d"
expect_tree "$d" "a fresh install's tree" <<'EOF'
etc/boardd/boardd.yaml 644
etc/udev/rules.d/60-boardd-gpio.rules 644
usr/local/bin/boardctl 755
usr/local/bin/boardd 755
usr/local/lib/systemd/system/boardd.service 644
usr/local/share/bash-completion/completions/boardctl 644
usr/local/share/bash-completion/completions/boardd 644
usr/local/share/fish/vendor_completions.d/boardctl.fish 644
usr/local/share/fish/vendor_completions.d/boardd.fish 644
usr/local/share/zsh/site-functions/_boardctl 644
usr/local/share/zsh/site-functions/_boardd 644
EOF
cmp -s "$bin_dir/boardd" "$d/usr/local/bin/boardd" && cmp -s "$bin_dir/boardctl" "$d/usr/local/bin/boardctl" \
    && pass "the binaries are the given ones" || fail "the binaries differ from $bin_dir's"
cmp -s packaging/boardd.yaml "$d/etc/boardd/boardd.yaml" && pass "the example config" || fail "the config is not packaging/boardd.yaml"
grep -q '^ExecStart=/usr/local/bin/boardd --config /etc/boardd/boardd.yaml$' "$d/usr/local/lib/systemd/system/boardd.service" \
    && pass "the unit runs the installed boardd" || fail "the unit's ExecStart"
grep -q 'complete .*-F _boardd boardd' "$d/usr/local/share/bash-completion/completions/boardd" \
    && grep -q '#compdef boardctl' "$d/usr/local/share/zsh/site-functions/_boardctl" \
    && grep -q "complete -c 'boardd'" "$d/usr/local/share/fish/vendor_completions.d/boardd.fish" \
    && pass "completions for bash, zsh and fish" || fail "a completion script is not what its shell reads"
says "would run, where there is no user boardd: useradd --system" "--destdir prints the user it would make"
says "would run: systemctl daemon-reload" "--destdir prints the systemctl it would run"
if command -v systemd-analyze > /dev/null; then
    # Offline: the unit's own syntax (its binary is not on this system's path).
    if systemd-analyze verify "$d/usr/local/lib/systemd/system/boardd.service" 2>&1 | grep -v 'is not executable' | grep -q .; then
        fail "systemd-analyze verify reports:"
        systemd-analyze verify "$d/usr/local/lib/systemd/system/boardd.service" >&2 || true
    else
        pass "systemd-analyze verify: nothing but the binary's path"
    fi
fi

# 2. Again: nothing changes, and it says so.
before=$(tree "$d"; find "$d" -type f -exec md5sum {} + | sort)
install --destdir "$d"
after=$(tree "$d"; find "$d" -type f -exec md5sum {} + | sort)
[ "$before" = "$after" ] && pass "a second run leaves the tree as it was" || fail "a second run changed the tree"
says "nothing changed" "a second run says nothing changed"
grep -q '^install.sh: installed' "$root/out" && fail "a second run installed something" || true

# 3. The user's config is never overwritten; the drop-ins follow it.
printf '# mine\n' >> "$d/etc/boardd/boardd.yaml"
cp "$d/etc/boardd/boardd.yaml" "$root/mine"
install --destdir "$d"
cmp -s "$root/mine" "$d/etc/boardd/boardd.yaml" && pass "an edited config is kept" || fail "the edited config was overwritten"
cp examples/pump-valve.yaml "$d/etc/boardd/boardd.yaml"
install --destdir "$d"
grep -q '^LimitRTPRIO=99$' "$d/etc/systemd/system/boardd.service.d/realtime.conf" 2> /dev/null \
    && grep -q '^AmbientCapabilities=CAP_SYS_NICE' "$d/etc/systemd/system/boardd.service.d/realtime.conf" \
    && pass "a worker with priority: gets the realtime drop-in" || fail "no realtime drop-in for examples/pump-valve.yaml"
[ ! -e "$d/etc/systemd/system/boardd.service.d/network.conf" ] && pass "no network drop-in without a network command" \
    || fail "a network drop-in for a config without network commands"
sed 's|/usr/bin/aplay|/usr/bin/curl|' examples/doorbell.yaml > "$d/etc/boardd/boardd.yaml"
install --destdir "$d"
[ ! -e "$d/etc/systemd/system/boardd.service.d/realtime.conf" ] && pass "the realtime drop-in goes when the config has no such worker" \
    || fail "the realtime drop-in stayed"
grep -q '^RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6$' "$d/etc/systemd/system/boardd.service.d/network.conf" 2> /dev/null \
    && pass "a command running curl gets the network drop-in" || fail "no network drop-in for a curl command"
printf '\nmqtt: { broker: 192.168.1.10 }\n' | cat examples/doorbell.yaml - > "$d/etc/boardd/boardd.yaml"
install --destdir "$d"
grep -q '^RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6$' "$d/etc/systemd/system/boardd.service.d/network.conf" 2> /dev/null \
    && pass "an mqtt: block gets the network drop-in" || fail "no network drop-in for a config with an MQTT broker"
cp examples/doorbell.yaml "$d/etc/boardd/boardd.yaml"
install --destdir "$d"
[ ! -e "$d/etc/systemd/system/boardd.service.d" ] && pass "the drop-ins and their directory go when not asked for" \
    || fail "boardd.service.d stayed"

# 4. --uninstall: everything but the config, and a second one removes nothing.
install --destdir "$d" --uninstall
expect_tree "$d" "--uninstall leaves the config alone" <<'EOF'
etc/boardd/boardd.yaml 644
EOF
says "kept /etc/boardd/boardd.yaml" "--uninstall says it kept the config"
install --destdir "$d" --uninstall
says "nothing to remove: nothing changed" "a second --uninstall removes nothing"

# 5. Another prefix: binaries under it, the unit in /etc/systemd/system.
d=$root/b
install --destdir "$d" --prefix /opt/boardd
[ -x "$d/opt/boardd/bin/boardd" ] && grep -q '^ExecStopPost=/opt/boardd/bin/boardd --safe-outputs' "$d/etc/systemd/system/boardd.service" \
    && pass "--prefix /opt/boardd: binaries and unit paths" || fail "--prefix /opt/boardd"
install --destdir "$d" --prefix /opt/boardd --uninstall
expect_tree "$d" "--prefix /opt/boardd --uninstall" <<'EOF'
etc/boardd/boardd.yaml 644
EOF

if [ $failures = 0 ]; then echo "install-test: every check passed"; else echo "install-test: $failures check(s) failed" >&2; exit 1; fi
