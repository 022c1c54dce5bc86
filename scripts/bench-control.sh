#!/usr/bin/env bash
# The control socket under load: a 1 kHz task's lateness p99 (the `stats`
# request's lateness_p99_ns) on a spawned release-built
# `boardd --config X --mock`, with 50 misbehaving clients against none.
# The clients, from one Python process (select, no threads):
#   - 13 slow lorises: a status request one byte a second;
#   - 12 followers of every event that never read (the task's writes are
#     events while anyone follows: each is dropped `too-slow` once 1 MiB
#     waits); each hangs up and follows anew every 3 s;
#   - 13 garbage senders: a line of random bytes, a bad request or a
#     100 KiB line every 100 ms (they read their error replies);
#   - 12 churners: connect, ping, read the pong (or not: every third
#     hangs up first), close; each every 50 ms.
# Each run is a fresh daemon: 1 s to settle, then the window (10 s) with
# or without the clients, then `stats` (the task's histogram covers the
# run). Runs are paired, A (clients) and B (none) in turn, the order
# swapped every pair; the figure is the median of the pairs' p99 ratios.
#
#   scripts/bench-control.sh                 7 pairs, 10 s windows (about 3 minutes after the build)
#   scripts/bench-control.sh --pairs N --window S
#   scripts/bench-control.sh --clients follower   only those kinds of the 50 (the others are left out)
#   scripts/bench-control.sh --task-on worker     the task on a worker loop of its own (default: on the
#                                                 main loop, which the control server shares)
#   scripts/bench-control.sh --pin                boardd on CPU 0, the clients' driver on CPU 1 (taskset),
#                                                 so the driver does not take boardd's CPU time
#   scripts/bench-control.sh --isolate            the task on a worker with a CPU of its own (`cpu: 1`),
#                                                 boardd's other threads and the driver on CPU 0: the
#                                                 deployment a time-critical task is meant for
#   scripts/bench-control.sh --quick         2 pairs of 3 s: a smoke run, the figures mean nothing
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
pairs=7
window=10
roles=loris,follower,garbage,churn
task_loop=main
pin=""
isolate=""
while [ $# -gt 0 ]; do
    case $1 in
    --quick) pairs=2; window=3 ;;
    --pairs) pairs=$2; shift ;;
    --window) window=$2; shift ;;
    --clients) roles=$2; shift ;;
    --task-on) task_loop=$2; shift ;;
    --pin) pin=1 ;;
    --isolate) isolate=1; task_loop=worker ;;
    *) echo "usage: scripts/bench-control.sh [--quick] [--pairs N] [--window SECONDS] [--clients loris,follower,garbage,churn] [--task-on main|worker] [--pin | --isolate]" >&2; exit 2 ;;
    esac
    shift
done

