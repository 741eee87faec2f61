#!/usr/bin/env python3
"""Tests of bench/compare_runs.py: its verdicts on runs written here with known spreads, its
errors on bad input, and (given graphstep_cpu_bench) a comparison of two real runs.

    compare_runs_test.py <source dir> [graphstep_cpu_bench]
"""

import json
import pathlib
import subprocess
import sys
import tempfile
import unittest

SOURCE = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(".")
CPU_BENCH = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
sys.path.insert(0, str(SOURCE / "bench"))
import compare_runs  # noqa: E402


def repeated(name: str, mean: float, stddev: float, median: float, unit="us", count=5) -> list:
    """The aggregate rows Google Benchmark writes for a benchmark with Repetitions(count)."""
    rows = []
    for aggregate, value in (("mean", mean), ("median", median), ("stddev", stddev),
                             ("cv", stddev / mean)):
        rows.append({"name": f"{name}/repeats:{count}_{aggregate}",
                     "run_name": f"{name}/repeats:{count}", "run_type": "aggregate",
                     "repetitions": count, "aggregate_name": aggregate,
                     "real_time": value, "cpu_time": value, "time_unit": unit})
    return rows


def single(name: str, time: float, unit="us") -> list:
    return [{"name": name, "run_name": name, "run_type": "iteration", "real_time": time,
             "cpu_time": time, "time_unit": unit}]


class Runs:
    """Two run directories in a temporary folder."""

    def __init__(self):
        self.folder = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self.folder.name)

    def write(self, run: str, rows: list, gpu="NVIDIA H100 80GB HBM3, 580.159.04",
              extra: dict = None) -> pathlib.Path:
        path = self.root / run
        path.mkdir(exist_ok=True)
        (path / "graphstep_bench.json").write_text(json.dumps({"context": {}, "benchmarks": rows}))
        (path / "context.txt").write_text(f"commit: {run}\ngpu: {gpu}\nnvcc: 13.0\n")
        for name, content in (extra or {}).items():
            (path / name).write_text(content)
        return path

    def compare(self, *arguments) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(SOURCE / "bench" / "compare_runs.py"),
                               *[str(a) for a in arguments]], capture_output=True, text=True)


def verdict_of(output: str, benchmark: str) -> str:
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 5 and cells[1] == benchmark:
            return cells[5].strip("*")
    raise AssertionError(f"{benchmark} is not in the table:\n{output}")


class Verdicts(unittest.TestCase):
    def setUp(self):
        self.runs = Runs()

    def tearDown(self):
        self.runs.folder.cleanup()

    def test_a_change_beyond_the_noise_and_the_threshold_is_called_slower_or_faster(self):
        base = self.runs.write("a", repeated("step/1", 100.0, 1.0, 100.0)
                               + repeated("step/2", 100.0, 1.0, 100.0))
        new = self.runs.write("b", repeated("step/1", 120.0, 1.0, 120.0)
                              + repeated("step/2", 80.0, 1.0, 80.0))
        run = self.runs.compare(base, new)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(verdict_of(run.stdout, "step/1"), "slower")
        self.assertEqual(verdict_of(run.stdout, "step/2"), "faster")
        self.assertIn("+20.0 %", run.stdout)
        self.assertIn("1 faster, 1 slower, 0 within noise", run.stdout)

    def test_a_large_change_within_a_large_spread_is_noise(self):
        base = self.runs.write("a", repeated("step", 100.0, 30.0, 100.0))
        new = self.runs.write("b", repeated("step", 120.0, 30.0, 120.0))
        self.assertEqual(verdict_of(self.runs.compare(base, new).stdout, "step"), "noise")

    def test_a_significant_change_below_the_threshold_is_noise(self):
        base = self.runs.write("a", repeated("step", 100.0, 0.1, 100.0))
        new = self.runs.write("b", repeated("step", 103.0, 0.1, 103.0))
        run = self.runs.compare(base, new)
        self.assertEqual(verdict_of(run.stdout, "step"), "noise")
        self.assertEqual(verdict_of(self.runs.compare(base, new, "--threshold", "2").stdout,
                                    "step"), "slower")

    def test_time_units_are_converted_before_comparing(self):
        base = self.runs.write("a", repeated("step", 1500.0, 1.0, 1500.0, unit="us"))
        new = self.runs.write("b", repeated("step", 1.5, 0.001, 1.5, unit="ms"))
        run = self.runs.compare(base, new)
        self.assertEqual(verdict_of(run.stdout, "step"), "noise")
        self.assertIn("+0.0 %", run.stdout)

    def test_benchmarks_without_repetitions_are_judged_by_the_threshold_alone(self):
        base = self.runs.write("a", single("once", 100.0))
        new = self.runs.write("b", single("once", 106.0))
        run = self.runs.compare(base, new)
        self.assertEqual(verdict_of(run.stdout, "once"), "slower")
        self.assertIn("threshold only", run.stdout)

    def test_pytorch_comparisons_are_compared_by_their_settings(self):
        torch = lambda us: json.dumps({"results": [{"mode": "graphed", "batch": 8,
                                                    "median_us": us}]})
        base = self.runs.write("a", single("x", 1.0), extra={"pytorch.json": torch(100.0)})
        new = self.runs.write("b", single("x", 1.0), extra={"pytorch.json": torch(50.0)})
        self.assertEqual(verdict_of(self.runs.compare(base, new).stdout,
                                    "pytorch/mode:graphed/batch:8"), "faster")

    def test_benchmarks_in_one_run_only_are_listed(self):
        base = self.runs.write("a", single("both", 1.0) + single("gone", 1.0))
        new = self.runs.write("b", single("both", 1.0) + single("added", 1.0))
        run = self.runs.compare(base, new)
        self.assertIn("Only in the base run (1): gone", run.stdout)
        self.assertIn("Only in the new run (1): added", run.stdout)

    def test_runs_on_different_gpus_are_flagged(self):
        base = self.runs.write("a", single("x", 1.0))
        new = self.runs.write("b", single("x", 1.0), gpu="NVIDIA H200, 580.159.04")
        run = self.runs.compare(base, new)
        self.assertIn("Not like for like", run.stdout)
        same = self.runs.compare(base, self.runs.write("c", single("x", 1.0)))
        self.assertNotIn("Not like for like", same.stdout)

    def test_fail_on_slowdown_sets_the_exit_status(self):
        base = self.runs.write("a", single("x", 100.0))
        self.assertEqual(self.runs.compare(base, self.runs.write("b", single("x", 200.0)),
                                           "--fail-on-slowdown").returncode, 1)
        self.assertEqual(self.runs.compare(base, self.runs.write("c", single("x", 50.0)),
                                           "--fail-on-slowdown").returncode, 0)

    def test_the_t_test_rejects_only_beyond_the_critical_value(self):
        # Equal spreads and counts: t = |difference| / (stddev * sqrt(2 / n)), df = 2n - 2 = 8,
        # whose 5 % critical value is 2.306.
        a = {"mean": 100.0, "stddev": 1.0, "count": 5}
        just_below = 2.30 * (2 / 5) ** 0.5
        just_above = 2.31 * (2 / 5) ** 0.5
        self.assertFalse(compare_runs.welch_differs(a, dict(a, mean=100.0 + just_below)))
        self.assertTrue(compare_runs.welch_differs(a, dict(a, mean=100.0 + just_above)))
        critical = [compare_runs.t_critical(df) for df in (1, 2, 3.5, 8, 9.9, 40, 121, 10_000)]
        self.assertEqual(critical, sorted(critical, reverse=True))
        self.assertEqual(compare_runs.t_critical(3.5), 3.182)


