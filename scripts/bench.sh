#!/usr/bin/env bash
# The benchmark suite in one command: builds, runs graphstep_bench (GPU) and graphstep_cpu_bench,
# the PyTorch comparisons (the MLP step, the transformer step) when PyTorch and a GPU are there,
# and writes JSON, report.md and plots to bench/results/<UTC time>/ (or the directory given).
# BENCH_FILTER and BENCH_ARGS pass a filter and further flags (say --benchmark_min_time=0.05) to
# graphstep_bench, BENCH_CPU_FILTER a filter to graphstep_cpu_bench; BENCH_COMPARE names the
# PyTorch comparisons that run (default: "mlp transformer"; empty: none).
# Python is the project's virtual environment (scripts/install-torch.sh, made here when missing);
# where it cannot be made (no network) the system python3 stands in. Whatever could not run is
# said on the terminal and in skipped.txt, which report.md repeats. bench/compare_runs.py
# compares two runs.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/machine.sh
run=${1:-bench/results/$(date -u +%Y%m%d-%H%M%S)}
build=${BUILD_DIR:-build}
mkdir -p "${run}"
: > "${run}/skipped.txt"
skipped() {
  echo "bench.sh: skipped: $*"
  echo "$*" >> "${run}/skipped.txt"
}

if [[ ! -f "${build}/CMakeCache.txt" ]]; then
  cmake --preset default || exit 1
fi
cmake --build "${build}" --target graphstep_bench graphstep_cpu_bench || exit 1

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
  nvcc --version 2>/dev/null | tail -1 | sed 's/^/nvcc: /'
} > "${run}/context.txt"

# Without a network pip gives up after one short retry rather than minutes of them.
python=python3
if "${torch_venv}/bin/python" -c "import torch" 2>/dev/null ||
   PIP_RETRIES=1 PIP_DEFAULT_TIMEOUT=10 bash scripts/install-torch.sh \
     > "${run}/install-torch.log" 2>&1; then
  python=${torch_venv}/bin/python
else
  echo "bench.sh: the project's Python environment could not be made" \
       "(${run}/install-torch.log says why); using $(command -v python3)"
fi
echo "python: ${python}" >> "${run}/context.txt"

status=0
if ! "${build}/bench/graphstep_bench" --benchmark_out="${run}/graphstep_bench.json" \
     --benchmark_out_format=json ${BENCH_FILTER:+--benchmark_filter="${BENCH_FILTER}"} \
     ${BENCH_ARGS:-}; then
  skipped "graphstep_bench did not finish (without a GPU it says 'no CUDA device visible'):" \
          "no GPU results"
  status=1
fi
"${build}/bench/graphstep_cpu_bench" --benchmark_out="${run}/graphstep_cpu_bench.json" \
  --benchmark_out_format=json ${BENCH_CPU_FILTER:+--benchmark_filter="${BENCH_CPU_FILTER}"} ||
  status=1
# Each comparison prints {"skipped": reason} when it cannot run (no PyTorch, no GPU).
compare_with_pytorch() {  # <name> <script> <output>
  "${python}" "$2" > "$3" || status=1
  local reason
  reason=$("${python}" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("skipped", ""))' \
           "$3" 2>/dev/null)
  [[ -z ${reason} ]] || skipped "the PyTorch comparison of the $1: ${reason}"
}
compare=" ${BENCH_COMPARE-mlp transformer} "
if [[ "${compare}" == *" mlp "* ]]; then
  compare_with_pytorch "MLP step" bench/compare/pytorch_mlp.py "${run}/pytorch.json"
else
  skipped "the PyTorch comparison of the MLP step: not asked for (BENCH_COMPARE)"
fi
if [[ "${compare}" == *" transformer "* ]]; then
  # Eager, torch.cuda.graph and torch.compile (whose compilation, untimed, comes first).
  compare_with_pytorch "transformer step" bench/compare/pytorch_transformer.py \
    "${run}/pytorch_transformer.json"
else
  skipped "the PyTorch comparison of the transformer step: not asked for (BENCH_COMPARE)"
fi

if ! "${python}" -c "import matplotlib" 2>/dev/null &&
   ! "${python}" -m pip install --quiet --disable-pip-version-check matplotlib >/dev/null 2>&1; then
  skipped "the plots: matplotlib is not in ${python} and could not be installed"
fi
"${python}" bench/report.py "${run}" || status=1
exit ${status}
