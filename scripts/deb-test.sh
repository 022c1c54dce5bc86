#!/usr/bin/env bash
# Tests the Debian package in a throwaway Debian 12 root (docs/deploy.md,
# "Debian package"): install, upgrade, remove and purge, with apt as a user
# runs it.
#   scripts/deb-test.sh [--bin-dir DIR]
#
# Builds the package twice with scripts/package-deb.sh (--bin-dir DIR: of the
# boardd and boardctl there, else it builds them), the second time with a
# higher version, and repacks that one with a changed config and a higher
# version again. Unpacks the root scripts/deb-root.sh keeps (debootstrap, cached)
# into a temporary directory, mounts /proc, /dev and /dev/pts in it (unmounted on every
# exit), and checks in it, by chroot (after lintian on the package): the files, the user and groups, the
# conffile, boardd --version and --demo, systemd-analyze verify of the unit,
# that nothing started (systemd is not running there) and postinst said so;
# two upgrades keeping an edited config; a remove keeping it; a purge removing
# it with the user and groups (but a gpio group that was there before).
# Each check prints PASS or FAIL; exits 1 on any
# FAIL. Needs root (chroot, mount).
set -euo pipefail
package=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=
while [ $# -gt 0 ]; do
    case "$1" in
        --bin-dir) bin_dir=$(cd "${2:?--bin-dir needs a directory}" && pwd); shift ;;
        -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "deb-test.sh: unknown option $1" >&2; exit 64 ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || { echo "deb-test.sh: needs root (chroot, mount)" >&2; exit 1; }
started=$(date +%s)
note() { echo "deb-test.sh: $*"; }

# shellcheck source=lib/checks.sh
. "$package/scripts/lib/checks.sh"
# shellcheck source=lib/root.sh
. "$package/scripts/lib/root.sh"

work=$(mktemp -d /tmp/boardloop-debtest.XXXXXX)
root=$work/root
trap 'root_remove deb-test.sh "$work"' EXIT
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

# The root.
t=$(date +%s)
root_unpack
cp "$deb1" "$deb2" "$deb3" "$root/tmp/"
note "root unpacked in $(( $(date +%s) - t )) s ($tarball)"
# inroot COMMAND...: runs it in the root, with a clean environment.
inroot() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 HOME=/root \
    DEBIAN_FRONTEND=noninteractive "$@"; }
apt() { inroot apt-get -y -q -o Dpkg::Options::=--force-confold "$@"; }
# Whether a process of the host runs the root's boardd.
boardd_running() {
    local p
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/exe" 2> /dev/null)" = "$root/usr/bin/boardd" ] && return 0
    done
    return 1
}
has_user() { inroot getent passwd "$1" > /dev/null; }
has_group() { inroot getent group "$1" > /dev/null; }
version_of() { inroot dpkg-query -W -f='${Version}' boardd 2> /dev/null; }
status_of() { inroot dpkg-query -W -f='${db:Status-Abbrev}' boardd 2> /dev/null | tr -d ' '; }

echo "== install $(basename "$deb1")"
if apt install "/tmp/$(basename "$deb1")" > "$work/install.log" 2>&1; then
    pass "apt-get install ./$(basename "$deb1") (Depends resolved in the root)"
else
    fail "apt-get install ./$(basename "$deb1")"
    sed 's/^/    /' "$work/install.log"
fi
check "installed: version 0.0.1-1" test "$(version_of)" = 0.0.1-1
missing=
for f in /usr/bin/boardd /usr/bin/boardctl /lib/systemd/system/boardd.service /lib/udev/rules.d/60-boardd-gpio.rules \
    /etc/boardd/boardd.yaml /usr/share/bash-completion/completions/boardd /usr/share/bash-completion/completions/boardctl \
    /usr/share/zsh/site-functions/_boardd /usr/share/zsh/site-functions/_boardctl \
    /usr/share/fish/vendor_completions.d/boardd.fish /usr/share/fish/vendor_completions.d/boardctl.fish \
    /usr/share/man/man1/boardd.1.gz /usr/share/man/man1/boardctl.1.gz /usr/share/doc/boardd/copyright /usr/share/doc/boardd/changelog.Debian.gz /usr/share/lintian/overrides/boardd; do
    [ -f "$root$f" ] || missing="$missing $f"
done
check "files in place (binaries, unit, udev rule, config, completions, man pages, docs)${missing:+: missing$missing}" test -z "$missing"
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
    pass "systemd-analyze verify boardd.service${verify_note:-}$( [ -s "$work/verify.log" ] && echo " (said: $(head -c 200 "$work/verify.log" | tr '\n' ' '))")"
