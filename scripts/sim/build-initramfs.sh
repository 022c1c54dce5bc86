#!/bin/sh
# Packs the test guest's initramfs: busybox, the gpiod tools, tests-guest/
# (init and shell scenarios), boards/sim-chips.conf, gpio-sim-up.sh, and the
# guest test programs given as arguments, each with the shared libraries it
# needs copied to the same absolute paths (Swift's runtime included).
# With BOARDD=PATH, that boardd goes to /usr/bin/boardd (with its libraries)
# and boards/*.yaml to /etc/boardd/boards, for the boardd scenario; with
# BOARDCTL=PATH, that boardctl goes to /usr/bin/boardctl (the boardctl
# scenario); with REACT_REF=PATH, that program goes to /usr/bin/react-ref
# and the host's strace to /usr/bin/strace.
# With GUEST_SCENARIOS="NAME.sh ...", only those of tests-guest/scenarios/
# (default: all of them).
# With GUEST_MODE=shell (scripts/sim-shell.sh), the guest runs no tests:
# its /init is scripts/sim/shell-init, and it holds scripts/sim-host.sh
# with gpio-sim-up.sh and gpio-sim-down.sh in /scripts, boards/ in /boards,
# the example configs in /examples, the host's setpriv, and the files of
# SHELL_DIR (the user's config, the command to run) in /config.
# usage: [BOARDD=PATH] [BOARDCTL=PATH] [REACT_REF=PATH] build-initramfs.sh OUT.cpio.gz [PROGRAM...]
#        GUEST_MODE=shell SHELL_DIR=DIR [BOARDD=PATH] [BOARDCTL=PATH] build-initramfs.sh OUT.cpio.gz
set -eu
root_dir=$(cd "$(dirname "$0")/../.." && pwd)
out=$1; shift
stage=$(mktemp -d /tmp/boardloop-initramfs.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/dev" "$stage/proc" "$stage/sys" "$stage/tmp" "$stage/run" "$stage/tests/bin" "$stage/tests/scenarios" "$stage/boards"
cp /bin/busybox "$stage/bin/busybox"
ln -s busybox "$stage/bin/sh"
copy_setpriv=""
case ${GUEST_MODE:-test} in
test)
    cp "$root_dir/tests-guest/init" "$stage/init"
    if [ -n "${GUEST_SCENARIOS:-}" ]; then
        for sc in $GUEST_SCENARIOS; do
            [ -f "$root_dir/tests-guest/scenarios/$sc" ] || { echo "build-initramfs: no scenario tests-guest/scenarios/$sc" >&2; exit 2; }
            cp "$root_dir/tests-guest/scenarios/$sc" "$stage/tests/scenarios/"
        done
    else
        cp "$root_dir"/tests-guest/scenarios/*.sh "$stage/tests/scenarios/" 2>/dev/null || true
    fi
    cp "$root_dir/tests-guest/lib.sh" "$root_dir/tests-guest/reaction-lib.sh" "$stage/tests/"
    cp "$root_dir/scripts/gpio-sim-up.sh" "$stage/tests/gpio-sim-up.sh"
    ;;
shell)
    [ $# -eq 0 ] || { echo "build-initramfs: GUEST_MODE=shell runs no test programs" >&2; exit 2; }
    [ -d "${SHELL_DIR:-}" ] || { echo "build-initramfs: GUEST_MODE=shell needs SHELL_DIR" >&2; exit 2; }
    rm -rf "$stage/tests"
    # The root is the staging directory's (mktemp: 0700): open it to other users.
    chmod 755 "$stage"
    cp "$root_dir/scripts/sim/shell-init" "$stage/init"
    mkdir -p "$stage/scripts" "$stage/examples" "$stage/config" "$stage/root"
    cp "$root_dir/scripts/sim-host.sh" "$root_dir/scripts/gpio-sim-up.sh" "$root_dir/scripts/gpio-sim-down.sh" "$stage/scripts/"
    cp "$root_dir"/boards/*.yaml "$stage/boards/"
    cp "$root_dir"/examples/*.yaml "$stage/examples/"
    cp -R "$SHELL_DIR"/. "$stage/config/"
    # /usr/bin/setpriv runs boardd and boardctl as another user (busybox's own
    # setpriv cannot change the user).
    sp=$(command -v setpriv || true)
    [ -z "$sp" ] || copy_setpriv=$sp
    ;;
*) echo "build-initramfs: GUEST_MODE is test or shell, not '$GUEST_MODE'" >&2; exit 2 ;;
esac
chmod +x "$stage/init"
cp "$root_dir/boards/sim-chips.conf" "$stage/boards/"
libs_of() { ldd "$1" 2>/dev/null | grep -o '/[^ ]*' || true; }
copy_with_libs() {
    dest=$1; src=$2
    mkdir -p "$(dirname "$stage$dest")"
    cp -L "$src" "$stage$dest"
    for lib in $(libs_of "$src"); do
        [ -e "$stage$lib" ] && continue
        mkdir -p "$stage$(dirname "$lib")"
        cp -L "$lib" "$stage$lib"
    done
}
[ -z "${copy_setpriv:-}" ] || copy_with_libs /usr/bin/setpriv "$copy_setpriv"
for t in gpiodetect gpioinfo gpioget gpioset gpiomon gpiofind; do copy_with_libs "/usr/bin/$t" "/usr/bin/$t"; done
if [ -n "${BOARDD:-}" ]; then
    copy_with_libs /usr/bin/boardd "$BOARDD"
    mkdir -p "$stage/etc/boardd/boards"
    cp "$root_dir"/boards/*.yaml "$stage/etc/boardd/boards/"
fi
[ -n "${BOARDCTL:-}" ] && copy_with_libs /usr/bin/boardctl "$BOARDCTL"
# With REACT_REF=PATH, the C reference of the reaction scenarios, and
# strace (the system calls per reaction of it and of boardd).
if [ -n "${REACT_REF:-}" ]; then
    copy_with_libs /usr/bin/react-ref "$REACT_REF"
    copy_with_libs /usr/bin/strace "$(command -v strace)"
fi
# With GUEST_MARK=PATH, the marker program (scripts/sim/mark.c) as /usr/bin/mark.
[ -z "${GUEST_MARK:-}" ] || copy_with_libs /usr/bin/mark "$GUEST_MARK"
for p in "$@"; do copy_with_libs "/tests/bin/$(basename "$p")" "$p"; done
(cd "$stage" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$out"
echo "initramfs: $out ($(du -h "$out" | cut -f1))" >&2
