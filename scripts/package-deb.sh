#!/usr/bin/env bash
# Builds the Debian package of boardd (docs/deploy.md, "Debian package").
#   scripts/package-deb.sh [--version V] [--bin-dir DIR] [--out DIR]
#
# Builds release with the Swift standard library linked in (as
# scripts/install.sh does; --bin-dir DIR: the boardd and boardctl there),
# lays the files out with scripts/install.sh --prefix /usr --destdir (the
# binaries, the completions, the unit with its paths in /usr/bin, the config,
# the udev rule), moves the unit and the rule to /lib as Debian 12 keeps
# them, adds packaging/deb/ (maintainer scripts, copyright, lintian
# overrides), a changelog, the conffile list and Depends from what the
# binaries link (dpkg-shlibdeps), and writes OUT/boardd_VERSION_ARCH.deb
# (OUT: --out, default out/ of the checkout) with dpkg-deb. VERSION: --version,
# else the release boardd --version prints, with +g and its commit when
# known, and the Debian revision -1 (e.g. 0.1.0+g67cb7f2-1). Prints the path
# of the package.
set -euo pipefail
package=$(cd "$(dirname "$0")/.." && pwd)
version=
bin_dir=
out=$package/out
while [ $# -gt 0 ]; do
    case "$1" in
        --version) version=${2:?--version needs a version}; shift ;;
        --bin-dir) bin_dir=${2:?--bin-dir needs a directory}; shift ;;
        --out) out=${2:?--out needs a directory}; shift ;;
        -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "package-deb.sh: unknown option $1" >&2; sed -n '3p' "$0" | sed 's/^# //' >&2; exit 64 ;;
    esac
    shift
done
note() { echo "package-deb.sh: $*" >&2; }
for tool in dpkg-deb dpkg-shlibdeps strip nm; do
    command -v "$tool" > /dev/null || { note "no $tool (apt-get install dpkg-dev binutils)"; exit 1; }
done
umask 022

if [ -z "$bin_dir" ]; then
    [ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
    flags=(-c release --static-swift-stdlib --scratch-path "$package/.build-static" --package-path "$package")
    note "building: swift build ${flags[*]} (boardd, boardctl)"
    swift build "${flags[@]}" --product boardd >&2
    swift build "${flags[@]}" --product boardctl >&2
    bin_dir=$package/.build-static/release
fi
bin_dir=$(cd "$bin_dir" && pwd)
for exe in boardd boardctl; do
    [ -x "$bin_dir/$exe" ] || { note "no $bin_dir/$exe"; exit 1; }
done

# boardd is shipped without Foundation and ICU (its YAML, JSON and text
# are the package's own, on libyaml): a symbol of Foundation,
# FoundationInternationalization, CoreFoundation or ICU in it means a change
# or a dependency brought them back, with their ~40 MiB.
if nm "$bin_dir/boardd" 2> /dev/null | grep -qE '\$s10Foundation|\$s30FoundationInternationalization|__CFInitialize|icu_[0-9]+|icudt[0-9]+_dat'; then
    note "boardd links Foundation or ICU again: $(nm "$bin_dir/boardd" | grep -oE '\$s10Foundation[A-Za-z0-9_]{0,20}|\$s30FoundationInternationalization[A-Za-z0-9_]{0,20}|__CFInitialize|icu_[0-9]+[A-Za-z0-9_]{0,20}|icudt[0-9]+_dat' | sort -u | head -5 | tr '\n' ' ')"
    exit 1
fi

# The version: boardd's own ("boardd 0.1.0 (...)", "commit 67cb7f2").
version_text=$("$bin_dir/boardd" --version)
release=$(printf '%s\n' "$version_text" | sed -n '1s/^boardd \([^ ]*\).*/\1/p')
commit=$(printf '%s\n' "$version_text" | sed -n 's/^commit \(.*\)$/\1/p')
if [ -z "$version" ]; then
    version=$release
    # A dirty tree's commit "67cb7f2-dirty" as "+g67cb7f2.dirty" (a hyphen
    # would start a Debian revision).
    [ -n "$commit" ] && [ "$commit" != unknown ] && version="$version+g${commit//-/.}"
    version=$version-1
fi
printf '%s' "$version" | grep -Eq '^[0-9][A-Za-z0-9.+~-]*$' || { note "not a Debian version: $version"; exit 64; }
arch=$(dpkg --print-architecture)

work=$(mktemp -d /tmp/boardloop-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
# dpkg-shlibdeps wants a source tree: debian/control, the package in debian/boardd.
root=$work/debian/boardd
mkdir -p "$root"

# The files, as install.sh lays them out for a system with prefix /usr.
"$package/scripts/install.sh" --prefix /usr --destdir "$root" --bin-dir "$bin_dir" > "$work/install.log" ||
    { cat "$work/install.log" >&2; exit 1; }
# Debian 12 keeps units and udev rules in /lib (not /usr/lib, not /etc).
mkdir -p "$root/lib/systemd/system" "$root/lib/udev/rules.d"
mv "$root/usr/lib/systemd/system/boardd.service" "$root/lib/systemd/system/"
mv "$root/etc/udev/rules.d/60-boardd-gpio.rules" "$root/lib/udev/rules.d/"
rmdir -p "$root/usr/lib/systemd/system" "$root/etc/udev/rules.d" 2> /dev/null || true
# Drop-ins follow one machine's config: the package has none (the example
# config asks for none).
if [ -e "$root/etc/systemd" ]; then
    note "install.sh wrote drop-ins for packaging/boardd.yaml: a package must not carry them"
    exit 1
fi
# The network drop-in, for a config that needs it to install by hand
# (docs/deploy.md, "The network drop-in"; boardd names it when the sandbox
# refuses its MQTT broker's socket).
install -D -m 0644 "$package/packaging/network.conf" "$root/usr/share/boardd/network.conf"
# Symbols are not needed to run (the Swift runtime's metadata is in its own
# sections, which strip keeps).
for exe in boardd boardctl; do
    strip --strip-unneeded --remove-section=.comment "$root/usr/bin/$exe"
done

# Bash reads its completions with source: no #! line (lintian).
for exe in boardd boardctl; do
    sed -i '1{/^#!/d}' "$root/usr/share/bash-completion/completions/$exe"
done

# The changelog's and man pages' date: the commit's, so that the same tree
# makes the same files.
date_epoch=${SOURCE_DATE_EPOCH:-$(git -C "$package" log -1 --format=%ct 2> /dev/null || date +%s)}

# Man pages, from the binaries' own help (swift-argument-parser's
# generate-manual, built from the package's resolved dependencies: no network).
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
swift build --package-path "$package" --product generate-manual > "$work/generate-manual.log" 2>&1 ||
    { cat "$work/generate-manual.log" >&2; note "could not build generate-manual (swift-argument-parser's)"; exit 1; }
generate_manual=$(swift build --package-path "$package" --show-bin-path)/generate-manual
mkdir -p "$root/usr/share/man/man1" "$work/man"
for exe in boardd boardctl; do
    "$generate_manual" "$bin_dir/$exe" --date "$(date -u -d "@$date_epoch" +%Y-%m-%d)" --output-directory "$work/man"
    gzip -9n < "$work/man/$exe.1" > "$root/usr/share/man/man1/$exe.1.gz"
    chmod 0644 "$root/usr/share/man/man1/$exe.1.gz"
done

# Docs: the copyright, the changelog, lintian's overrides.
doc=$root/usr/share/doc/boardd
install -d "$doc" "$root/usr/share/lintian/overrides"
install -m 0644 "$package/packaging/deb/copyright" "$doc/copyright"
install -m 0644 "$package/packaging/deb/lintian-overrides" "$root/usr/share/lintian/overrides/boardd"
maintainer=${DEBFULLNAME:-$(git -C "$package" config user.name 2> /dev/null || echo "boardloop maintainers")}
email=${DEBEMAIL:-$(git -C "$package" config user.email 2> /dev/null || echo "maintainers@boardloop.invalid")}
{
    echo "boardd ($version) unstable; urgency=medium"
    echo
    echo "  * Built by scripts/package-deb.sh from commit ${commit:-unknown}."
    echo
    echo " -- $maintainer <$email>  $(LC_ALL=C date -u -R -d "@$date_epoch")"
} > "$work/changelog"
# A version with a Debian revision (0.1.0-1) is of a Debian package of
# boardloop: changelog.Debian.gz; one without is native: changelog.gz.
case "$version" in *-*) changelog=changelog.Debian.gz ;; *) changelog=changelog.gz ;; esac
gzip -9n < "$work/changelog" > "$doc/$changelog"
chmod 0644 "$doc/$changelog"

