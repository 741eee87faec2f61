#!/usr/bin/env python3
"""Compares two benchmark runs (two directories written by scripts/bench.sh) benchmark by
benchmark, and says which differences are larger than the runs' own noise.

    python3 bench/compare_runs.py <base run> <new run> [--threshold PERCENT] [--fail-on-slowdown]

For every benchmark in both runs: the base and new median time, the change in percent, and a
verdict. A benchmark repeated in both runs (Google Benchmark's Repetitions: mean, stddev and
count in the JSON) is called faster or slower only when Welch's t-test on the repetitions' means
rejects "no change" at the 5 % level *and* the medians differ by at least the threshold (default
5 %); otherwise it is "noise". A benchmark without repetitions, and the PyTorch comparisons (one
median each), are judged by the threshold alone, which the table says. Benchmarks found in only
one run are listed, and runs on different GPUs or toolkits are flagged as not like for like.

Exit status: 0; 1 with --fail-on-slowdown when a benchmark is slower; 2 on bad input.
"""

import argparse
import json
import math
import pathlib
import re
import sys

# Two-sided 5 % critical values of Student's t by degrees of freedom (any statistics table, e.g.
# NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.6.7.2). Between two rows the smaller
# degrees of freedom's value is used, which is the more cautious one.
T_CRITICAL_5_PERCENT = [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571),
                        (6, 2.447), (7, 2.365), (8, 2.306), (9, 2.262), (10, 2.228),
                        (12, 2.179), (15, 2.131), (20, 2.086), (30, 2.042), (60, 2.000),
                        (120, 1.980)]
NORMAL_CRITICAL_5_PERCENT = 1.960

TO_NANOSECONDS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


class BadRun(Exception):
    """A run directory that cannot be compared; the message says why and what to do."""


def t_critical(degrees_of_freedom: float) -> float:
    value = None
    for df, critical in T_CRITICAL_5_PERCENT:
        if df <= degrees_of_freedom:
            value = critical
    if value is None:
        return T_CRITICAL_5_PERCENT[0][1]
    return NORMAL_CRITICAL_5_PERCENT if degrees_of_freedom > 120 else value


def welch_differs(a: dict, b: dict) -> bool:
    """Whether the means of two repeated measurements differ at the 5 % level (Welch's t-test)."""
    va = a["stddev"] ** 2 / a["count"]
    vb = b["stddev"] ** 2 / b["count"]
    if va + vb == 0.0:
        return a["mean"] != b["mean"]
    t = abs(a["mean"] - b["mean"]) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va ** 2 / (a["count"] - 1) if va else 0.0)
                           + (vb ** 2 / (b["count"] - 1) if vb else 0.0))
    return t > t_critical(df)


