#!/usr/bin/env python3
"""Turns one benchmark run (Google Benchmark JSON files and the PyTorch comparison) into a
markdown summary and PNG plots in the same directory.

    python3 bench/report.py bench/results/<run>
"""

import json
import pathlib
import re
import sys


def medians(path: pathlib.Path) -> list:
    """The median rows of a Google Benchmark JSON file."""
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    rows = []
    for b in data.get("benchmarks", []):
        if b.get("aggregate_name", "median") != "median":
            continue
        rows.append(b)
    return rows


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table(rows: list, counters: list) -> list:
    lines = ["| benchmark | time | unit | " + " | ".join(counters) + " |",
             "| --- | ---: | --- | " + " | ".join("---:" for _ in counters) + " |"]
    for r in rows:
        name = re.sub(r"(/repeats:\d+)?_median$", "", r["name"])
        values = [fmt(r.get(c, "")) for c in counters]
        lines.append(f"| {name} | {fmt(r['real_time'])} | {r['time_unit']} | "
                     + " | ".join(values) + " |")
    return lines


def plot(run: pathlib.Path, gpu: list, torch: dict) -> list:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["Plots skipped: matplotlib is not installed."]
    made = []
    launch = [r for r in gpu if r["name"].startswith("launch_overhead/")]
    if launch:
        fig, ax = plt.subplots(figsize=(6, 4))
        for mode in ("eager", "raw_cuda_graph", "graph_replay"):
            pts = sorted((r["kernels"], r["host_us"]) for r in launch
                         if f"/{mode}/" in r["name"])
            if pts:
                ax.plot(*zip(*pts), marker="o", label=mode)
        ax.set(xscale="log", yscale="log", xlabel="kernels per step",
               ylabel="host time per step (us)", title="Launch overhead")
        ax.legend()
        fig.savefig(run / "launch_overhead.png", dpi=120, bbox_inches="tight")
        made.append("![launch overhead](launch_overhead.png)")
    steps = [r for r in gpu if r["name"].startswith("mlp_training_step/")]
    if steps:
        fig, ax = plt.subplots(figsize=(6, 4))
        for mode in ("eager", "graphed"):
            pts = sorted((r["batch"], r["real_time"]) for r in steps if f"/{mode}/" in r["name"])
            if pts:
                ax.plot(*zip(*pts), marker="o", label=f"graphstep {mode}")
        for mode in ("eager", "graphed"):
            pts = sorted((r["batch"], r["median_us"]) for r in torch.get("results", [])
                         if r["mode"] == mode)
            if pts:
                ax.plot(*zip(*pts), marker="s", linestyle="--", label=f"PyTorch {mode}")
        ax.set(xscale="log", yscale="log", xlabel="batch", ylabel="GPU time per step (us)",
               title="MLP training step")
        ax.legend()
        fig.savefig(run / "training_step.png", dpi=120, bbox_inches="tight")
        made.append("![training step](training_step.png)")
    return made


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    run = pathlib.Path(sys.argv[1])
    gpu = medians(run / "graphstep_bench.json")
    cpu = medians(run / "graphstep_cpu_bench.json")
    torch_path = run / "pytorch.json"
    torch = json.loads(torch_path.read_text()) if torch_path.exists() else {}
    lines = [f"# Benchmark run {run.name}", ""]
    context = run / "context.txt"
    if context.exists():
        lines += ["```", context.read_text().strip(), "```", ""]
    families = [("launch_overhead/", ["kernels", "host_us"]),
                ("capture_and_instantiate/", ["us_per_node"]),
                ("mlp_training_step/", ["batch", "host_us"]),
                ("linear_gelu/", ["TFLOP/s", "label"]),
                ("mlp_backward/", ["TFLOP/s", "label"]),
                ("bias_gradient/", ["GB/s"]),
                ("all_reduce_bandwidth/", ["algbw_GBps", "busbw_GBps"]),
                ("bucketed_step/", ["ranks"]),
                ("pool_allocate_free", []), ("cuda_malloc_async_free", []),
                ("bucket_graph_memory/", ["mapped_MiB", "largest_bucket_MiB", "capture_ms"]),
                ("one_segment_step/", ["host_us"]),
                ("many_buckets/", ["buckets", "capture_ms", "pool_MiB",
                                   "switching_request_host_us"])]
    if not gpu:
        lines += ["No GPU results in this run (no device, or graphstep_bench failed).", ""]
    for prefix, counters in families:
        rows = [r for r in gpu if r["name"].startswith(prefix)]
        if rows:
            lines += [f"## {prefix.rstrip('/')}", ""] + table(rows, counters) + [""]
    if cpu:
        lines += ["## CPU", ""] + table(cpu, ["allocations", "footprint_ratio",
                                              "greedy_by_size_ratio",
                                              "greedy_by_size_smallest_gap_ratio", "buckets",
                                              "pad_ratio"]) + [""]
    lines += ["## PyTorch comparison", ""]
    if "results" in torch:
        lines += [f"PyTorch {torch['torch']} on {torch['device']}.", "",
                  "| mode | batch | median GPU time per step (us) |", "| --- | ---: | ---: |"]
        lines += [f"| {r['mode']} | {r['batch']} | {r['median_us']:.1f} |"
                  for r in torch["results"]]
    else:
        lines.append(torch.get("skipped", "Not run."))
    lines += [""] + plot(run, gpu, torch)
    (run / "report.md").write_text("\n".join(lines) + "\n")
    print(f"report written to {run / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
