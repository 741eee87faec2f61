#!/usr/bin/env bash
# One command for a GPU machine: build for its GPU, run every test (gpu-labelled included), the
# examples, several NCCL ranks on one GPU, the benchmarks and compute-sanitizer, and write a
# summary.
#
#   scripts/gpu-check.sh [results-dir]      (default: $OUT, else gpu-check-results)
#
#   GPU_CHECK_PHASES   which phases run after the build, in this order (default: all of
#                      "tests examples ranks bench sanitizer"); a machine that only lends the
#                      GPU for a few minutes at a time runs them one or two per call
#   GPU_CHECK_TARGETS  the build targets (default: all); a short lease builds only what its
#                      phases run
#   GPU_CHECK_TESTS    a ctest regular expression (-R): only the tests it matches run in the
#                      `tests` phase (default: every test)
#   GPU_CHECK_EXAMPLES the examples the `examples` phase runs (default: all of "wrap_existing
#                      mlp_train varying_shapes conv_block ddp transformer_lm")
#   BENCH_FILTER, BENCH_COMPARE
#                      passed to scripts/bench.sh in the `bench` phase: a graphstep_bench
#                      filter, and which PyTorch comparisons run (default: "mlp transformer")
#   GPU_CHECK_PROBES   the gtest filter of the `probes` phase (not in the default list: the
#                      `tests` phase runs them too): the conformance tests that answer the
#                      simulator's open questions (docs/validation.md, "Simulator rules without
#                      a GPU answer"); default: all of them. A short lease runs
#                      GPU_CHECK_PHASES=probes GPU_CHECK_TARGETS=graphstep_cuda_conformance_tests
#   GPU_CHECK_LIMIT    seconds each long step (ctest, a benchmark run, one sanitizer tool) may
#                      take before it is stopped (default 1800)
#   GPU_CHECK_SANITIZER_TOOLS, GPU_CHECK_SANITIZER_FILTER
#                      the compute-sanitizer tools and the gtest filter of graphstep_gpu_tests
#                      they run (default: all four tools, every test but the long runs)
#   NCCL_SOURCE        a NCCL source tree (default third_party/nccl): built for this GPU unless
#                      its build/lib already holds libnccl.so, then used for the build and the
#                      runs. NCCL 2.30 and later run several ranks on one GPU
#                      (NCCL_MULTI_RANK_GPU_ENABLE=1), which the `ranks` phase needs.
#
# The cuDNN attention path needs the cuDNN frontend's headers in third_party/cudnn-frontend
# (scripts/install-cudnn-frontend.sh fetches them; carry them to a machine without PyPI).
# Dependencies are found where they are: installed CMake packages first, then third_party/
# (made by scripts/vendor-deps.sh on a build machine), then NCCL_SOURCE, then NCCL from
# PyTorch's Python packages (nvidia-nccl-cu*). What is missing is skipped and named in the
# summary.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/machine.sh
results=${1:-${OUT:-gpu-check-results}}
mkdir -p "${results}"
summary=${results}/summary.md
build=build-gpu-check
jobs=$(nproc)
phases=" ${GPU_CHECK_PHASES:-tests examples ranks bench sanitizer} "
limit=${GPU_CHECK_LIMIT:-1800}
nccl_source=${NCCL_SOURCE:-third_party/nccl}

log() { echo "$*" | tee -a "${summary}"; }
wants() { [[ "${phases}" == *" $1 "* ]]; }
: > "${summary}"
log "# graphstep GPU check"
log "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
log "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
nvidia-smi > "${results}/nvidia-smi.txt" 2>&1 || true
log "- device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
log "- nvcc: $(nvcc --version 2>/dev/null | tail -1)"
log "- phases: build${phases% }"

# --- NCCL: a source tree (built here for this GPU), else the toolkit's, else PyTorch's ---------
nccl_args=()
nccl_version_of() {  # "2.30.7" from the nccl.h in $1
  awk '/^#define NCCL_(MAJOR|MINOR|PATCH) /{v[$2]=$3} END{print v["NCCL_MAJOR"] "." v["NCCL_MINOR"] "." v["NCCL_PATCH"]}' "$1"
}
if [[ -f "${nccl_source}/build/lib/libnccl.so" || -f "${nccl_source}/makefiles/version.mk" ]]; then
  if [[ ! -f "${nccl_source}/build/lib/libnccl.so" ]]; then
    capability=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
    log "- NCCL: building ${nccl_source} for sm_${capability} (nccl-build.txt)"
    make -C "${nccl_source}" -j "${jobs}" src.build \
      NVCC_GENCODE="-gencode=arch=compute_${capability},code=sm_${capability}" \
      > "${results}/nccl-build.txt" 2>&1 || { log "NCCL build FAILED"; tail -20 "${results}/nccl-build.txt"; }
  fi
  if [[ -f "${nccl_source}/build/lib/libnccl.so" ]]; then
    export NCCL_HOME=$(cd "${nccl_source}/build" && pwd)
    export LD_LIBRARY_PATH=${NCCL_HOME}/lib:${LD_LIBRARY_PATH:-}
  fi
