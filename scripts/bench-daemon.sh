#!/usr/bin/env bash
# boardd's benchmark table: the in-process scenarios of Benchmarks/
# (boardd-bench: reaction latency through the config path vs a hand-written
# engine loop, a 1 kHz critical task under a 20k edges/s flood), then the
# process figures, measured with /proc and /usr/bin/time -v on a release
# build with the Swift stdlib linked statically:
#   - wake-ups per second while idle (no tasks), and with one 500 ms task;
#     idle with MQTT connected to a mosquitto of its own (keepalive 10 s):
#     the context switches of every thread (/proc/PID/task/*/status) and
#     the times they were scheduled (/proc/PID/task/*/schedstat) over 10 s;
#   - CPU time (utime + stime, /proc/PID/stat) over 60 s idle;
#   - RSS after start (VmRSS at READY=1) and max RSS (/usr/bin/time -v),
#     beside a Glibc-only Swift hello and a Foundation hello built the same way;
#   - start to READY=1 (a NOTIFY_SOCKET of our own), beside the hellos'
#     start to exit.
#
#   scripts/bench-daemon.sh           full run (about 3 minutes after the builds)
#   scripts/bench-daemon.sh --quick   smoke run (CI): short windows, figures not meaningful
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
quick=0
repeats=3
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1 ;;
    --repeats) repeats=$2; shift ;;
    *) echo "usage: scripts/bench-daemon.sh [--quick] [--repeats N]" >&2; exit 2 ;;
    esac
    shift
done

scripts/install-deps.sh python3 time >&2   # the /proc reader; /usr/bin/time -v

echo "== in-process scenarios (Benchmarks/, boardd-bench)" >&2
(cd Benchmarks && swift build -c release --product boardd-bench >&2)
bench=$(cd Benchmarks && swift build -c release --show-bin-path)/boardd-bench
if [ $quick = 1 ]; then "$bench" --quick; else "$bench" --repeats "$repeats"; fi

if [ $quick = 1 ]; then
    # The smoke run shares the guest's release build (scratch .build-guest,
    # which scripts/sim-test.sh reuses) instead of a static one of its own.
    echo "== process figures (quick: boardd of .build-guest, Swift stdlib not static)" >&2
    swift build -c release --product boardd --scratch-path .build-guest >&2
    boardd=$(swift build -c release --scratch-path .build-guest --show-bin-path)/boardd
else
    echo "== process figures: release builds with -static-stdlib (scratch .build-static)" >&2
    swift build -c release --static-swift-stdlib --product boardd --scratch-path .build-static >&2
    boardd=$(swift build -c release --static-swift-stdlib --scratch-path .build-static --show-bin-path)/boardd
