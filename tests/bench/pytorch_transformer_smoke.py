#!/usr/bin/env python3
"""Runs bench/compare/pytorch_transformer.py on the CPU with the tiny configuration (eager only)
in the given Python (a virtual environment with PyTorch) and checks what it reports: one eager
row of the tiny model, finite losses starting near ln(vocab) and falling.

    pytorch_transformer_smoke.py <python> <source dir>

Prints SKIPPED (ctest reports the test as skipped) when that Python does not exist."""

import json
import math
import os
import subprocess
import sys


def main() -> int:
    python, source = sys.argv[1], sys.argv[2]
    if not os.path.exists(python):
        print(f"SKIPPED: no Python with PyTorch at {python} (scripts/install-torch.sh makes it)")
        return 0
    script = os.path.join(source, "bench", "compare", "pytorch_transformer.py")
    run = subprocess.run([python, script, "--device", "cpu", "--configs", "tiny", "--steps", "3",
                          "--warmup", "1"], capture_output=True, text=True, timeout=600)
    print(run.stdout)
    print(run.stderr, file=sys.stderr)
    if run.returncode != 0:
        print(f"FAILED: the script exited with {run.returncode}")
        return 1
    report = json.loads(run.stdout)
    if "skipped" in report:
        print(f"FAILED: the script skipped: {report['skipped']}")
        return 1
    rows = [r for r in report["results"] if r.get("config") == "tiny"]
    problems = []
    if len(rows) != 1 or rows[0].get("mode") != "eager" or "error" in rows[0]:
        problems.append(f"expected one eager row of the tiny model, got {rows}")
    else:
        row = rows[0]
        losses = row["losses"] + [row["last_loss"]]
        if not all(math.isfinite(x) for x in losses):
            problems.append(f"losses not finite: {losses}")
        elif abs(losses[0] - math.log(row["vocab"])) > 0.5:
            problems.append(f"first loss {losses[0]} is not near ln({row['vocab']})")
        elif not losses[-1] < losses[0]:
            problems.append(f"the loss did not fall: {losses}")
        if not row.get("median_us", 0) > 0:
            problems.append(f"no step time: {row.get('median_us')}")
    for p in problems:
        print(f"FAILED: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
