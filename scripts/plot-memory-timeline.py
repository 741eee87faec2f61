#!/usr/bin/env python3
"""Draws a memory pool's timeline (memory_pool::timeline().write_json(path), or an example's
--memory-timeline) to a PNG: event order across, the pool's memory up, one box per allocation
from its allocation to its free, coloured by the capture it belongs to (grey: eager), and the
segments' boundaries as lines. The schema is in docs/memory.md#memory-timeline.

    plot-memory-timeline.py TIMELINE.json [-o OUT.png]   draws (needs matplotlib)
    plot-memory-timeline.py TIMELINE.json --check        checks the file only (standard library)

Segments are stacked in address order, each as tall as it ever was, so that segments far apart
in the address space do not leave the plot empty between them; each is labelled with its base.
A box is at least 1/300 of the plot tall, so that small blocks show beside large ones; planned
allocations are hatched, and a capture's span is shaded in its colour."""

import argparse
import json
import sys


class TimelineError(Exception):
    pass


def load(path):
    """The timeline at `path`, checked against the schema and for consistency."""
    try:
        with open(path, encoding="utf-8") as f:
            timeline = json.load(f)
    except OSError as e:
        raise TimelineError(f"cannot read {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise TimelineError(f"{path} is not JSON: {e}") from e
    if not isinstance(timeline, dict) or timeline.get("format") != "graphstep.memory_timeline":
        raise TimelineError(f"{path} is no graphstep memory timeline (its \"format\" is not "
                            "\"graphstep.memory_timeline\")")
    if timeline.get("version") != 1:
        raise TimelineError(f"{path} is a timeline of version {timeline.get('version')}; this "
                            "script reads version 1")
    for key in ("pool", "backing", "alignment", "events", "dropped_allocations", "segments",
                "captures", "allocations"):
        if key not in timeline:
            raise TimelineError(f"{path} has no \"{key}\"")
    events = timeline["events"]
    segments = timeline["segments"]
    problems = []
    for i, s in enumerate(segments):
        if s.get("id") != i or not str(s.get("base", "")).startswith("0x") or not s.get("sizes"):
            problems.append(f"segment {i} is malformed: {s}")
            continue
        ats = [c["at"] for c in s["sizes"]]
        if ats != sorted(ats) or ats[-1] >= max(events, 1):
            problems.append(f"segment {i}: its size changes are not in event order: {ats}")
    graphs = {c["graph"] for c in timeline["captures"]}
    for c in timeline["captures"]:
        if c["ended_at"] is not None and c["ended_at"] <= c["began_at"]:
            problems.append(f"capture {c['name']!r} ends before it begins")
    for i, a in enumerate(timeline["allocations"]):
        if a["id"] != i:
            problems.append(f"allocation {i} has id {a['id']}")
        if not 0 <= a["segment"] < len(segments):
            problems.append(f"allocation {i} names segment {a['segment']} of {len(segments)}")
            continue
        segment = segments[a["segment"]]
        if int(a["address"], 16) != int(segment["base"], 16) + a["offset"]:
            problems.append(f"allocation {i}: address {a['address']} is not its segment's base "
                            f"{segment['base']} + offset {a['offset']}")
        largest = max(c["bytes"] for c in segment["sizes"])
        if a["offset"] + a["bytes"] > largest:
            problems.append(f"allocation {i} ends past its segment ({largest} B)")
        if a["allocated_at"] >= max(events, 1):
            problems.append(f"allocation {i} is allocated at event {a['allocated_at']}, past the "
                            f"last ({events})")
        if a["freed_at"] is not None and not a["allocated_at"] < a["freed_at"] < events:
            problems.append(f"allocation {i} is freed at {a['freed_at']}, not after its "
                            f"allocation at {a['allocated_at']}")
        if a["graph"] != 0 and a["capture"] is not None and a["graph"] not in graphs:
            problems.append(f"allocation {i} names capture of graph {a['graph']}, not listed")
    if problems:
        raise TimelineError(f"{path} is inconsistent:\n  " + "\n  ".join(problems[:20]))
    return timeline


def plot(timeline, out):
    try:
        import matplotlib
    except ImportError as e:
        raise TimelineError("matplotlib is not installed in this Python (scripts/install-torch.sh "
                            "puts it in the project's virtual environment)") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    events = max(timeline["events"], 1)
    segments = timeline["segments"]
    # Segments stacked in address order, each as tall as it ever was.
    order = sorted(range(len(segments)), key=lambda i: int(segments[i]["base"], 16))
    bottom = {}
    height = 0
    for i in order:
        bottom[i] = height
        height += max(c["bytes"] for c in segments[i]["sizes"])
    mib = 1 << 20
    scale, unit = (mib, "MiB") if height >= 4 * mib else (1024, "KiB")

    names = {}
    for c in timeline["captures"]:
        names[c["graph"]] = c["name"] or f"graph {c['graph']}"
    palette = plt.get_cmap("tab10")
    colours = {0: (0.6, 0.6, 0.6, 1.0)}
    for k, graph in enumerate(sorted(names)):
        colours[graph] = palette(k % 10)

    figure, axes = plt.subplots(figsize=(12, 7))
    for a in timeline["allocations"]:
        start = a["allocated_at"]
        end = a["freed_at"] if a["freed_at"] is not None else events
        y = (bottom[a["segment"]] + a["offset"]) / scale
        colour = colours.setdefault(a["graph"], palette(len(colours) % 10))
        # At least a sliver tall: a 256 B block beside a 32 MiB workspace still shows.
        tall = max(a["bytes"] / scale, height / scale / 300)
        axes.add_patch(Rectangle((start, y), max(end - start, 0.6), tall,
                                 facecolor=colour, edgecolor="black", linewidth=0.3,
                                 alpha=0.85, hatch="//" if a["planned"] else None))
    for i in order:
        y = bottom[i] / scale
        axes.axhline(y, color="black", linewidth=0.8)
        axes.annotate(f"segment {i} at {segments[i]['base']}", (0, y), xytext=(2, 2),
                      textcoords="offset points", fontsize=7)
        # The segment's size over time: what was mapped, as a step line.
        xs, ys = [], []
        for change in segments[i]["sizes"]:
            xs.append(change["at"])
            ys.append((bottom[i] + change["bytes"]) / scale)
        xs.append(events)
        ys.append(ys[-1])
        axes.step(xs, ys, where="post", color="tab:red", linewidth=0.8, linestyle="--")
    axes.axhline(height / scale, color="black", linewidth=0.8)
    for c in timeline["captures"]:
        axes.axvspan(c["began_at"], c["ended_at"] if c["ended_at"] is not None else events,
                     color=colours[c["graph"]], alpha=0.08)
    axes.set_xlim(0, events)
    axes.set_ylim(0, max(height / scale, 1e-9))
    axes.set_xlabel("event (allocations, frees, growth, captures, releases, in order)")
    axes.set_ylabel(f"pool memory, {unit} (segments stacked in address order)")
    dropped = timeline["dropped_allocations"]
    axes.set_title(f"memory pool {timeline['pool']} ({timeline['backing']}): "
                   f"{len(timeline['allocations'])} allocations, {len(segments)} segment(s)"
                   + (f", {dropped} allocations not recorded" if dropped else ""))
    legend = [Patch(facecolor=colours[0], label="eager")]
    legend += [Patch(facecolor=colours[g], label=f"capture '{names[g]}'") for g in sorted(names)]
    legend.append(plt.Line2D([], [], color="tab:red", linestyle="--", label="segment size"))
    axes.legend(handles=legend, loc="upper right", fontsize=8)
    figure.tight_layout()
    figure.savefig(out, dpi=120)
    plt.close(figure)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("timeline", help="the JSON a memory_pool's timeline wrote")
    parser.add_argument("-o", "--output", help="the PNG to write (default: TIMELINE with .png)")
    parser.add_argument("--check", action="store_true",
                        help="check the file against the schema only; draw nothing")
    args = parser.parse_args()
    try:
        timeline = load(args.timeline)
        if args.check:
            print(f"{args.timeline}: a valid memory timeline: {len(timeline['segments'])} "
                  f"segment(s), {len(timeline['captures'])} capture(s), "
                  f"{len(timeline['allocations'])} allocation(s), {timeline['events']} events")
            return 0
        out = args.output or (args.timeline[:-5] if args.timeline.endswith(".json")
                              else args.timeline) + ".png"
        plot(timeline, out)
        print(f"wrote {out}")
        return 0
    except TimelineError as e:
        print(f"plot-memory-timeline.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
