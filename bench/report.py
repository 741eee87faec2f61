#!/usr/bin/env python3
"""Turns one benchmark run (Google Benchmark JSON files and the PyTorch comparisons) into a
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


# The transformer training step: graphstep's benchmark names its rows
# transformer_step/<mode>/<config>; bench/compare/pytorch_transformer.py writes PyTorch's.
TRANSFORMER_CONFIGS = ("launch_bound", "compute_bound")
TRANSFORMER_SHAPE = ("layers", "width", "heads", "batch", "sequence")
# The bars of the plot and the columns of the speedups: (source, mode, label).
TRANSFORMER_SERIES = (("graphstep", "eager", "graphstep eager"),
                      ("graphstep", "graphed", "graphstep graphed"),
                      ("pytorch", "eager", "PyTorch eager"),
                      ("pytorch", "graphed", "torch.cuda.graph"),
                      ("pytorch", "compile_reduce_overhead", "torch.compile"))
UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def cell(value, digits: int = 4) -> str:
    """A table cell: numbers to a few significant digits, text without line breaks or pipes."""
    if value is None or value == "":
        return "—"
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"
    return str(value).replace("\n", " ").replace("|", "\\|")


def mib(value):
    return None if value is None else value / 2**20


def read_comparison(path: pathlib.Path) -> tuple:
    """A comparison script's JSON and, when it has no results, a sentence saying why."""
    if not path.exists():
        return {}, f"{path.name} is missing (the comparison did not run)."
    try:
        data = json.loads(path.read_text())
    except ValueError as error:
        return {}, f"{path.name} could not be read ({error}): the script failed before its JSON."
    if not isinstance(data, dict):
        return {}, f"{path.name} holds no JSON object."
    if "results" not in data:
        return {}, "skipped: " + data.get("skipped", "no results and no reason given") + "."
    return data, ""


def graphstep_transformer_rows(gpu: list) -> dict:
    """graphstep's transformer rows by (config, mode), with the GPU time in microseconds."""
    rows = {}
    for r in gpu:
        m = re.match(r"transformer_step/(eager|graphed)/([^/]+)", r["name"])
        if m:
            us = r["real_time"] * UNIT_US.get(r.get("time_unit", "ns"), 1e-3)
            rows[(m.group(2), m.group(1))] = dict(r, median_us=us)
    return rows


def transformer_times(mine: dict, theirs: dict) -> dict:
    """Median GPU time per step in microseconds by (config, source, mode), where measured."""
    times = {}
    for (config, mode), r in mine.items():
        times[(config, "graphstep", mode)] = r["median_us"]
    for (config, mode), r in theirs.items():
        if "median_us" in r:
            times[(config, "pytorch", mode)] = r["median_us"]
    return times


def shape_of(r: dict) -> str:
    return ", ".join(str(int(r[k])) if r.get(k) is not None else "?" for k in TRANSFORMER_SHAPE)


def graphstep_transformer_table(run: pathlib.Path, mine: dict, configs: list) -> list:
    if not mine:
        if (run / "graphstep_bench.json").exists():
            return ["No `transformer_step` rows in graphstep_bench.json (no GPU, the benchmark "
                    "was filtered out, or it failed)."]
        return ["graphstep_bench.json is missing (graphstep_bench did not run)."]
    lines = ["| config | mode | " + " | ".join(TRANSFORMER_SHAPE) + " | GPU time per step (us) "
             "| host us | capture ms | instantiate ms | pool mapped MiB | peak live MiB | "
             "attention |",
             "| --- | --- | " + "---: | " * (len(TRANSFORMER_SHAPE) + 6) + "--- |"]
    for (config, mode), r in sorted(mine.items(),
                                    key=lambda kv: (configs.index(kv[0][0]), kv[0][1])):
        values = [r.get(k) for k in TRANSFORMER_SHAPE] + [
            r["median_us"], r.get("host_us"), r.get("capture_ms"), r.get("instantiate_ms"),
            mib(r.get("pool_mapped_bytes")), mib(r.get("peak_live_bytes"))]
        label = r.get("label", "").removeprefix("attention: ")
        lines.append(f"| {config} | {mode} | " + " | ".join(cell(v) for v in values)
                     + f" | {cell(label)} |")
    absent = [f"{c} {m}" for c in configs for m in ("eager", "graphed") if (c, m) not in mine]
    if absent:
        lines += ["", "No graphstep rows for: " + ", ".join(absent) + "."]
    return lines


