#!/usr/bin/env python3
"""Draws a `boardctl trace` file as a picture: one track per loop thread,
slices nested as ui.perfetto.dev stacks them, instants as ticks under them.

    scripts/trace-picture.py TRACE.json OUT.png [--from MS] [--to MS] [--title TEXT]

Times are milliseconds from the trace's start. Needs matplotlib
(`apt install python3-matplotlib` or `pip install matplotlib`). The
picture in docs/ was made with it from docs/trace-demo.json.
"""
import argparse
import colorsys
import json
import zlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402


def colour(name):
    """A stable pastel colour per slice name, as Perfetto colours by name
    (the loop's sleep in light grey)."""
    if name == "wait":
        return (0.88, 0.88, 0.88)
    h = (zlib.crc32(name.encode()) % 360) / 360.0
    return colorsys.hls_to_rgb(h, 0.72, 0.55)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--from", dest="start", type=float, default=None, help="ms")
    ap.add_argument("--to", dest="end", type=float, default=None, help="ms")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()

    events = json.load(open(a.trace))["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    order = {e["tid"]: e["args"]["sort_index"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_sort_index"}
    tids = sorted(names, key=lambda t: order.get(t, t))
    work = [e for e in events if e.get("ph") in ("X", "i")]
    t0 = min(e["ts"] for e in work) / 1000 if a.start is None else a.start
    t1 = max(e["ts"] / 1000 + e.get("dur", 0) / 1000 for e in work) if a.end is None else a.end

    # Per track: slices stacked by nesting (a slice inside another goes one row down).
    tracks = []
    for tid in tids:
        slices = sorted(
            (e for e in work if e["tid"] == tid and e["ph"] == "X"), key=lambda e: (e["ts"], -e.get("dur", 0))
        )
        stack, placed = [], []
        for e in slices:
            s, d = e["ts"] / 1000, e.get("dur", 0) / 1000
            # (A slice that starts where the last ended, to the nanosecond, is beside it.)
            while stack and stack[-1] <= s + 1e-5:
                stack.pop()
            placed.append((s, d, len(stack), e["name"]))
            stack.append(s + d)
        depth = max([p[2] for p in placed] + [0]) + 1
        instants = [e for e in work if e["tid"] == tid and e["ph"] == "i" and t0 <= e["ts"] / 1000 <= t1]
        # A run in a sequence's mode: from its entry to its exit.
        modes, entered = [], None
        for e in sorted((e for e in work if e["tid"] == tid and e.get("cat") == "mode" and e["ph"] == "i"), key=lambda e: e["ts"]):
            if e["name"].startswith("run ") and not e["name"].endswith(" ends"):
                entered = (e["ts"] / 1000, e["name"][4:])
            elif e["name"].endswith(" ends") and entered:
                modes.append((entered[0], e["ts"] / 1000, entered[1]))
                entered = None
        tracks.append((names[tid], placed, depth, instants, modes))

    rows = sum(d + 2.2 for _, _, d, _, _ in tracks)
    fig, ax = plt.subplots(figsize=(14, 0.55 * rows + 1.2), dpi=110)
    y = 0.0
    labels = []
    for name, placed, depth, instants, modes in tracks:
        labels.append((y + 0.3, name))
        y += 0.8
        for s, e, mode in modes:
            ax.add_patch(Rectangle((max(s, t0), y - 0.1), min(e, t1) - max(s, t0), depth + 1.0, facecolor=(1.0, 0.93, 0.8), edgecolor="none", zorder=0))
            ax.text(max(s, t0) + (t1 - t0) / 300, y - 0.2, "in mode " + mode, fontsize=8, color=(0.6, 0.35, 0.0), va="bottom")
        for s, d, level, text in placed:
            if s + d < t0 or s > t1:
                continue
            x0, x1 = max(s, t0), min(s + d, t1)
            w = max(x1 - x0, (t1 - t0) / 2000)
            ax.add_patch(Rectangle((x0, y + level), w, 0.9, facecolor=colour(text), edgecolor="none"))
            if w > (t1 - t0) / 40:
                ax.text(x0 + w / 2, y + level + 0.45, text, ha="center", va="center", fontsize=7, clip_on=True)
        y += depth
        # Instants: a tick per event, coloured by kind; the rare kinds labelled.
        shown = {}
        for e in instants:
            x = e["ts"] / 1000
            ax.plot([x, x], [y + 0.05, y + 0.6], color=colour(e.get("cat", "")), linewidth=0.8)
            cat = e.get("cat")
            if cat in ("held", "lost") or (cat == "mode" and "->" in e["name"]):
                row = shown.get("row", 0)
                ax.text(x, y + 0.75 + 0.35 * row, e["name"][:70], fontsize=6.5, va="top", ha="left", clip_on=True)
                shown["row"] = (row + 1) % 2
        y += 1.4
    # A legend: the slices and the kinds of instants in the window.
    from collections import Counter
    seen = Counter()
    for _, placed, _, instants, _ in tracks:
        seen.update(text for s, d, _, text in placed if s + d >= t0 and s <= t1)
    kinds = Counter(e.get("cat", "") for _, _, _, instants, _ in tracks for e in instants)
    handles = [Rectangle((0, 0), 1, 1, facecolor=colour(n)) for n, _ in seen.most_common(9)]
    handles += [plt.Line2D([0], [0], color=colour(k), linewidth=2) for k, _ in kinds.most_common(6)]
    names = [n for n, _ in seen.most_common(9)] + ["| " + k for k, _ in kinds.most_common(6)]
    ax.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=8, fontsize=7, frameon=False)
    ax.set_xlim(t0, t1)
    ax.set_ylim(y, 0)
    ax.set_yticks([p for p, _ in labels])
    ax.set_yticklabels([n for _, n in labels], fontsize=9, fontweight="bold")
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel("ms from the trace's start")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title(a.title or a.trace, fontsize=10, loc="left")
    fig.tight_layout()
    fig.savefig(a.out)


if __name__ == "__main__":
    main()
