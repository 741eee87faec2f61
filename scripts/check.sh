#!/usr/bin/env bash
# The full check, and what CI runs: PyTorch from PyPI for the torchrun tests, Open MPI for the
# MPI bootstrap's test, then build everything and run every test (GPU tests report themselves
# skipped where no GPU is visible), everything again on the simulated CUDA device (where the GPU
# tests and the MPI bootstrap's test run), the core alone
# without nvcc on the path, the CPU tests and the simulated device's GPU tests again under
# AddressSanitizer and UndefinedBehaviorSanitizer, clang-tidy over src/, and a short fuzzing
# run of each target.
# Usage: scripts/check.sh [fuzzing seconds per target, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds=${1:-30}
started=${SECONDS}
declare -a summary

run_step() {
  local name=$1
  shift
  local step_started=${SECONDS}
  echo
  echo "==== ${name}"
  "$@"
  summary+=("$(printf '%-62s %5d s' "${name}" $((SECONDS - step_started)))")
}

# PyTorch from PyPI, for the tests that meet torchrun and its c10d store (no GPU needed). Where
# it cannot be installed, those tests report themselves skipped.
install_torch() {
  scripts/install-torch.sh || echo "check.sh: torch could not be installed; the c10d store" \
    "and torchrun tests will report themselves skipped" >&2
}
run_step "PyTorch from PyPI for the torchrun tests (scripts/install-torch.sh)" install_torch
# Open MPI from Debian's packages, for the MPI bootstrap and its test in the sim build. Where it
# cannot be installed, the sim build leaves the MPI bootstrap out.
install_mpi() {
  scripts/install-mpi.sh || echo "check.sh: Open MPI could not be installed; the sim build" \
    "leaves the MPI bootstrap and its test out" >&2
}
run_step "Open MPI for the MPI bootstrap's test (scripts/install-mpi.sh)" install_mpi
run_step "build and test (cmake --workflow --preset default)" cmake --workflow --preset default
run_step "every test on the simulated CUDA device (cmake --workflow --preset sim)" \
  cmake --workflow --preset sim

# graphstep_core is plain C++: with no CUDA compiler to be found, it and its tests alone build.
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
    -DCMAKE_BUILD_TYPE=Release)
  if ! grep -q "building graphstep_core and its tests only" <<<"${configured}"; then
    echo "check.sh: a CUDA compiler was still found without CUDA on the path" >&2
    return 1
  fi
  env PATH="${path_without_cuda}" cmake --build build-core
  env PATH="${path_without_cuda}" ctest --test-dir build-core -j "$(nproc)" --output-on-failure \
    --no-tests=error
}
run_step "graphstep_core without nvcc on the path (build-core)" core_only
run_step "CPU tests under ASan + UBSan (cmake --workflow --preset sanitize)" \
  cmake --workflow --preset sanitize
# The tests that count resident host pages are left out: ASan's quarantine holds freed memory.
run_step "GPU tests on the simulated device under ASan + UBSan (--preset sim-sanitize)" \
  cmake --workflow --preset sim-sanitize
run_step "clang-tidy over src/ (scripts/tidy.sh build-sim: every source, the simulator's too)" \
  scripts/tidy.sh build-sim
run_step "fuzzing, ${fuzz_seconds} s per target (scripts/fuzz.sh)" scripts/fuzz.sh "${fuzz_seconds}"

echo
echo "==== every check passed in $((SECONDS - started)) s"
printf '  %s\n' "${summary[@]}"
