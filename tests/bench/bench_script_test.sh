#!/usr/bin/env bash
# scripts/bench.sh on a machine without a GPU, briefly: it runs in the project's Python
# environment, writes both benchmarks' JSON and report.md, and says what it skipped (the PyTorch
# comparison needs a GPU; the transformer comparison was not asked for), in skipped.txt and in
# the report.
#   bench_script_test.sh <source dir> <build dir> <python environment>
set -uo pipefail
source_dir=$1 build=$2 venv=$3
if ! "${venv}/bin/python" -c "import torch" 2>/dev/null; then
  echo "SKIPPED: no Python with PyTorch at ${venv} (scripts/install-torch.sh makes it)"
  exit 0
fi
run=$(mktemp -d)
trap 'rm -rf "${run}"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

BUILD_DIR=${build} BENCH_FILTER='^launch_overhead/eager/1/' \
  BENCH_ARGS=--benchmark_min_time=0.01 BENCH_CPU_FILTER='^capture_size_padding/4$' BENCH_COMPARE=mlp \
  bash "${source_dir}/scripts/bench.sh" "${run}" > "${run}/out.txt" 2>&1
status=$?
cat "${run}/out.txt"
[[ ${status} -eq 0 ]] || fail "bench.sh exited with ${status}"
for file in graphstep_bench.json graphstep_cpu_bench.json pytorch.json report.md; do
  [[ -s ${run}/${file} ]] || fail "bench.sh wrote no ${file}"
done
grep -q "launch_overhead/eager/1/" "${run}/graphstep_bench.json" || fail "no GPU benchmark ran"
grep -qx "python: ${venv}/bin/python" "${run}/context.txt" ||
  fail "context.txt does not name the project's Python: $(grep python "${run}/context.txt")"
# PyTorch sees no GPU here; the transformer comparison was left out by BENCH_COMPARE.
grep -q "^the PyTorch comparison of the MLP step: no CUDA device visible to PyTorch$" \
  "${run}/skipped.txt" || fail "skipped.txt does not say why the MLP comparison was skipped"
grep -q "^the PyTorch comparison of the transformer step: not asked for" "${run}/skipped.txt" ||
  fail "skipped.txt does not say the transformer comparison was not asked for"
grep -q "bench.sh: skipped: the PyTorch comparison of the MLP step" "${run}/out.txt" ||
  fail "the terminal was not told what was skipped"
grep -q "^- the PyTorch comparison of the MLP step: no CUDA device" "${run}/report.md" ||
  fail "report.md does not list what was skipped"
echo "bench.sh ran in ${venv} and said what it skipped"
