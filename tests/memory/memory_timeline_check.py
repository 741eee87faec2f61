#!/usr/bin/env python3
"""Runs an example with --memory-timeline, then checks what it wrote:

    memory_timeline_check.py check <example> <work dir> <source dir> [example arguments...]
        the JSON parses and holds to the schema (scripts/plot-memory-timeline.py --check), with
        the capture and named allocations the example makes;
    memory_timeline_check.py plot <example> <work dir> <source dir> <python> [arguments...]
        scripts/plot-memory-timeline.py draws it to a PNG with that Python's matplotlib.
        Prints SKIPPED (ctest reports the test as skipped) when that Python or its matplotlib
        is missing: scripts/install-torch.sh puts them in the project's virtual environment."""

import json
import os
import subprocess
import sys


def transformer_lm(data: dict) -> list:
    """Its model's named buffers, its one step's capture, and the model live at the end."""
    problems = []
    names = {a["name"] for a in data["allocations"]}
    for wanted in ("parameters (bf16)", "gradients (bf16)"):
        if wanted not in names:
            problems.append(f"no allocation named {wanted!r}")
    committed = [c for c in data["captures"] if c["committed"]]
    if [c["name"] for c in committed] != ["transformer_lm step"]:
        problems.append(f"expected the one capture 'transformer_lm step', got {committed}")
    if not [a for a in data["allocations"] if a["freed_at"] is None]:
        problems.append("no allocation is live at the end, while the model still is")
    return problems


def varying_shapes(data: dict) -> list:
    """One capture per capture size used, each with its own named scratch allocated inside it."""
    problems = []
    committed = [c for c in data["captures"] if c["committed"]]
    if len(committed) < 3:
        problems.append(f"expected a capture per capture size (at least 3), got {len(committed)}")
    for capture in committed:
        inside = [a for a in data["allocations"] if a["graph"] == capture["graph"]]
        if not any(a["name"].startswith("hidden, size ") for a in inside):
            problems.append(f"capture {capture['graph']} holds no named scratch: {inside}")
    return problems


EXPECTED = {"transformer_lm": transformer_lm, "varying_shapes": varying_shapes}


def main() -> int:
    mode, example, work, source = sys.argv[1:5]
    rest = sys.argv[5:]
    python = None
    if mode == "plot":
        python, rest = rest[0], rest[1:]
        if not os.path.exists(python):
            print(f"SKIPPED: no Python at {python} (scripts/install-torch.sh makes it)")
            return 0
        if subprocess.run([python, "-c", "import matplotlib"], capture_output=True).returncode:
            print(f"SKIPPED: {python} has no matplotlib (scripts/install-torch.sh installs it)")
            return 0
    os.makedirs(work, exist_ok=True)
    timeline = os.path.join(work, f"timeline_{mode}.json")
    png = os.path.join(work, f"timeline_{mode}.png")
    for stale in (timeline, png):
        if os.path.exists(stale):
            os.remove(stale)
    run = subprocess.run([example, *rest, "--memory-timeline", timeline], capture_output=True,
                         text=True, timeout=600)
    print(run.stdout)
    print(run.stderr, file=sys.stderr)
    if "no CUDA device visible" in run.stdout + run.stderr:
        print("SKIPPED: no CUDA device visible")
        return 0
    if run.returncode != 0:
        print(f"FAILED: the example exited with {run.returncode}")
        return 1
    script = os.path.join(source, "scripts", "plot-memory-timeline.py")
    if mode == "check":
        checked = subprocess.run([sys.executable, script, "--check", timeline], capture_output=True,
                                 text=True)
        print(checked.stdout, checked.stderr)
        if checked.returncode != 0:
            print("FAILED: the timeline does not hold to its schema")
            return 1
        with open(timeline, encoding="utf-8") as f:
            data = json.load(f)
        problems = []
        if not data["segments"]:
            problems.append("no segment")
        expect = EXPECTED[os.path.basename(example)]
        problems += expect(data)
        if problems:
            print("FAILED: " + "; ".join(problems))
            return 1
        print(f"the timeline holds to its schema: {len(data['allocations'])} allocations")
        return 0
    drawn = subprocess.run([python, script, timeline, "-o", png], capture_output=True, text=True)
    print(drawn.stdout, drawn.stderr)
    if drawn.returncode != 0:
        print("FAILED: the plot script failed")
        return 1
    with open(png, "rb") as f:
        head = f.read(8)
    if head != b"\x89PNG\r\n\x1a\n" or os.path.getsize(png) < 10000:
        print(f"FAILED: {png} is no PNG of a plot ({os.path.getsize(png)} bytes)")
        return 1
    print(f"drew {png}: {os.path.getsize(png)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
