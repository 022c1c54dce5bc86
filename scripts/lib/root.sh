# shellcheck shell=bash
# The throwaway Debian 12 root the package and deploy tests run in
# (deb-test.sh, deploy-test.sh); sourced, bash. Uses $package (the
# checkout) and $root (where the root goes).

# root_unpack: the root scripts/deb-root.sh keeps (debootstrap, cached)
# unpacked fresh into $root (nothing mounted in it: lib/boot.sh boots it,
# and systemd-nspawn mounts /proc, /dev and the rest in a mount namespace of
# its own); sets $tarball to the cached root it came from.
root_unpack() {
    tarball=$("$package/scripts/deb-root.sh")
    mkdir "$root"
    zstd -dc "$tarball" | tar -C "$root" -xf -
}

# root_remove NAME WORK: removes WORK (which holds $root), after undoing
# any /proc, /dev or /dev/pts mount left in the root — never into a mount
# that is still there (/dev would be the host's): then NAME says so and
# leaves it in place.
root_remove() {
    local m
    for m in dev/pts dev proc; do
        if mountpoint -q "$root/$m" 2> /dev/null; then umount "$root/$m" || umount -l "$root/$m"; fi
    done
    if mountpoint -q "$root/dev/pts" 2> /dev/null || mountpoint -q "$root/dev" 2> /dev/null ||
        mountpoint -q "$root/proc" 2> /dev/null; then
        echo "$1: $root still has mounts: left in place" >&2
    else
        rm -rf --one-file-system "$2"
    fi
}