else
    fail "systemd-analyze verify boardd.service"
    sed 's/^/    /' "$work/verify.log"
fi
check "systemd not running: postinst said the service was not started" \
    grep -q 'systemd is not running here: boardd.service was not enabled or started' "$work/install.log"
if boardd_running; then fail "a boardd process was started"; else pass "no boardd process was started"; fi
check "not enabled (no multi-user.target.wants link)" test ! -e "$root/etc/systemd/system/multi-user.target.wants/boardd.service" -a ! -L "$root/etc/systemd/system/multi-user.target.wants/boardd.service"

# upgrade DEB VERSION: apt-get install of DEB over what is there.
upgrade() {
    if apt install "/tmp/$(basename "$1")" > "$work/upgrade.log" 2>&1; then
        pass "apt-get install ./$(basename "$1") with --force-confold"
    else
        fail "apt-get install ./$(basename "$1")"
        sed 's/^/    /' "$work/upgrade.log"
    fi
    check "upgraded: version $2" test "$(version_of)" = "$2"
}
echo "== upgrade to $(basename "$deb2") (the same config), with /etc/boardd/boardd.yaml edited"
edit="# An edit of this machine's own (deb-test.sh)."
printf '%s\n' "$edit" >> "$root/etc/boardd/boardd.yaml"
upgrade "$deb2" 0.0.2-1
check "the edited config survived the upgrade" grep -qxF "$edit" "$root/etc/boardd/boardd.yaml"
check "user boardd kept over the upgrade" has_user boardd
if boardd_running; then fail "the upgrade started boardd"; else pass "systemd not running: the upgrade started nothing"; fi

echo "== upgrade to $(basename "$deb3") (its config changed too)"
upgrade "$deb3" 0.0.3-1
check "the edited config survived the upgrade" grep -qxF "$edit" "$root/etc/boardd/boardd.yaml"
check "the package's new config is beside it as boardd.yaml.dpkg-dist" \
    grep -qxF "# A line the next version added." "$root/etc/boardd/boardd.yaml.dpkg-dist"

check "postinst ran three times, made the user once" test "$(grep -c '^boardd:' "$root/etc/passwd")" = 1
check "and noted each thing it made once" test "$(sort "$root/var/lib/boardd/created" | uniq -d | wc -l)" = 0

echo "== remove"
if apt remove boardd > "$work/remove.log" 2>&1; then pass "apt-get remove boardd"; else fail "apt-get remove boardd"; sed 's/^/    /' "$work/remove.log"; fi
check "binaries and unit gone" test ! -e "$root/usr/bin/boardd" -a ! -e "$root/usr/bin/boardctl" -a ! -e "$root/lib/systemd/system/boardd.service"
check "config kept, with the edit" grep -qxF "$edit" "$root/etc/boardd/boardd.yaml"
check "package in state config-files (dpkg's rc)" test "$(status_of)" = rc
check "user boardd kept by a remove" has_user boardd

echo "== purge"
if apt purge boardd > "$work/purge.log" 2>&1; then pass "apt-get purge boardd"; else fail "apt-get purge boardd"; sed 's/^/    /' "$work/purge.log"; fi
check "/etc/boardd gone" test ! -e "$root/etc/boardd"
# Gone, where getent still answers for root (a broken chroot is not "gone").
user_gone() { has_user root && ! has_user "$1"; }
group_gone() { has_group root && ! has_group "$1"; }
check "user boardd gone" user_gone boardd
check "group boardd gone" group_gone boardd
check "group gpio gone (postinst made it: the root had none)" group_gone gpio
check "boardd gone from dpkg's database" test "$(inroot dpkg-query -W -f='${Status}' boardd 2>&1 | grep -c 'no packages found')" = 1
check "/var/lib/boardd gone" test ! -e "$root/var/lib/boardd"

echo "== install and purge where the group gpio was there before (Raspberry Pi OS)"
inroot groupadd --system gpio
apt install "/tmp/$(basename "$deb1")" > "$work/install2.log" 2>&1 || { fail "apt-get install again"; sed 's/^/    /' "$work/install2.log"; }
check "boardd is in the group gpio that was there" grep -qx gpio <<< "$(inroot id -nG boardd | tr ' ' '\n')"
apt purge boardd > "$work/purge2.log" 2>&1 || { fail "apt-get purge again"; sed 's/^/    /' "$work/purge2.log"; }
check "purge kept the group gpio it did not make" has_group gpio
check "purge removed the user boardd it made" user_gone boardd

note "took $(( $(date +%s) - started )) s"
echo "deb-test: $passed passed, $failed failed"
[ "$failed" = 0 ]