class BadInput(unittest.TestCase):
    def setUp(self):
        self.runs = Runs()
        self.good = self.runs.write("good", single("x", 1.0))

    def tearDown(self):
        self.runs.folder.cleanup()

    def refused(self, *arguments) -> str:
        run = self.runs.compare(*arguments)
        self.assertEqual(run.returncode, 2, run.stdout)
        self.assertEqual(run.stdout, "")
        return run.stderr

    def test_a_missing_directory(self):
        self.assertIn("is not a directory", self.refused(self.runs.root / "nope", self.good))

    def test_a_run_without_results(self):
        (self.runs.root / "empty").mkdir()
        self.assertIn("holds no benchmark results",
                      self.refused(self.good, self.runs.root / "empty"))

    def test_a_malformed_json_file(self):
        bad = self.runs.write("bad", [])
        (bad / "graphstep_bench.json").write_text("{ not json")
        self.assertIn("is not a Google Benchmark JSON file", self.refused(self.good, bad))

    def test_an_unknown_time_unit(self):
        bad = self.runs.write("bad", single("x", 1.0, unit="fortnights"))
        self.assertIn("has time unit 'fortnights'", self.refused(self.good, bad))

    def test_a_negative_threshold(self):
        self.assertIn("must be a percentage", self.refused(self.good, self.good,
                                                           "--threshold", "-1"))


@unittest.skipIf(CPU_BENCH is None, "no graphstep_cpu_bench given")
class RealRuns(unittest.TestCase):
    def test_two_runs_of_the_cpu_benchmarks_compare(self):
        with tempfile.TemporaryDirectory() as folder:
            runs = []
            for name in ("first", "second"):
                run = pathlib.Path(folder) / name
                run.mkdir()
                subprocess.run([CPU_BENCH, "--benchmark_filter=^plan_training_step/model:0/"
                                "layers:10/", "--benchmark_min_time=0.01",
                                f"--benchmark_out={run / 'graphstep_cpu_bench.json'}",
                                "--benchmark_out_format=json"], check=True,
                               capture_output=True)
                runs.append(run)
            compared = subprocess.run([sys.executable, str(SOURCE / "bench" / "compare_runs.py"),
                                       *map(str, runs)], capture_output=True, text=True)
            self.assertEqual(compared.returncode, 0, compared.stderr)
            self.assertIn("t-test, 3+3 repetitions", compared.stdout)
            self.assertRegex(compared.stdout, r"\| plan_training_step/model:0/layers:10 \|")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
