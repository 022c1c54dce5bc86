#!/usr/bin/env bash
# What an installed boardd and boardctl are: builds both in release twice,
# with the Swift standard library (and Foundation) linked in statically
# (--static-swift-stdlib, scratch .build-static: what scripts/install.sh
# installs) and linked dynamically (the default, scratch .build), then
# prints for each build and binary its size (as built, and stripped), its
# dynamic dependencies (ldd), and boardd's RSS at READY=1 (VmRSS of
# /proc/PID/status the moment boardd sends READY=1 on a NOTIFY_SOCKET of our
# own; the doorbell example on mock chips, --repeats runs, the median), the
# static build's as a ratio of the dynamic one's measured in the same run.
#   scripts/binary-report.sh [--no-build] [--repeats N]
# --no-build reports on the binaries the two scratch directories have.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"

build=1
repeats=5
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) build=0 ;;
        --repeats) repeats=$2; shift ;;
        -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "binary-report.sh: unknown option $1 (see --help)" >&2; exit 64 ;;
    esac
    shift
done

static_flags=(-c release --static-swift-stdlib --scratch-path .build-static)
dynamic_flags=(-c release --scratch-path .build)
if [ $build = 1 ]; then
    for flags in static_flags dynamic_flags; do
        declare -n f=$flags
        echo "== swift build ${f[*]} (boardd, boardctl)" >&2
        start=$(date +%s)
        swift build "${f[@]}" --product boardd >&2
        swift build "${f[@]}" --product boardctl >&2
        echo "   $(($(date +%s) - start)) s" >&2
    done
fi
static_dir=$(swift build "${static_flags[@]}" --show-bin-path)
dynamic_dir=$(swift build "${dynamic_flags[@]}" --show-bin-path)

echo "binary report: $(date -u +%Y-%m-%dT%H:%MZ), $(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME"), $(swift --version 2>/dev/null | head -1)"
echo "commit: $("$static_dir/boardd" --version | sed -n 2p | cut -d' ' -f2)"
for kind in static dynamic; do
    dir=${kind}_dir
    dir=${!dir}
    for exe in boardd boardctl; do
        bin=$dir/$exe
        stripped=$(mktemp)
        strip -o "$stripped" "$bin"
        printf '\n%s (%s Swift stdlib): %s bytes (%.1f MiB), stripped %s bytes (%.1f MiB)\n' "$exe" "$kind" \
            "$(stat -c %s "$bin")" "$(echo "$(stat -c %s "$bin") / 1048576" | bc -l)" \
            "$(stat -c %s "$stripped")" "$(echo "$(stat -c %s "$stripped") / 1048576" | bc -l)"
        rm -f "$stripped"
        echo "  ldd:"
        ldd "$bin" | sed 's/ (0x[0-9a-f]*)$//; s/^\s*/    /'
    done
done

echo
python3 - "$static_dir/boardd" "$dynamic_dir/boardd" "$repeats" <<'PY'
import os, re, signal, socket, statistics, subprocess, sys, tempfile
static, dynamic, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])

def rss_at_ready(boardd):
    """VmRSS in KiB of boardd when it sends READY=1 (doorbell, --mock)."""
    d = tempfile.mkdtemp(prefix="boardd-report-")
    path = os.path.join(d, "notify")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    env = dict(os.environ, NOTIFY_SOCKET=path, RUNTIME_DIRECTORY=d)
    for k in ("JOURNAL_STREAM", "INVOCATION_ID", "WATCHDOG_USEC", "WATCHDOG_PID"): env.pop(k, None)
    p = subprocess.Popen([boardd, "--config", "examples/doorbell.yaml", "--mock", "--log-level", "warning"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    s.settimeout(30)
    try:
        while "READY=1" not in s.recv(4096).decode().split("\n"):
            pass
        kib = int(re.search(r"VmRSS:\s+(\d+) kB", open("/proc/%d/status" % p.pid).read()).group(1))
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(30)
        s.close()
        for f in os.listdir(d): os.unlink(os.path.join(d, f))
        os.rmdir(d)
    return kib

# Alternate the two, so a change in the machine's load falls on both.
runs = {"static": [], "dynamic": []}
for _ in range(repeats):
    runs["static"].append(rss_at_ready(static))
    runs["dynamic"].append(rss_at_ready(dynamic))
med = {k: statistics.median(v) for k, v in runs.items()}
for k in ("static", "dynamic"):
    print("boardd RSS at READY=1 (%s Swift stdlib; examples/doorbell.yaml --mock; median of %d): %.1f MiB (runs, KiB: %s)"
          % (k, repeats, med[k] / 1024, ", ".join(map(str, runs[k]))))
print("static / dynamic: %.2fx" % (med["static"] / med["dynamic"]))
PY