def google_benchmark_rows(path: pathlib.Path) -> dict:
    """name -> {median, and mean/stddev/count when repeated}, times in nanoseconds."""
    try:
        data = json.loads(path.read_text())
        rows = data["benchmarks"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadRun(f"{path} is not a Google Benchmark JSON file ({e}); write it with "
                     "--benchmark_out=<file> --benchmark_out_format=json") from None
    found = {}
    for r in rows:
        if r.get("error_occurred"):
            continue
        unit = r.get("time_unit", "ns")
        if unit not in TO_NANOSECONDS:
            raise BadRun(f"{path}: benchmark {r.get('name')!r} has time unit {unit!r}, "
                         f"not one of {sorted(TO_NANOSECONDS)}")
        ns = float(r["real_time"]) * TO_NANOSECONDS[unit]
        aggregate = r.get("aggregate_name")
        if aggregate is None:
            # A benchmark without repetitions: one row, which is its median.
            found.setdefault(r["name"], {})["median"] = ns
            continue
        name = r["run_name"]
        entry = found.setdefault(name, {})
        if aggregate in ("median", "mean", "stddev"):
            entry[aggregate] = ns
            entry["count"] = int(r.get("repetitions", 0))
    return found


def comparison_rows(path: pathlib.Path) -> dict:
    """The medians of a PyTorch comparison (bench/compare/*.py output), named by its settings."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise BadRun(f"{path} is not JSON ({e})") from None
    found = {}
    for r in data.get("results", []):
        if "median_us" not in r:
            continue
        settings = "/".join(f"{k}:{v}" for k, v in r.items()
                            if not isinstance(v, float) and not k.endswith("_us"))
        found[f"{path.stem}/{settings}"] = {"median": float(r["median_us"]) * 1e3}
    return found


def read_run(run: pathlib.Path) -> tuple:
    """(benchmarks by name, context lines) of one run directory."""
    if not run.is_dir():
        raise BadRun(f"{run} is not a directory: pass two directories written by scripts/bench.sh")
    benchmarks = {}
    for path in sorted(run.glob("*.json")):
        if path.name.startswith("pytorch"):
            benchmarks.update(comparison_rows(path))
        else:
            benchmarks.update(google_benchmark_rows(path))
    if not benchmarks:
        raise BadRun(f"{run} holds no benchmark results (*.json): run scripts/bench.sh {run} "
                     "first")
    context = {}
    context_file = run / "context.txt"
    if context_file.exists():
        for line in context_file.read_text().splitlines():
            key, _, value = line.partition(":")
            context[key.strip()] = value.strip()
    return benchmarks, context


def verdict(base: dict, new: dict, threshold: float) -> tuple:
    """(change in percent of the median, verdict, how it was judged)."""
    change = (new["median"] - base["median"]) / base["median"] * 100.0
    repeated = all(x.get("count", 0) >= 2 and "stddev" in x and "mean" in x for x in (base, new))
    direction = "slower" if change > 0 else "faster"
    if repeated:
        how = f"t-test, {base['count']}+{new['count']} repetitions"
        return change, direction if welch_differs(base, new) and abs(change) >= threshold \
            else "noise", how
    return change, direction if abs(change) >= threshold else "noise", "threshold only"


def shown_name(name: str) -> str:
    """A benchmark's name without Google Benchmark's "/repeats:N"."""
    return re.sub(r"/repeats:[0-9]+", "", name)


def fmt_time(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:.4g} ns"


def compare(base_dir: pathlib.Path, new_dir: pathlib.Path, threshold: float) -> tuple:
    """(markdown lines, number of slower benchmarks)."""
    base, base_context = read_run(base_dir)
    new, new_context = read_run(new_dir)
    lines = [f"# {new_dir.name} against {base_dir.name}", ""]
    for key in ("commit", "gpu", "nvcc"):
        a, b = base_context.get(key, "unknown"), new_context.get(key, "unknown")
        lines.append(f"- {key}: {a}" + ("" if a == b else f" → {b}"))
    for key in ("gpu", "nvcc"):
        if base_context.get(key) != new_context.get(key):
            lines.append(f"- **Not like for like**: the runs differ in {key}; a change below may "
                         "be the machine's, not the code's.")
    lines += ["", f"Threshold {threshold:g} %; a repeated benchmark must also pass Welch's "
              "t-test at the 5 % level.", "",
              "| benchmark | base | new | change | verdict | judged by |",
              "| --- | ---: | ---: | ---: | --- | --- |"]
    counts = {"faster": 0, "slower": 0, "noise": 0}
    for name in sorted(set(base) & set(new)):
        if "median" not in base[name] or "median" not in new[name]:
            continue
        change, word, how = verdict(base[name], new[name], threshold)
        counts[word] += 1
        shown = f"**{word}**" if word != "noise" else word
        lines.append(f"| {shown_name(name)} | {fmt_time(base[name]['median'])}"
                     f" | {fmt_time(new[name]['median'])} | {change:+.1f} % | {shown} | {how} |")
    lines += ["", f"{counts['faster']} faster, {counts['slower']} slower, "
              f"{counts['noise']} within noise."]
    for label, only in (("base", set(base) - set(new)), ("new", set(new) - set(base))):
        if only:
            shown = sorted(shown_name(name) for name in only)
            lines.append(f"Only in the {label} run ({len(shown)}): " + ", ".join(shown[:10])
                         + (", …" if len(shown) > 10 else ""))
    return lines, counts["slower"]


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=pathlib.Path, help="the earlier run's directory")
    parser.add_argument("new", type=pathlib.Path, help="the later run's directory")
    parser.add_argument("--threshold", type=float, default=5.0,
                        help="smallest change in percent called a change (default 5)")
    parser.add_argument("--fail-on-slowdown", action="store_true",
                        help="exit with status 1 when a benchmark is slower")
    args = parser.parse_args(argv)
    if not args.threshold >= 0.0:
        print(f"compare_runs.py: --threshold {args.threshold} must be a percentage ≥ 0",
              file=sys.stderr)
        return 2
    try:
        lines, slower = compare(args.base, args.new, args.threshold)
    except BadRun as e:
        print(f"compare_runs.py: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 1 if args.fail_on_slowdown and slower else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