fi
work=$(mktemp -d /tmp/boardd-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
printf 'import Glibc\nputs("hello")\n' > "$work/hello-glibc.swift"
printf 'import Foundation\nprint("hello \\(Date().timeIntervalSince1970 > 0)")\n' > "$work/hello-foundation.swift"
swiftc -O -static-stdlib "$work/hello-glibc.swift" -o "$work/hello-glibc" >&2
swiftc -O -static-stdlib "$work/hello-foundation.swift" -o "$work/hello-foundation" >&2

cat > "$work/idle.yaml" <<'EOF'
board: demo
lines:
  button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
  led: { pin: LED, output: { initial: off, safe: off } }
reactions:
  - { on: { line: button, press: true }, do: [ toggle: led ] }
EOF
cat > "$work/task.yaml" <<'EOF'
board: demo
lines:
  button: { pin: BUTTON, input: { edge: both, active_low: true }, priority: low }
  led: { pin: LED, output: { initial: off, safe: off } }
tasks:
  blink: { every: 500ms, do: [ toggle: led ] }
EOF

python3 - "$boardd" "$work" "$quick" <<'EOF'
import os, socket, subprocess, sys, time, statistics, re
boardd, work, quick = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
build = "release, Swift stdlib not static" if quick else "release, -static-stdlib"
window = 2.0 if quick else 10.0
cpu_window = 3.0 if quick else 60.0
runs = 2 if quick else 7

def notify_socket():
    path = os.path.join(work, "notify-%d.sock" % time.monotonic_ns())
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    return s, path

def start(config):
    """boardd with a NOTIFY_SOCKET: (process, seconds from spawn to READY=1)."""
    s, path = notify_socket()
    env = dict(os.environ, NOTIFY_SOCKET=path)
    env.pop("JOURNAL_STREAM", None)
    t0 = time.monotonic()
    p = subprocess.Popen([boardd, "--config", config, "--log-level", "warning"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    s.settimeout(30)
    while True:
        d = s.recv(4096).decode()
        if "READY=1" in d.split("\n"):
            t = time.monotonic() - t0
            break
    s.close(); os.unlink(path)
    return p, t

def stop(p):
    p.terminate()
    try: p.wait(30)
    except subprocess.TimeoutExpired: p.kill(); p.wait()

def switches(pid):
    vol = invol = sched = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            st = open("/proc/%d/task/%s/status" % (pid, tid)).read()
            vol += int(re.search(r"voluntary_ctxt_switches:\s+(\d+)", st).group(1))
            invol += int(re.search(r"nonvoluntary_ctxt_switches:\s+(\d+)", st).group(1))
            sched += int(open("/proc/%d/task/%s/schedstat" % (pid, tid)).read().split()[2])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return vol, invol, sched

def cpu_ms(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")

def rss_kib(pid, key="VmRSS"):
    return int(re.search(key + r":\s+(\d+) kB", open("/proc/%d/status" % pid).read()).group(1))

def wakes(config):
    p, _ = start(config)
    time.sleep(0.5)  # past start-up
    a = switches(p.pid); time.sleep(window); b = switches(p.pid)
    threads = len(os.listdir("/proc/%d/task" % p.pid))
    stop(p)
    return [(y - x) / window for x, y in zip(a, b)], threads

def timed_maxrss(argv):
    r = subprocess.run(["/usr/bin/time", "-v"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60)
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))

def start_exit(argv):
    t0 = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    return time.monotonic() - t0

def row(name, value, ref, ratio=""):
    print("%-52s %-14s %-30s %s" % (name, value, ref, ratio))

idle = os.path.join(work, "idle.yaml"); task = os.path.join(work, "task.yaml")
hg, hf = os.path.join(work, "hello-glibc"), os.path.join(work, "hello-foundation")
print()
print("boardd process figures (%s; %s)" % (build, "quick: figures not meaningful" if quick else "%d runs, medians" % runs))
row("figure", "boardd", "reference / goal", "")
(vi, ii, si), threads = wakes(idle)
row("wake-ups/s idle, no tasks (ctx switches, %.0f s)" % window, "%.2f" % (vi + ii), "goal 0", "schedstat runs/s %.2f, %d thread(s)" % (si, threads))
(vt, it, st), _ = wakes(task)
row("wake-ups/s with one 500 ms task", "%.2f" % (vt + it), "expected 2", "schedstat runs/s %.2f" % st)
# Idle with MQTT connected (a broker of our own on 127.0.0.1, keepalive
# 10 s): the ping and its answer per keepalive, nothing else.
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port
port = free_port()
conf = os.path.join(work, "mosquitto.conf")
open(conf, "w").write("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\n" % port)
broker = subprocess.Popen(["/usr/sbin/mosquitto", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(200):
    try: socket.create_connection(("127.0.0.1", port), 0.1).close(); break
    except OSError: time.sleep(0.05)
mqtt = os.path.join(work, "mqtt.yaml")
open(mqtt, "w").write(open(idle).read() + "mqtt: { broker: 127.0.0.1, port: %d, client_id: bench, keepalive: 10s }\n" % port)
mqtt_window = 3.0 if quick else 60.0
p, _ = start(mqtt)
time.sleep(1.0)  # connected, its first messages acknowledged
a = switches(p.pid); time.sleep(mqtt_window); b = switches(p.pid)
stop(p); broker.terminate(); broker.wait()
mv = (b[0] - a[0] + b[1] - a[1])
row("wake-ups idle with MQTT connected (keepalive 10 s, %.0f s)" % mqtt_window, "%d (%.2f/s)" % (mv, mv / mqtt_window),
    "goal <= 2 per keepalive", "%.1f per keepalive" % (mv / (mqtt_window / 10.0)))
p, _ = start(idle)
time.sleep(0.5)
c0 = cpu_ms(p.pid); time.sleep(cpu_window); c1 = cpu_ms(p.pid)
stop(p)
row("CPU time idle over %.0f s (utime+stime)" % cpu_window, "%.0f ms" % (c1 - c0), "tick %d ms" % (1000 // os.sysconf("SC_CLK_TCK")), "")
ready, rss = [], []
for _ in range(runs):
    p, t = start(idle)
    ready.append(t * 1000); rss.append(rss_kib(p.pid) / 1024)
    stop(p)
g = [start_exit([hg]) * 1000 for _ in range(runs)]
f = [start_exit([hf]) * 1000 for _ in range(runs)]
row("start -> READY=1 ms (median)", "%.1f" % statistics.median(ready),
    "hello %.1f / Foundation %.1f (start->exit)" % (statistics.median(g), statistics.median(f)),
    "goal <= 150 ms; %.1fx the Glibc hello" % (statistics.median(ready) / statistics.median(g)))
row("RSS at READY=1 MiB (VmRSS, median)", "%.1f" % statistics.median(rss), "goal <= 16 MiB", "")
mb = timed_maxrss([boardd, "--config", idle, "--for", "1s", "--log-level", "warning"]) / 1024
mg, mf = timed_maxrss([hg]) / 1024, timed_maxrss([hf]) / 1024
row("max RSS MiB (/usr/bin/time -v; boardd --for 1s)", "%.1f" % mb, "hello %.1f / Foundation %.1f" % (mg, mf),
    "%.2fx the Glibc hello, %.2fx the Foundation hello" % (mb / mg, mb / mf))
size = os.path.getsize(boardd) / 1048576
row("binary size MiB", "%.1f" % size, "hello %.1f / Foundation %.1f" % (os.path.getsize(hg) / 1048576, os.path.getsize(hf) / 1048576), "")
EOF
