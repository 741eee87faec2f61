#!/usr/bin/env bash
# The full check, and what CI runs (CONTRIBUTING.md walks through it): the tools it needs, then
# every build and test in the order below, stopping at the first failure. It ends with each
# step's time and the number of tests it ran, so that a change that makes CI slower or drops
# tests shows.
#
# Every build compiles through ccache (scripts/install-ccache.sh), and clang-tidy keeps the files
# it found clean in a cache of its own (scripts/tidy.sh): a second run on the same machine, from
# any clone, recompiles and re-checks only what changed. Tests run in parallel, one per core
# (GRAPHSTEP_CHECK_JOBS to change it); the ones that must run alone are marked RUN_SERIAL.
# Usage: scripts/check.sh [fuzzing seconds per target, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/machine.sh
fuzz_seconds=${1:-30}
jobs=${GRAPHSTEP_CHECK_JOBS:-$(nproc)}
started=${SECONDS}
declare -a summary
total_tests=0

# Each step's line in the summary: its time, and the tests its ctest runs ran and skipped, read
# from the step's log (or a detail the step sets itself, step_detail).
step_log=
step_detail=
run_step() {
  local name=$1
  shift
  local step_started=${SECONDS}
  step_log=$(mktemp)
  step_detail=
  echo
  echo "==== ${name}"
  "$@"
  local ran skipped
  ran=$(awk '/tests? failed out of/ { n += $NF } END { print n + 0 }' "${step_log}")
  skipped=$(grep -c ' (Skipped)$' "${step_log}" || true)
  rm -f "${step_log}"
  if [[ -z "${step_detail}" && ${ran} -gt 0 ]]; then
    step_detail="${ran} tests, ${skipped} skipped"
  fi
  total_tests=$((total_tests + ran))
  summary+=("$(printf '%-76s %5d s  %s' "${name}" $((SECONDS - step_started)) "${step_detail}")")
}

# Runs a command with its output shown and kept in the step's log, for the summary to read.
logged() {
  "$@" 2>&1 | tee -a "${step_log}"
}

# ctest with the given arguments, in parallel.
run_tests() {
  logged ctest -j "${jobs}" "$@"
}

# A preset's configure, build and tests: `cmake --workflow --preset <name>`, with the tests in
# parallel. Extra arguments go to the configure step.
workflow() {
  local preset=$1
  shift
  cmake --preset "${preset}" "$@"
  cmake --build --preset "${preset}"
  run_tests --preset "${preset}"
}

# ccache's counters, to report what this run found in the cache.
cache_counters() {
  command -v ccache >/dev/null 2>&1 || return 0
  ccache --print-stats 2>/dev/null |
    awk '$1 ~ /^(direct_cache_hit|preprocessed_cache_hit|cache_miss)$/ { c[$1] = $2 }
         END { print c["direct_cache_hit"] + c["preprocessed_cache_hit"], c["cache_miss"] + 0 }'
}

install_ccache() {
  scripts/install-ccache.sh || echo "check.sh: ccache could not be installed; every build" \
    "compiles from scratch" >&2
  step_detail="$(command -v ccache >/dev/null && ccache --version | head -n 1)"
}
run_step "ccache, the compiler cache (scripts/install-ccache.sh)" install_ccache
read -r hits_before misses_before _ <<<"$(cache_counters) 0 0"

# PyTorch from PyPI, for the tests that meet torchrun and its c10d store (no GPU needed). Where
# it cannot be installed, those tests report themselves skipped.
install_torch() {
  scripts/install-torch.sh || echo "check.sh: torch could not be installed; the c10d store" \
    "and torchrun tests will report themselves skipped" >&2
}
run_step "PyTorch from PyPI for the torchrun tests (scripts/install-torch.sh)" install_torch
# Open MPI from Debian's packages, for the MPI bootstrap and its test (the default and sim builds
# find it; the sanitizer builds leave it out). Where it cannot be installed, the builds leave the
# MPI bootstrap out.
install_mpi() {
  scripts/install-mpi.sh || echo "check.sh: Open MPI could not be installed; the builds" \
    "leave the MPI bootstrap and its test out" >&2
}
run_step "Open MPI for the MPI bootstrap's test (scripts/install-mpi.sh)" install_mpi
# GCC's plugin headers, for the simulated device's plugin that keeps `__shared__` accesses out
# of the race checker (sim/tools/thread_local_accesses_plugin.cpp). Where they cannot be
# installed, simulated kernels build without it and run slower.
install_gcc_plugin_headers() {
  scripts/install-gcc-plugin-headers.sh || echo "check.sh: GCC's plugin headers could not be" \
    "installed; simulated kernels build without the plugin and run slower" >&2
}
run_step "GCC's plugin headers for the simulated device (scripts/install-gcc-plugin-headers.sh)" \
  install_gcc_plugin_headers