swift build -c release --product boardd >&2
boardd=$(swift build -c release --show-bin-path)/boardd
work=$(mktemp -d /tmp/boardd-bench-control.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/task.yaml" <<EOF
board: demo
lines:
  button: { pin: BUTTON, input: { edge: both, active_low: true } }
  led: { pin: LED, output: { initial: off } }
  fan: { pin: FAN, output: { initial: off } }
$( [ "$task_loop" = worker ] && printf 'workers:\n  rt: { lines: [fan]%s }\n' "${isolate:+, cpu: 1}" )
tasks:
  beat: { every: 1ms, do: [ toggle: fan ]$( [ "$task_loop" = worker ] && printf ', worker: rt' ) }
reactions:
  - { name: press lights, on: { line: button, press: true }, do: [ toggle: led ] }
control: { path: $work/boardd.sock, max_clients: 64 }
EOF

# --pin: boardd on CPU 0, the driver on CPU 1; --isolate: both on CPU 0
# (the task's worker takes CPU 1 itself).
driver_cpu=${pin:+1}
[ -n "$isolate" ] && driver_cpu=0
${driver_cpu:+taskset -c $driver_cpu} python3 - "$boardd" "$work" "$pairs" "$window" "$roles" "$task_loop" "${isolate:+isolate}${pin:+pin}" <<'EOF'
import json, os, random, select, socket, statistics, subprocess, sys, time
boardd, work, pairs, window = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
roles = set(sys.argv[5].split(","))
task_loop = sys.argv[6]
placement = sys.argv[7]
pin = ["taskset", "-c", "0"] if placement else []
sock = os.path.join(work, "boardd.sock")
config = os.path.join(work, "task.yaml")
rng = random.Random(0x5EED)

def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    s.setblocking(False)
    return s

def request(line):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock)
    s.sendall((line + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        b = s.recv(1 << 20)
        if not b: break
        buf += b
    s.close()
    return json.loads(buf)

def start():
    p = subprocess.Popen(pin + [boardd, "--config", config, "--mock", "--log-level", "error"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(3000):
        try:
            if request('{"v":1,"cmd":"ping"}').get("pong"): return p
        except (FileNotFoundError, ConnectionRefusedError, json.JSONDecodeError):
            time.sleep(0.01)
    raise SystemExit("boardd did not answer on " + sock)

def stop(p):
    p.terminate()
    try: p.wait(30)
    except subprocess.TimeoutExpired: p.kill(); p.wait()

def garbage():
    k = rng.randrange(4)
    if k == 0: return bytes(rng.choice(b"x{}[]\":,\x00\xff\xc3 abc") for _ in range(rng.randrange(1, 200))).replace(b"\n", b"") + b"\n"
    if k == 1: return b'{"v":1,"cmd":"set","line":"fan","value":"yes"}\n'
    if k == 2: return b"a" * (100 * 1024) + b"\n"
    return b'{"v":2,"cmd":"toggle","line":"fan"}\n'

class Client:
    def __init__(self, role):
        self.role, self.s, self.out, self.next = role, None, b"", 0.0
        self.got = 0

def misbehave(seconds):
    """50 misbehaving clients for `seconds`; returns what they did."""
    clients = [Client("loris") for _ in range(13)] + [Client("follower") for _ in range(12)] + \
              [Client("garbage") for _ in range(13)] + [Client("churn") for _ in range(12)]
    clients = [c for c in clients if c.role in roles]
    done = {"loris bytes": 0, "follows": 0, "garbage lines": 0, "churn connections": 0, "replies read": 0}
    t0 = time.monotonic()
    for i, c in enumerate(clients):
        c.next = t0 + i * 0.002
    while True:
        now = time.monotonic()
        if now - t0 >= seconds: break
        for c in clients:
            if now < c.next: continue
            if c.role == "loris":
                if c.s is None: c.s = connect(); c.out = b""
                if not c.out: c.out = b'{"v":1,"cmd":"status"}\n'
                try:
                    c.s.send(c.out[:1]); c.out = c.out[1:]; done["loris bytes"] += 1
                except OSError:
                    c.s.close(); c.s = None
                c.next = now + 1.0
            elif c.role == "follower":
                # Never reads; every 3 s it hangs up and follows again on a new
                # connection (a follower boardd dropped too-slow costs nothing more).
                if c.s is not None: c.s.close()
                c.s = connect(); c.s.send(b'{"v":1,"id":1,"cmd":"events","follow":true}\n'); done["follows"] += 1
                c.next = now + 3.0
            elif c.role == "garbage":
                if c.s is None: c.s = connect()
                try:
                    while True:
                        b = c.s.recv(1 << 16)
                        if not b: c.s.close(); c.s = None; break
                        done["replies read"] += b.count(b"\n")
                except BlockingIOError: pass
                except OSError: c.s.close(); c.s = None
                if c.s is not None:
                    try: c.s.send(garbage()); done["garbage lines"] += 1
                    except OSError: c.s.close(); c.s = None
                c.next = now + 0.1
            else:
                s = connect(); done["churn connections"] += 1
                s.send(b'{"v":1,"cmd":"ping"}\n')
                if rng.randrange(3):
                    r, _, _ = select.select([s], [], [], 0.05)
                    if r: done["replies read"] += s.recv(4096).count(b"\n")
                s.close()
                c.next = now + 0.05
        # Asleep until the next client is due (the driver's own wake-ups are what the clients do, no more).
        left = seconds - (time.monotonic() - t0)
        wait = min([c.next for c in clients] + [t0 + seconds]) - time.monotonic()
        if wait > 0: time.sleep(min(wait, left))
    for c in clients:
        if c.s is not None: c.s.close()
    return done

def run(loaded):
    p = start()
    time.sleep(1.0)
    done = misbehave(window) if loaded else time.sleep(window)
    stats = request('{"v":1,"id":1,"cmd":"stats"}')
    stop(p)
    beat = next(t for l in stats["loops"] for t in l["tasks"] if t["name"] == "beat")
    return beat, stats["control"], done

rows = []
for i in range(pairs):
    order = [True, False] if i % 2 == 0 else [False, True]
    got = {}
    for loaded in order:
        got[loaded] = run(loaded)
    (a, ctl, done), (b, _, _) = got[True], got[False]
    ratio = a["lateness_p99_ns"] / b["lateness_p99_ns"]
    rows.append((a, b, ratio))
    print("pair %d (%s first): p99 %.1f / %.1f us = %.2fx; p50 %.1f / %.1f us; max %.0f / %.0f us; runs %d / %d; "
          "accepted %d, slow %d, errors %d; %s" % (
          i + 1, "clients" if order[0] else "none", a["lateness_p99_ns"] / 1e3, b["lateness_p99_ns"] / 1e3, ratio,
          a["lateness_p50_ns"] / 1e3, b["lateness_p50_ns"] / 1e3, a["lateness_max_ns"] / 1e3, b["lateness_max_ns"] / 1e3,
          a["runs"], b["runs"], ctl["accepted"], ctl["slow"], sum(ctl["errors"].values()), done), file=sys.stderr)

med = lambda xs: statistics.median(xs)
print()
print("1 kHz task (on the %s loop) lateness with misbehaving control clients (%s) vs none (release boardd --mock%s, %d pairs of %.0f s windows, load average %.2f at the end)" % (
      task_loop, ",".join(sorted(roles)), {"pin": ", boardd on CPU 0, the clients on CPU 1", "isolate": ", the task's worker on CPU 1 (cpu: 1), boardd's other threads and the clients on CPU 0"}.get(placement, ""), pairs, window, os.getloadavg()[0]))
print("%-28s %-12s %-12s %s" % ("figure", "clients", "none", "ratio"))
print("%-28s %-12.1f %-12.1f %.2fx (median of the pairs' ratios; each pair: %s)" % (
      "lateness p99 us (median)", med([r[0]["lateness_p99_ns"] for r in rows]) / 1e3, med([r[1]["lateness_p99_ns"] for r in rows]) / 1e3,
      med([r[2] for r in rows]), ", ".join("%.2f" % r[2] for r in rows)))
print("%-28s %-12.1f %-12.1f %.2fx" % (
      "lateness p50 us (median)", med([r[0]["lateness_p50_ns"] for r in rows]) / 1e3, med([r[1]["lateness_p50_ns"] for r in rows]) / 1e3,
      med([r[0]["lateness_p50_ns"] / r[1]["lateness_p50_ns"] for r in rows])))
print("%-28s %-12.1f %-12.1f" % (
      "lateness max us (median)", med([r[0]["lateness_max_ns"] for r in rows]) / 1e3, med([r[1]["lateness_max_ns"] for r in rows]) / 1e3))
EOF
