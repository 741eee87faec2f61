#!/usr/bin/env python3
"""Host instructions per graph-cache request against the number of capture sizes, counted by callgrind.

Runs a replay-cost benchmark under valgrind's callgrind, collecting only the requests of its
timed loop (the benchmark toggles collection around each with CALLGRIND_TOGGLE_COLLECT), and
prints per request:
  total  every instruction of the request;
  own    graphstep's own (its code and the C++ library it calls), without the CUDA runtime's:
         the library's calls into `cuda*`/`cu*` entry points, which on the simulated device run
         the simulator.
  calls  with --calls: the CUDA runtime calls graphstep made, by name.
Requests are counted by the benchmark (its counter timed_requests: every timed request of the
process, the runs Google Benchmark makes to size its iterations included).

  bench/replay_cost_callgrind.py build-sim/bench/graphstep_bench graph_cache_replay \
      --entry 'basic_graph_cache<graphstep::schedule::capture_sizes>::run'
  bench/replay_cost_callgrind.py build-sim/bench/graphstep_cpu_bench replay_cost/one_stream
  bench/replay_cost_callgrind.py build-sim/bench/graphstep_bench graph_exec_replay \
      --sizes 0,1 --entry 'graphstep::graphs::graph_exec::replay' --calls
(graph_exec_replay/0: a replay without a pool; /1: with one.)
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

CUDA_ENTRY = re.compile(r"^(cuda|cu)[A-Z]")
# The library's own functions (the simulator's are graphstep::sim::).
OWN = re.compile(r"^graphstep::(?!sim::)")


def count(path, entry):
    names = {}
    fn = ""
    cfn = ""
    total = 0
    foreign = 0
    entered = 0
    pending_call = False
    calls = {}

    def name_of(text):
        match = re.match(r"\((\d+)\)(?: (.*))?", text)
        if not match:
            return text
        if match.group(2):
            names[match.group(1)] = match.group(2)
        return names.get(match.group(1), "")

    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            line = line.rstrip("\n")
            if line.startswith("fn="):
                fn = name_of(line[3:])
            elif line.startswith("cfn="):
                cfn = name_of(line[4:])
            elif line.startswith("calls="):
                pending_call = True
                if CUDA_ENTRY.search(cfn) and OWN.search(fn):
                    name = cfn.split("(")[0]
                    calls[name] = calls.get(name, 0) + int(line[6:].split()[0])
            elif line.startswith(("summary:", "totals:")):
                total = max(total, int(line.split()[1]))
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                # A cost line: a call's inclusive cost right after calls=, else fn's own.
                cost = int(line.split()[1])
                if pending_call and CUDA_ENTRY.search(cfn) and OWN.search(fn):
                    foreign += cost
                # The entry's own cost and its calls', counted inside it: the edge into it
                # may be recorded only in part where collection is toggled around it.
                if entry and entry in fn:
                    entered += cost
                pending_call = False
    return (entered if entry else total), foreign, calls


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("benchmark", help="the benchmark's name before /<sizes>")
    parser.add_argument("--sizes", default="8,32,128,512")
    parser.add_argument("--min-time", default="0.01", help="--benchmark_min_time, seconds")
    parser.add_argument(
        "--entry", default="",
        help="count only the calls of this function (its inclusive cost, on its own thread): "
        "needed where other threads run while a request is collected, as the simulated "
        "device's do")
    parser.add_argument("--calls", action="store_true",
                        help="also print the CUDA runtime calls graphstep made per request")
    args = parser.parse_args()
    print(f"{'sizes':>8} {'requests':>9} {'total Ir':>10} {'own Ir':>10}")
    for sizes in args.sizes.split(","):
        with tempfile.TemporaryDirectory() as scratch:
            out = os.path.join(scratch, "callgrind.out")
            report = os.path.join(scratch, "benchmark.json")
            subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                 "--collect-atstart=no", args.binary,
                 f"--benchmark_filter=^{args.benchmark}/{sizes}/",
                 f"--benchmark_min_time={args.min_time}", f"--benchmark_out={report}",
                 "--benchmark_out_format=json"],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            total, foreign, calls = count(out, args.entry)
            with open(report, encoding="utf-8") as data:
                requests = max(run.get("timed_requests", 0)
                               for run in json.load(data)["benchmarks"])
        if requests == 0:
            sys.exit(f"no request counted for {args.benchmark}/{sizes}")
        print(f"{sizes:>8} {requests:>9} {total / requests:>10.0f} "
              f"{(total - foreign) / requests:>10.0f}")
        if args.calls:
            for name, number in sorted(calls.items()):
                print(f"{'':>8} {number / requests:>9.2f} {name}")


if __name__ == "__main__":
    main()
