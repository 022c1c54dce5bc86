#!/usr/bin/env python3
"""A fleet's controller on MQTT (paho-mqtt), as a home server or Home
Assistant is: it finds every board by its availability and discovery,
commands each one's valve and sequence, and checks that each board's
events arrive under that board's topics only, none mixed up.

To stand in for the people pressing buttons in the greenhouses, it clicks
each board's button through that board's control socket (a different
number of clicks per board), and checks that exactly those clicks arrive.

    controller.py --port P --user U --password-file F \
        --board ID=SOCKET [--board ID=SOCKET ...]

Prints one line per check; exits 0 when every check passed, 1 otherwise.
"""
import argparse
import json
import socket
import sys
import threading
import time

import paho.mqtt.client as mqtt

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--user", required=True)
parser.add_argument("--password-file", required=True)
parser.add_argument("--board", action="append", required=True, help="ID=CONTROL_SOCKET")
parser.add_argument("--timeout", type=float, default=30)
args = parser.parse_args()
boards = dict(b.split("=", 1) for b in args.board)

lock = threading.Lock()
messages = []  # (time, topic, payload, retained)


def on_message(client, userdata, msg):
    with lock:
        messages.append((time.monotonic(), msg.topic, msg.payload.decode("utf-8", "replace"), msg.retain))


failures = 0


def check(ok, what):
    global failures
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures += 1
    return ok


def wait(pred, timeout=None):
    end = time.monotonic() + (timeout or args.timeout)
    while time.monotonic() < end:
        with lock:
            for m in messages:
                if pred(m):
                    return m
        time.sleep(0.02)
    return None


def since(t0, topic):
    with lock:
        return [m for m in messages if m[0] >= t0 and m[1] == topic]


def control(sock_path, request):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock_path)
    s.sendall((json.dumps(request) + "\n").encode())
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        reply += chunk
    s.close()
    return json.loads(reply)


if hasattr(mqtt, "CallbackAPIVersion"):  # paho-mqtt 2.x (PyPI); 1.6 is Debian 12's python3-paho-mqtt
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="fleet-controller")
else:
    client = mqtt.Client(client_id="fleet-controller")
client.username_pw_set(args.user, open(args.password_file).read().strip())
client.on_message = on_message
client.connect(args.host, args.port, keepalive=30)
client.subscribe([("boardd/#", 1), ("homeassistant/#", 1)])
client.loop_start()

# 1. Every board is online and discovered, each as its own device.
for b in boards:
    check(wait(lambda m: m[1] == f"boardd/{b}/status" and m[2] == "online") is not None, f"{b}: online")
    d = wait(lambda m: m[1] == f"homeassistant/device/{b}/config" and m[2])
    if check(d is not None, f"{b}: discovery published"):
        cfg = json.loads(d[2])
        check(cfg["dev"]["ids"] == [f"boardd_{b}"], f"{b}: its own device id")
        check(cfg["cmps"]["line_valve"]["cmd_t"] == f"boardd/{b}/line/valve/set", f"{b}: its valve is a switch on its own topic")
        check(cfg["cmps"]["sequence_water"]["cmd_t"] == f"boardd/{b}/sequence/water/run", f"{b}: its water sequence is a button")
        check(sorted(cfg["cmps"]["gesture_button"]["evt_typ"]) == ["click", "hold"], f"{b}: its button's gestures are events")

# 2. Each board's valve, commanded on its own: only that board answers.
for b in boards:
    t0 = time.monotonic()
    client.publish(f"boardd/{b}/line/valve/set", "ON", qos=1)
    check(wait(lambda m: m[0] >= t0 and m[1] == f"boardd/{b}/line/valve/state" and m[2] == "ON") is not None, f"{b}: valve ON")
    time.sleep(0.3)
    others = [o for o in boards if o != b and any(m[2] == "ON" for m in since(t0, f"boardd/{o}/line/valve/state"))]
    check(not others, f"{b}: no other board's valve moved ({others})")
    client.publish(f"boardd/{b}/line/valve/set", "OFF", qos=1)
    check(wait(lambda m: m[0] >= t0 and m[1] == f"boardd/{b}/line/valve/state" and m[2] == "OFF") is not None, f"{b}: valve OFF")

# 3. Each board's sequence, run remotely.
for b in boards:
    t0 = time.monotonic()
    client.publish(f"boardd/{b}/sequence/water/run", "START", qos=1)
    ev = wait(lambda m: m[0] >= t0 and m[1] == f"boardd/{b}/sequence/water/event")
    check(ev is not None and json.loads(ev[2])["event"] == "started", f"{b}: water started")
    check(wait(lambda m: m[0] >= t0 and m[1] == f"boardd/{b}/sequence/water/state" and m[2] == "idle") is not None, f"{b}: water done")

# 4. A different number of clicks on each board: each board's events are its own.
t0 = time.monotonic()
for i, (b, path) in enumerate(boards.items()):
    for k in range(i + 1):
        r = control(path, {"v": 1, "id": k, "cmd": "click", "line": "button"})
        check(r.get("ok") is True, f"{b}: click {k + 1} of {i + 1} driven")
        time.sleep(0.6)  # longer than the gesture's gap: separate clicks
for i, b in enumerate(boards):
    want = i + 1
    end = time.monotonic() + args.timeout
    while time.monotonic() < end and len(since(t0, f"boardd/{b}/line/button/gesture")) < want:
        time.sleep(0.05)
    time.sleep(0.5)
    gestures = [json.loads(m[2])["event_type"] for m in since(t0, f"boardd/{b}/line/button/gesture")]
    edges = [json.loads(m[2])["value"] for m in since(t0, f"boardd/{b}/line/button/edge")]
    check(gestures == ["click"] * want, f"{b}: {want} click event(s), got {gestures}")
    check(edges == ["ON", "OFF"] * want, f"{b}: {2 * want} edges in order, got {edges}")

# 5. Every message under boardd/<id>/ names a known board: none from nowhere.
with lock:
    strays = {m[1] for m in messages if m[1].startswith("boardd/") and m[1].split("/")[1] not in boards}
check(not strays, f"no topics of unknown boards ({sorted(strays)})")

client.loop_stop()
client.disconnect()
print(f"{'FAILED' if failures else 'OK'}: {failures} failed check(s)")
sys.exit(1 if failures else 0)
