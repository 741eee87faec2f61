#!/usr/bin/env bash
# One command for a GPU machine: build for its GPU, run every test (gpu-labelled included), the
# examples, the benchmarks and compute-sanitizer, and write a summary.
#
#   scripts/gpu-check.sh [results-dir]      (default: $OUT, else gpu-check-results)
#
# Dependencies are found where they are: installed CMake packages first, then third_party/
# (made by scripts/vendor-deps.sh on a build machine), then NCCL from PyTorch's Python packages
# (nvidia-nccl-cu*). What is missing is skipped and named in the summary.
set -uo pipefail
cd "$(dirname "$0")/.."
results=${1:-${OUT:-gpu-check-results}}
mkdir -p "${results}"
summary=${results}/summary.md
build=build-gpu-check
jobs=$(nproc)

log() { echo "$*" | tee -a "${summary}"; }
: > "${summary}"
log "# graphstep GPU check"
log "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
log "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
nvidia-smi > "${results}/nvidia-smi.txt" 2>&1 || true
log "- device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
log "- nvcc: $(nvcc --version 2>/dev/null | tail -1)"

prefix_path=""
[[ -d third_party/prefix ]] && prefix_path="$(pwd)/third_party/prefix"

nccl_args=()
if [[ ! -f /usr/local/cuda/include/nccl.h && -z "${NCCL_HOME:-}" ]]; then
  nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' \
             2>/dev/null || true)
  if [[ -n "${nccl_dir}" && -f "${nccl_dir}/include/nccl.h" ]]; then
    export NCCL_HOME=${nccl_dir}
    [[ -e "${nccl_dir}/lib/libnccl.so" ]] || ln -sf libnccl.so.2 "${nccl_dir}/lib/libnccl.so" 2>/dev/null || true
    export LD_LIBRARY_PATH=${nccl_dir}/lib:${LD_LIBRARY_PATH:-}
    log "- NCCL: from PyTorch's packages at ${nccl_dir}"
  else
    nccl_args=(-DGRAPHSTEP_WITH_NCCL=OFF)
    log "- NCCL: not found; graphstep::nccl not built"
  fi
fi

log ""
log "## build"
if ! cmake -S . -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES=native -DCMAKE_PREFIX_PATH="${prefix_path}" "${nccl_args[@]}" \
      > "${results}/configure.txt" 2>&1; then
  log "configure FAILED (see configure.txt)"; tail -30 "${results}/configure.txt"; exit 1
fi
if ! cmake --build "${build}" -j "${jobs}" > "${results}/build.txt" 2>&1; then
  log "build FAILED (see build.txt)"; grep -m 20 -E "error|Error" "${results}/build.txt"; exit 1
fi
log "build: ok"

log ""
log "## tests"
# The soak tests run longer here than in a quick ctest: a minute of bucket churn and a
# million replays of a training step.
export GRAPHSTEP_SOAK_SECONDS=${GRAPHSTEP_SOAK_SECONDS:-60}
export GRAPHSTEP_SOAK_REPLAYS=${GRAPHSTEP_SOAK_REPLAYS:-1000000}
ctest --test-dir "${build}" -j 4 --timeout 900 --output-on-failure \
      --output-junit "$(pwd)/${results}/ctest.xml" > "${results}/ctest.txt" 2>&1
ctest_rc=$?
total=$(grep -oE "out of [0-9]+" "${results}/ctest.txt" | tail -1 | grep -oE "[0-9]+")
failed=$(grep -oE "[0-9]+ tests failed" "${results}/ctest.txt" | tail -1 | grep -oE "^[0-9]+")
skipped=$(grep -cE "\(Skipped\)|\*\*\*Skipped" "${results}/ctest.txt")
log "ctest exit ${ctest_rc}: ${total:-0} tests, ${failed:-?} failed, ${skipped} skipped"
grep -E "\(Failed\)|\*\*\*Failed|\(Timeout\)|Exception" "${results}/ctest.txt" | tee -a "${summary}"

log ""
log "## examples"
for example in wrap_existing mlp_train bucketed_shapes conv_block ddp; do  # also ctest tests
  binary=$(find "${build}/examples" -maxdepth 2 -type f -name "${example}" | head -1)
  [[ -z "${binary}" ]] && { log "- ${example}: not built"; continue; }
  timeout 600 "${binary}" > "${results}/${example}.txt" 2>&1
  log "- ${example}: exit $? ($(tail -1 "${results}/${example}.txt"))"
done

log ""
log "## benchmarks"
BUILD_DIR="${build}" timeout 1800 bash scripts/bench.sh "${results}/bench" > "${results}/bench.txt" 2>&1
log "- scripts/bench.sh: exit $? (bench/report.md, JSON and plots under ${results}/bench)"
grep -E "^\| (launch_overhead|mlp_training_step|gemm_gelu)" "${results}/bench/report.md" \
  2>/dev/null | head -40 | tee -a "${summary}"

log ""
log "## compute-sanitizer"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
# Left out: the long runs, and capture diagnostics (a CUPTI client of their own, which the
# sanitizer's instrumentation does not need beside it).
if [[ -n "${sanitizer}" && -x "${build}/tests/graphstep_gpu_tests" ]]; then
  for tool in memcheck racecheck initcheck synccheck; do
    timeout 1200 "${sanitizer}" --tool "${tool}" --error-exitcode 99 \
      "${build}/tests/graphstep_gpu_tests" \
      --gtest_filter='-*many_replays*:*device_exhaustion*:*soak*:capture_diagnostics*' \
      > "${results}/sanitizer-${tool}.txt" 2>&1
    log "- ${tool}: exit $? ($(grep -E "ERROR SUMMARY" "${results}/sanitizer-${tool}.txt" | tail -1))"
  done
else
  log "- compute-sanitizer not found; skipped"
fi
echo "summary written to ${summary}"
exit ${ctest_rc}