# Depends: what the binaries link, as package names with versions.
cat > "$work/debian/control" << CONTROL
Source: boardd

Package: boardd
Architecture: any
CONTROL
depends=$(cd "$work" && dpkg-shlibdeps -O -e debian/boardd/usr/bin/boardd -e debian/boardd/usr/bin/boardctl 2> "$work/shlibdeps.err") ||
    { cat "$work/shlibdeps.err" >&2; exit 1; }
depends=${depends#shlibs:Depends=}
[ -n "$depends" ] || { note "dpkg-shlibdeps found no dependencies"; exit 1; }
# boardd loads libmosquitto (dlopen) for a config's mqtt: block: not a
# link dpkg-shlibdeps sees, so named here (Debian 12's is 2.0.11; boardd
# uses nothing newer than 1.6 has).
depends="$depends, libmosquitto1 (>= 1.6)"

# Control files.
mkdir -p "$root/DEBIAN"
for script in postinst prerm postrm; do
    install -m 0755 "$package/packaging/deb/$script" "$root/DEBIAN/$script"
done
echo /etc/boardd/boardd.yaml > "$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
installed_size=$(du -sk --apparent-size --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" << CONTROL
Package: boardd
Version: $version
Architecture: $arch
Maintainer: $maintainer <$email>
Installed-Size: $installed_size
Depends: $depends
Section: misc
Priority: optional
Description: GPIO reactions, tasks and sequences from one YAML config
 boardd is a daemon that watches GPIO lines through libgpiod and reacts to
 their edges: it drives outputs, runs timed sequences and periodic tasks
 and starts commands, as a YAML config says. boardctl talks to a running
 boardd through its control socket (status, traces, recordings).
 .
 The package runs boardd as the sandboxed systemd service boardd.service,
 as the system user boardd, with its config in /etc/boardd/boardd.yaml.
CONTROL
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"
# Every file with the same time, so that the same tree makes the same package.
find "$root" -exec touch -h -d "@$date_epoch" {} +

mkdir -p "$out"
deb=$(cd "$out" && pwd)/boardd_${version}_$arch.deb
# dpkg-deb dates the archive's members by SOURCE_DATE_EPOCH: the same tree,
# the same package, byte for byte.
SOURCE_DATE_EPOCH=$date_epoch dpkg-deb --build --root-owner-group "$root" "$deb" > /dev/null
note "$(du -h "$deb" | cut -f1) $deb (Depends: $depends)"
echo "$deb"
