#!/usr/bin/env bash
# How long `boardd replay` takes for a long recording, beside a reference
# measured in the same run: Python's json module reading the same file
# line by line (what any replay must at least do). The recording is made
# here: a 1 kHz contact toggling an LED for MINUTES minutes (an edge, a write
# and a reaction a millisecond: 180,000 records a minute), the config with it.
#
#   scripts/bench-replay.sh             one hour of a 1 kHz line (10.8 million records)
#   scripts/bench-replay.sh --minutes N N minutes
#   scripts/bench-replay.sh --quick     smoke run (CI): 1 minute, figures not meaningful
#
# Prints the records, boardd replay's wall time and peak RSS, the
# reference's wall time, and the ratio; exits 1 when the replay reports a
# difference (the recording is what the config does, so it must not).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /opt/swift/usr/bin ] && export PATH="/opt/swift/usr/bin:$PATH"
minutes=60
scratch=.build-static
static=(--static-swift-stdlib)
while [ $# -gt 0 ]; do
    case $1 in
    --quick) minutes=1; scratch=.build-guest; static=() ;;
    --minutes) minutes=$2; shift ;;
    *) echo "usage: scripts/bench-replay.sh [--quick] [--minutes N]" >&2; exit 2 ;;
    esac
    shift
done
scripts/install-deps.sh python3 time >&2
swift build -c release "${static[@]}" --product boardd --scratch-path "$scratch" >&2
boardd=$(swift build -c release "${static[@]}" --scratch-path "$scratch" --show-bin-path)/boardd

work=$(mktemp -d /tmp/boardd-bench-replay.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/config.yaml" <<'EOF'
board: demo
lines:
  contact: { pin: BUTTON, input: { edge: both } }
  led: { pin: LED, output: { safe: off } }
reactions:
  - { name: follow, on: { line: contact, edge: both }, do: [ toggle: led ] }
EOF
python3 - "$work/recording.jsonl" "$minutes" <<'EOF'
import sys
path, minutes = sys.argv[1], int(sys.argv[2])
edges = minutes * 60 * 1000
with open(path, "w") as f:
    f.write('{"boardd_recording":1,"config":"config.yaml","board":"demo","seconds":%d,"levels":{"contact":0,"led":0}}\n' % (minutes * 60))
    for i in range(edges):
        t = (i + 1) * 1_000_000
        f.write('{"t":%d,"loop":"main","kind":"edge","line":"contact","edge":"%s"}\n' % (t, "rising" if i % 2 == 0 else "falling"))
        f.write('{"t":%d,"loop":"main","kind":"write","line":"led","value":%d,"by":"reaction:follow"}\n' % (t + 50_000, 1 if i % 2 == 0 else 0))
        f.write('{"t":%d,"loop":"main","kind":"reaction","name":"follow","line":"contact"}\n' % (t + 60_000))
    f.write('{"end":true,"dropped":0}\n')
EOF
records=$(wc -l < "$work/recording.jsonl")
bytes=$(stat -c %s "$work/recording.jsonl")

now() { date +%s.%N; }
t0=$(now)
set +e
/usr/bin/time -f '%M' -o "$work/rss" "$boardd" replay "$work/recording.jsonl" --config "$work/config.yaml" > "$work/out" 2> "$work/err"
status=$?
set -e
t1=$(now)
python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    json.loads(line)
    n += 1
' "$work/recording.jsonl"
t2=$(now)
python3 - "$t0" "$t1" "$t2" "$records" "$bytes" "$(tail -1 "$work/rss")" "$minutes" <<'EOF'
import sys
t0, t1, t2 = map(float, sys.argv[1:4])
records, size, rss, minutes = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
replay, ref = t1 - t0, t2 - t1
print(f"replay of {minutes} min of a 1 kHz line: {records:,} records, {size / 2**20:.1f} MiB")
print(f"  boardd replay        {replay:8.2f} s   peak RSS {rss / 1024:.1f} MiB")
print(f"  python json reading  {ref:8.2f} s   (reference: the same file, json.loads per line)")
print(f"  ratio                {replay / ref:8.2f}x")
EOF
if [ $status -ne 0 ]; then
    echo "bench-replay.sh: boardd replay exited $status (a recording of what the config does must replay without differences):" >&2
    tail -5 "$work/out" >&2
    tail -5 "$work/err" >&2
    exit 1
fi
