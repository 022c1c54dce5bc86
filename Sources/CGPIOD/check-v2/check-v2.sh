#!/bin/sh
# Checks the CGPIOD shim's libgpiod 2.x branch on a machine that has only
# libgpiod 1.6 (Debian 12): fetches the PyPI `gpiod` sdist, which vendors the
# libgpiod 2.x C sources and header, compiles the shim against that header
# with every warning as an error, builds the vendored library, links the
# shim and a probe against it, and runs the probe. Then does the same against
# the system's 1.6 for comparison. Usage: Sources/CGPIOD/check-v2/check-v2.sh [workdir]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
shim=$(cd "$here/.." && pwd)
work=${1:-/tmp/boardloop-gpiod2}
version=2.2.1
mkdir -p "$work"
cd "$work"
if [ ! -d "gpiod-$version" ]; then
    pip download --no-deps --no-binary :all: "gpiod==$version" -d . >/dev/null
    tar xzf "gpiod-$version.tar.gz"
fi
src="$work/gpiod-$version"
echo "libgpiod vendored by gpiod $version: $(cat "$src/libgpiod-version.txt")"
grep -q GPIOD_LINE_BULK_MAX_LINES "$src/include/gpiod.h" && { echo "unexpected: 2.x header defines the 1.x macro"; exit 1; }
flags="-std=gnu11 -Wall -Wextra -Werror -O2 -I$shim/include"
echo "== syntax check of the shim against the 2.x header"
gcc $flags -I"$src/include" -fsyntax-only "$shim"/common.c "$shim"/gpiod_v1.c "$shim"/gpiod_v2.c
echo "== build the vendored libgpiod 2.x"
mkdir -p build2 && rm -f build2/*.o
for f in "$src"/lib/*.c; do
    gcc -c -fPIC -O2 -D_GNU_SOURCE -DGPIOD_VERSION_STR="\"$(cat "$src/libgpiod-version.txt")\"" \
        -I"$src/include" -I"$src/lib" "$f" -o "build2/$(basename "$f" .c).o"
done
ar rcs build2/libgpiod2.a build2/*.o
echo "== link the shim and the probe against it, run"
gcc $flags -I"$src/include" "$here/probe.c" "$shim"/common.c "$shim"/gpiod_v1.c "$shim"/gpiod_v2.c \
    build2/libgpiod2.a -o probe-v2
nm probe-v2 | grep -q " T gpiod_line_request_read_edge_events" || { echo "probe-v2 is not linked to 2.x"; exit 1; }
./probe-v2 2
echo "== the same against the system's libgpiod 1.x"
gcc $flags "$here/probe.c" "$shim"/common.c "$shim"/gpiod_v1.c "$shim"/gpiod_v2.c -lgpiod -o probe-v1
./probe-v1 1
