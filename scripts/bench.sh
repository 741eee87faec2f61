#!/usr/bin/env bash
# The benchmark suite in one command: builds, runs graphstep_bench (GPU) and graphstep_cpu_bench,
# the PyTorch comparisons (the MLP step, the transformer step) when PyTorch and a GPU are there,
# and writes JSON, report.md and plots to bench/results/<UTC time>/ (or the directory given).
# BENCH_FILTER and BENCH_ARGS pass a filter and further flags (say --benchmark_min_time=0.05) to
# graphstep_bench; BENCH_COMPARE names the PyTorch comparisons that run (default: "mlp
# transformer"; empty: none).
set -uo pipefail
cd "$(dirname "$0")/.."
run=${1:-bench/results/$(date -u +%Y%m%d-%H%M%S)}
build=${BUILD_DIR:-build}
mkdir -p "${run}"

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

status=0
if ! "${build}/bench/graphstep_bench" --benchmark_out="${run}/graphstep_bench.json" \
     --benchmark_out_format=json ${BENCH_FILTER:+--benchmark_filter="${BENCH_FILTER}"} \
     ${BENCH_ARGS:-}; then
  echo "graphstep_bench did not run (see above: without a GPU it says 'no CUDA device visible')"
  status=1
fi
"${build}/bench/graphstep_cpu_bench" --benchmark_out="${run}/graphstep_cpu_bench.json" \
  --benchmark_out_format=json || status=1
compare=" ${BENCH_COMPARE-mlp transformer} "
if [[ "${compare}" == *" mlp "* ]]; then
  python3 bench/compare/pytorch_mlp.py > "${run}/pytorch.json" || status=1
fi
if [[ "${compare}" == *" transformer "* ]]; then
  # Eager, torch.cuda.graph and torch.compile (whose compilation, untimed, comes first).
  python3 bench/compare/pytorch_transformer.py > "${run}/pytorch_transformer.json" || status=1
fi

if ! python3 -c "import matplotlib" 2>/dev/null; then
  python3 -m pip install --quiet matplotlib 2>/dev/null ||
    echo "matplotlib could not be installed: the report will have no plots"
fi
python3 bench/report.py "${run}" || status=1
exit ${status}