fi
if [[ -z "${NCCL_HOME:-}" && ! -f /usr/local/cuda/include/nccl.h ]]; then
  nccl_dir=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' \
             2>/dev/null || true)
  if [[ -n "${nccl_dir}" && -f "${nccl_dir}/include/nccl.h" ]]; then
    export NCCL_HOME=${nccl_dir}
    [[ -e "${nccl_dir}/lib/libnccl.so" ]] || ln -sf libnccl.so.2 "${nccl_dir}/lib/libnccl.so" 2>/dev/null || true
    export LD_LIBRARY_PATH=${nccl_dir}/lib:${LD_LIBRARY_PATH:-}
  else
    nccl_args=(-DGRAPHSTEP_WITH_NCCL=OFF)
  fi
fi
nccl_header=${NCCL_HOME:+${NCCL_HOME}/include/nccl.h}
nccl_header=${nccl_header:-/usr/local/cuda/include/nccl.h}
if [[ ${#nccl_args[@]} -eq 0 && -f "${nccl_header}" ]]; then
  nccl_version=$(nccl_version_of "${nccl_header}")
  log "- NCCL: ${nccl_version} from ${nccl_header%/include/nccl.h}"
else
  nccl_version=""
  log "- NCCL: not found; graphstep::nccl not built"
fi

# cuDNN for examples/conv_block: beside the toolkit, else PyTorch's nvidia-cudnn package.
if [[ -z "${CUDNN_HOME:-}" && ! -f /usr/local/cuda/include/cudnn.h ]]; then
  cudnn_dir=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' \
              2>/dev/null || true)
  if [[ -n "${cudnn_dir}" && -f "${cudnn_dir}/include/cudnn.h" ]]; then
    export CUDNN_HOME=${cudnn_dir}
    [[ -e "${cudnn_dir}/lib/libcudnn.so" ]] || ln -sf libcudnn.so.9 "${cudnn_dir}/lib/libcudnn.so" 2>/dev/null || true
    export LD_LIBRARY_PATH=${cudnn_dir}/lib:${LD_LIBRARY_PATH:-}
  fi
fi

# The cuDNN frontend's headers for the cuDNN attention path: fetched from PyPI where it can be
# reached, else used as carried in third_party/cudnn-frontend; without them the plain attention
# kernels run alone.
if scripts/install-cudnn-frontend.sh > "${results}/cudnn-frontend.txt" 2>&1; then
  log "- cuDNN frontend: $(cat third_party/cudnn-frontend/VERSION 2>/dev/null) (cuDNN attention path built)"
else
  log "- cuDNN frontend: not found (cudnn-frontend.txt); the cuDNN attention path is not built"
fi

prefix_path=""
[[ -d third_party/prefix ]] && prefix_path="$(pwd)/third_party/prefix"

log ""
log "## build"
if ! cmake -S . -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES=native -DCMAKE_PREFIX_PATH="${prefix_path}" "${nccl_args[@]}" \
      > "${results}/configure.txt" 2>&1; then
  log "configure FAILED (see configure.txt)"; tail -30 "${results}/configure.txt"; exit 1
fi
start=${SECONDS}
targets=()
for target in ${GPU_CHECK_TARGETS:-}; do targets+=(--target "${target}"); done
if ! cmake --build "${build}" -j "${jobs}" "${targets[@]}" > "${results}/build.txt" 2>&1; then
  log "build FAILED (see build.txt)"; grep -m 20 -E "error|Error" "${results}/build.txt"; exit 1
fi
log "build${GPU_CHECK_TARGETS:+ of ${GPU_CHECK_TARGETS}}: ok ($((SECONDS - start)) s)"
status=0

# Each answers a question the documentation leaves open, where the simulator took the stricter
# reading; a failure here is an answer, to be recorded in docs/validation.md and followed by the
# simulator and its test.
probes=(
  capture_rules.unsafe_calls_beside_another_threads_global_capture
  capture_rules.a_graph_with_memory_nodes_has_one_executable_at_a_time
  capture_rules.a_graph_allocation_is_freed_once_and_outside_only_when_its_graph_does_not
  capture_rules.a_graph_with_memory_nodes_cannot_become_a_child_graph
  capture_rules.instantiation_flags_the_header_forbids_together_are_refused
  capture_rules.an_update_keeps_each_conditional_nodes_handle_and_type
  capture_rules.the_legacy_stream_cannot_wait_beside_a_blocking_capture
  capture_rules.released_memory_still_mapped_gives_unused_memory_back_only_when_unmapped
  capture_rules.an_allocation_is_freed_once_and_in_one_graph_only
  capture_rules.graph_memory_counts_live_allocations_and_trim_gives_unused_memory_back
  capture_rules.graph_memory_attributes_refuse_what_the_header_does_not_allow
)
if wants probes; then
  log ""
  log "## probes of the simulator's open questions"
  conformance=${build}/sim/tests/graphstep_cuda_conformance_tests
  if [[ -x "${conformance}" ]]; then
    filter=${GPU_CHECK_PROBES:-$(IFS=:; echo "${probes[*]}")}
    timeout "${limit}" "${conformance}" --gtest_filter="${filter}" > "${results}/probes.txt" 2>&1
    rc=$?
    grep -E "^\[ +(OK|FAILED) +\] [a-z_]+\.[a-z_]+ \(" "${results}/probes.txt" | tee -a "${summary}"
    log "- probes: exit ${rc} (probes.txt has each failure's expected and actual answer)"
    [[ ${rc} -eq 0 ]] || status=1
  else
    log "- ${conformance} not built; skipped"
  fi
fi

if wants tests; then
  log ""
  log "## tests"
  # The soak tests run longer here than in a quick ctest: a minute of graph cache churn and a
  # million replays of a training step.
  export GRAPHSTEP_SOAK_SECONDS=${GRAPHSTEP_SOAK_SECONDS:-60}
  export GRAPHSTEP_SOAK_REPLAYS=${GRAPHSTEP_SOAK_REPLAYS:-1000000}
  start=${SECONDS}
  [[ -n "${GPU_CHECK_TESTS:-}" ]] && log "- only the tests matching '${GPU_CHECK_TESTS}'"
  timeout "${limit}" ctest --test-dir "${build}" -j 4 --timeout 600 --output-on-failure \
        ${GPU_CHECK_TESTS:+-R "${GPU_CHECK_TESTS}"} --output-junit "$(pwd)/${results}/ctest.xml" > "${results}/ctest.txt" 2>&1
  ctest_rc=$?
  total=$(grep -oE "out of [0-9]+" "${results}/ctest.txt" | tail -1 | grep -oE "[0-9]+")
  failed=$(grep -oE "[0-9]+ tests failed" "${results}/ctest.txt" | tail -1 | grep -oE "^[0-9]+")
  skipped=$(grep -cE "\(Skipped\)|\*\*\*Skipped" "${results}/ctest.txt")
  log "ctest exit ${ctest_rc}: ${total:-0} tests, ${failed:-?} failed, ${skipped} skipped ($((SECONDS - start)) s)"
  grep -E "\(Failed\)|\*\*\*Failed|\(Timeout\)|\*\*\*Exception" "${results}/ctest.txt" | tee -a "${summary}"
  [[ ${ctest_rc} -eq 0 ]] || status=1
fi

if wants examples; then
  log ""
  log "## examples"
  # Each is also run by ctest tests; here with its defaults, at full size.
  for example in ${GPU_CHECK_EXAMPLES:-wrap_existing mlp_train varying_shapes conv_block ddp transformer_lm}; do
    binary=$(find "${build}/examples" -maxdepth 2 -type f -name "${example}" | head -1)
    [[ -z "${binary}" ]] && { log "- ${example}: not built"; continue; }
    timeout 600 "${binary}" > "${results}/${example}.txt" 2>&1
    rc=$?
    log "- ${example}: exit ${rc} ($(tail -1 "${results}/${example}.txt"))"
    [[ ${rc} -eq 0 ]] || status=1
  done
fi

if wants ranks; then
  log ""
  log "## several ranks on one GPU"
  ddp=$(find "${build}/examples" -maxdepth 2 -type f -name ddp | head -1)
  if [[ -z "${ddp}" ]]; then
    log "- examples/ddp not built; skipped"
  elif [[ "$(printf '%s\n' "${nccl_version}" 2.30.0 | sort -V | head -1)" != 2.30.0 ]]; then
    log "- NCCL ${nccl_version:-none} refuses two ranks on one GPU (2.30 and later accept them):"\
        "put NCCL's source in ${nccl_source}; skipped"
  else
    # NCCL gives each rank its own channels; a few per rank keep four ranks' kernels resident
    # together (NCCL's documentation of NCCL_MULTI_RANK_GPU_ENABLE).
    for ranks in 2 4; do
      NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=${NCCL_MAX_CTAS:-4} \
        timeout "${limit}" bash examples/ddp/launch_local.sh "${ranks}" "${ddp}" \
        > "${results}/ddp-${ranks}-ranks.txt" 2>&1
      rc=$?
      log "- examples/ddp, ${ranks} ranks on one GPU: exit ${rc} ($(tail -1 "${results}/ddp-${ranks}-ranks.txt"))"
      [[ ${rc} -eq 0 ]] || status=1
    done
    # The same under a real torchrun (the machine's PyTorch, or scripts/install-torch.sh's): the id
    # then travels through its agent's store.
    NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=${NCCL_MAX_CTAS:-4} \
      timeout "${limit}" bash examples/ddp/launch_torchrun.sh "${torch_venv}" standalone 2 \
      "${ddp}" > "${results}/ddp-2-ranks-torchrun.txt" 2>&1
    rc=$?
    log "- examples/ddp, 2 ranks under torchrun: exit ${rc} ($(grep -v '^W' "${results}/ddp-2-ranks-torchrun.txt" | tail -1))"
    [[ ${rc} -eq 0 ]] || status=1
    # The transformer step with its gradient buckets reduced while the backward runs.
    lm=$(find "${build}/examples" -maxdepth 2 -type f -name transformer_lm | head -1)
    if [[ -n "${lm}" ]]; then
      NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=${NCCL_MAX_CTAS:-4} \
        timeout "${limit}" bash examples/ddp/launch_local.sh 2 "${lm}" --mode both --steps 20 \
        --layers 4 --width 256 --heads 4 --batch 4 --sequence 128 --vocab 1000 \
        --bucket-kib 256 > "${results}/transformer_lm-2-ranks.txt" 2>&1
      rc=$?
      log "- examples/transformer_lm, 2 ranks on one GPU: exit ${rc} ($(grep -m1 "buckets were reduced" "${results}/transformer_lm-2-ranks.txt"))"
      [[ ${rc} -eq 0 ]] || status=1
    fi
  fi
fi

if wants bench; then
  log ""
  log "## benchmarks"
  BUILD_DIR="${build}" timeout "${limit}" bash scripts/bench.sh "${results}/bench" \
    > "${results}/bench.txt" 2>&1
  log "- scripts/bench.sh: exit $? (bench/report.md, JSON and plots under ${results}/bench)"
  grep -E "^\| (launch_overhead|mlp_training_step|linear_gelu|mlp_backward|launch_bound|compute_bound)" "${results}/bench/report.md" \
    2>/dev/null | head -40 | tee -a "${summary}"
fi

if wants sanitizer; then
  log ""
  log "## compute-sanitizer"
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  # Left out: the long runs, and capture diagnostics (a CUPTI client of their own, which the
  # sanitizer's instrumentation does not need beside it). The tests provoke CUDA errors on
  # purpose (every refusal, invalidated captures, the end of cudaFuncGetParamInfo's parameter
  # list), so the tools report memory and synchronization errors, not API return codes.
  filter=${GPU_CHECK_SANITIZER_FILTER:--*many_replays*:*device_exhaustion*:*soak*:capture_diagnostics*}
  if [[ -n "${sanitizer}" && -x "${build}/tests/graphstep_gpu_tests" ]]; then
    for tool in ${GPU_CHECK_SANITIZER_TOOLS:-memcheck racecheck initcheck synccheck}; do
      timeout "${limit}" "${sanitizer}" --tool "${tool}" --error-exitcode 99 \
        --report-api-errors no --print-limit 1000 "${build}/tests/graphstep_gpu_tests" \
        --gtest_filter="${filter}" > "${results}/sanitizer-${tool}.txt" 2>&1
      rc=$?
      log "- ${tool}: exit ${rc} ($(grep -E "ERROR SUMMARY" "${results}/sanitizer-${tool}.txt" | tail -1))"
      [[ ${rc} -eq 0 ]] || status=1
    done
  else
    log "- compute-sanitizer not found; skipped"
  fi
fi
echo "summary written to ${summary}"
exit ${status}