def pytorch_transformer_table(torch: dict, theirs: dict, configs: list) -> list:
    lines = [f"PyTorch {torch.get('torch', '?')} on {torch.get('device', '?')}, fp32 parameters "
             "under bf16 autocast. `graphed`: the whole step captured with torch.cuda.graph; "
             "`compile_reduce_overhead`: torch.compile(mode=\"reduce-overhead\") of forward and "
             "loss. Peak allocated: torch.cuda.max_memory_allocated over the mode (graphstep's "
             "memory columns are its pool's). First losses: the first three steps; last loss: "
             "the last timed step (every mode of a configuration makes the same number of "
             "updates, so their last losses should be close)."
             + (" Measured on the CPU (a smoke test): the times are host times."
                if torch.get("device") == "cpu" else ""), "",
             "| config | mode | " + " | ".join(TRANSFORMER_SHAPE) + " | GPU time per step (us) "
             "| host us | capture ms | instantiate ms | peak allocated MiB | first losses | "
             "last loss |",
             "| --- | --- | " + "---: | " * (len(TRANSFORMER_SHAPE) + 5) + "--- | ---: |"]
    failures = []
    for r in torch["results"]:
        if "error" in r:
            failures.append(f"- {r.get('config')} {r.get('mode')} failed: "
                            f"{cell(str(r['error'])[:300])}")
            continue
        values = [r.get(k) for k in TRANSFORMER_SHAPE] + [
            r.get("median_us"), r.get("host_us"), r.get("capture_ms"), r.get("instantiate_ms"),
            mib(r.get("peak_allocated_bytes"))]
        losses = ", ".join(f"{x:.4f}" for x in r.get("losses", []))
        lines.append(f"| {r.get('config')} | {r.get('mode')} | "
                     + " | ".join(cell(v) for v in values)
                     + f" | {losses or '—'} | {cell(r.get('last_loss'))} |")
    if failures:
        lines += [""] + failures
    absent = [f"{c} {m}" for c in configs for m in ("eager", "graphed", "compile_reduce_overhead")
              if (c, m) not in theirs]
    if absent:
        lines += ["", "No PyTorch rows for: " + ", ".join(absent) + "."]
    return lines


def shape_warnings(mine: dict, theirs: dict, configs: list) -> list:
    """Both sides must have measured the same model for the ratios to mean anything."""
    lines = []
    for config in configs:
        shapes = {}
        for source, rows in (("graphstep", mine), ("PyTorch", theirs)):
            for (c, _), r in rows.items():
                if c == config and "error" not in r:
                    shapes.setdefault(source, set()).add(shape_of(r))
        if len(set().union(*shapes.values())) > 1:
            measured = "; ".join(f"{source} {' or '.join(sorted(s))}"
                                 for source, s in shapes.items())
            lines += [f"**Warning**: the rows of {config} are not all the same model "
                      f"({', '.join(TRANSFORMER_SHAPE)}: {measured}); the ratios below compare "
                      "different models.", ""]
    return lines