# graphstep_core is plain C++: with no CUDA compiler to be found, it and its tests alone build
# (first: the default build leaves out the tests that ran here).
core_only() {
  local path_without_cuda
  # Every directory that holds an nvcc (the toolkit's, and wrappers beside other tools) goes.
  local dir
  path_without_cuda=
  while IFS= read -r dir; do
    if [[ -n "${dir}" && ! -x "${dir}/nvcc" ]]; then
      path_without_cuda+="${path_without_cuda:+:}${dir}"
    fi
  done < <(tr ':' '\n' <<<"${PATH}")
  local configured
  configured=$(env -u CUDACXX PATH="${path_without_cuda}" cmake -S . -B build-core -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DGRAPHSTEP_WARNINGS_AS_ERRORS=ON)
  if ! grep -q "building graphstep_core and its tests only" <<<"${configured}"; then
    echo "check.sh: a CUDA compiler was still found without CUDA on the path" >&2
    return 1
  fi
  env PATH="${path_without_cuda}" cmake --build build-core
  PATH="${path_without_cuda}" run_tests --test-dir build-core --output-on-failure --no-tests=error
}
run_step "graphstep_core without nvcc on the path (build-core)" core_only

# The default configuration (the ci preset: its tests, examples and benchmarks compiled by nvcc
# for one architecture, which proves they compile for a GPU). Its GPU tests run where a GPU is
# visible, for that GPU's architecture; elsewhere they run in the next step, on the simulated
# device, and here only the tests that need no device. graphstep_core's own tests are built here
# by the very commands of the step before: they ran there, and run here only if a command differs
# (scripts/lib/tests_not_run_in.py).
default_build() {
  local architectures=native
  local test_filter=()
  if ! gpu_visible; then
    architectures=90
    test_filter=(--label-exclude gpu)
    echo "check.sh: no GPU visible: the GPU tests (label gpu) are built but not run here; they" \
         "run in the next step, on the simulated CUDA device"
  fi
  cmake --preset ci -DGRAPHSTEP_TEST_CUDA_ARCHITECTURES="${architectures}"
  cmake --build --preset ci
  local selection
  selection=$(python3 scripts/lib/tests_not_run_in.py build-ci build-core -- --preset ci \
    "${test_filter[@]}")
  if [[ -z "${selection}" ]]; then
    echo "check.sh: every test of the default build ran in the build without CUDA"
    return 0
  fi
  run_tests --preset ci "${test_filter[@]}" -I "${selection}"
}
run_step "build and test (--preset ci: the default preset, tests for one arch)" default_build

# The simulator build compiles graphstep_core and its tests by the very commands of the build
# without CUDA: those tests ran there, and run here only if a command differs.
simulated_device() {
  cmake --preset sim
  cmake --build --preset sim
  local selection
  selection=$(python3 scripts/lib/tests_not_run_in.py build-sim build-core -- --preset sim)
  if [[ -n "${selection}" ]]; then
    run_tests --preset sim -I "${selection}"
  fi
  run_tests --preset sim-interleaved
  run_tests --preset sim-deferred
}
run_step "every test on the simulated CUDA device (--preset sim, sim-interleaved, sim-deferred)" \
  simulated_device

run_step "CPU tests under ASan + UBSan (--preset sanitize)" workflow sanitize
# The tests that count resident host pages are left out: ASan's quarantine holds freed memory.
run_step "GPU tests on the simulated device under ASan + UBSan (--preset sim-sanitize)" \
  workflow sim-sanitize

tidy() {
  logged scripts/tidy.sh build-sim
  step_detail=$(sed -n 's/^tidy\.sh: .* \([0-9][0-9]* files (.*)\).*/\1/p' "${step_log}" | tail -n 1)
}
run_step "clang-tidy over src/ and sim/src/ (scripts/tidy.sh build-sim)" tidy
fuzz() {
  logged scripts/fuzz.sh "${fuzz_seconds}"
  step_detail="$(grep -c '^== ' "${step_log}" || true) targets, ${fuzz_seconds} s each"
}
run_step "fuzzing, ${fuzz_seconds} s per target (scripts/fuzz.sh)" fuzz

echo
echo "==== every check passed in $((SECONDS - started)) s (${jobs} test jobs)"
printf '  %s\n' "${summary[@]}"
echo "  ${total_tests} tests in all"
read -r hits_after misses_after _ <<<"$(cache_counters) 0 0"
if command -v ccache >/dev/null 2>&1; then
  echo "  ccache: $((hits_after - hits_before)) compilations from the cache," \
       "$((misses_after - misses_before)) compiled"
fi