def speedups(times: dict, configs: list) -> list:
    measured = [c for c in configs if (c, "graphstep", "graphed") in times]
    if not measured:
        return ["None: graphstep's graphed step was not measured."]
    lines = ["The other step's GPU time divided by graphstep graphed's (above 1: the graphed "
             "step is faster); — where the other was not measured.", "",
             "| config | graphstep graphed (us) | vs graphstep eager | vs PyTorch eager | "
             "vs torch.cuda.graph | vs torch.compile |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for config in measured:
        graphed = times[(config, "graphstep", "graphed")]
        ratios = []
        for source, mode, _ in TRANSFORMER_SERIES:
            if (source, mode) != ("graphstep", "graphed"):
                other = times.get((config, source, mode))
                ratios.append(f"{other / graphed:.2f}×" if other else "—")
        lines.append(f"| {config} | {cell(graphed)} | " + " | ".join(ratios) + " |")
    return lines


def transformer_section(run: pathlib.Path, gpu: list) -> list:
    """The section of the report on the GPT-2-style training step: graphstep's rows, PyTorch's,
    the speedups per configuration and a plot; what is missing is said, not skipped over."""
    mine = graphstep_transformer_rows(gpu)
    torch, torch_problem = read_comparison(run / "pytorch_transformer.json")
    theirs = {(r["config"], r["mode"]): r for r in torch.get("results", [])
              if isinstance(r.get("config"), str) and isinstance(r.get("mode"), str)}
    # The configurations scripts/bench.sh runs, then any other one found (say tiny).
    configs = list(TRANSFORMER_CONFIGS)
    configs += sorted({k[0] for k in list(mine) + list(theirs)} - set(configs))
    times = transformer_times(mine, theirs)
    return (["## Transformer training step", "",
             "GPT-2-style decoder of examples/transformer_lm (bf16, AdamW, gradient clipping), "
             "one whole training step; median GPU time per step from CUDA events.", "",
             "### graphstep", ""]
            + graphstep_transformer_table(run, mine, configs) + ["", "### PyTorch", ""]
            + (["PyTorch: " + torch_problem] if torch_problem
               else pytorch_transformer_table(torch, theirs, configs)) + [""]
            + shape_warnings(mine, theirs, configs)
            + ["### Speedups of graphstep's graphed step", ""] + speedups(times, configs)
            + [""] + plot_transformer(run, configs, times))


def plot_transformer(run: pathlib.Path, configs: list, times: dict) -> list:
    """transformer_step.png: one group of bars per configuration, one bar per implementation
    and mode. Each group has its own linear axis: the configurations differ by orders of
    magnitude, and within one the differences are what matters."""
    configs = [c for c in configs if any(k[0] == c for k in times)]
    if not configs:
        return []
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["Plot skipped: matplotlib is not installed."]
    fig, axes = plt.subplots(1, len(configs), figsize=(max(7.0, 3.5 * len(configs)), 4),
                             squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, config in zip(axes[0], configs):
        for i, (source, mode, _) in enumerate(TRANSFORMER_SERIES):
            us = times.get((config, source, mode))
            if us is None:
                ax.text(i, 0, "not\nmeasured", ha="center", va="bottom", fontsize=6)
                continue
            bars = ax.bar(i, us / 1e3, color=colors[i % len(colors)])
            ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=2)
        ax.set_xticks([])
        ax.set_xlim(-0.6, len(TRANSFORMER_SERIES) - 0.4)  # room for the bars not measured
        ax.set(title=config, ylabel="GPU time per step (ms)")
        ax.margins(y=0.15)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[i % len(colors)])
               for i in range(len(TRANSFORMER_SERIES))]
    fig.legend(handles, [label for _, _, label in TRANSFORMER_SERIES], loc="lower center",
               ncol=len(TRANSFORMER_SERIES), fontsize=7, frameon=False)
    fig.suptitle("Transformer training step")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(run / "transformer_step.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return ["![transformer training step](transformer_step.png)"]


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
    skipped = run / "skipped.txt"
    if skipped.exists() and skipped.read_text().strip():
        lines += ["Skipped in this run:", ""]
        lines += [f"- {line}" for line in skipped.read_text().strip().splitlines()] + [""]
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
                ("many_sizes/", ["sizes", "capture_ms", "pool_MiB",
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
                                              "greedy_by_size_smallest_gap_ratio", "sizes",
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
    lines += [""] + transformer_section(run, gpu)
    (run / "report.md").write_text("\n".join(lines) + "\n")
    print(f"report written to {run / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
