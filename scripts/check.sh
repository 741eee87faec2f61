#!/usr/bin/env bash
# The full check, and what CI runs: build everything and run every test (GPU tests report
# themselves skipped where no GPU is visible), the CPU tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer, clang-tidy over src/, and a short fuzzing run of each target.
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

run_step "build and test (cmake --workflow --preset default)" cmake --workflow --preset default
run_step "CPU tests under ASan + UBSan (cmake --workflow --preset sanitize)" \
  cmake --workflow --preset sanitize
run_step "clang-tidy over src/ (scripts/tidy.sh)" scripts/tidy.sh build
run_step "fuzzing, ${fuzz_seconds} s per target (scripts/fuzz.sh)" scripts/fuzz.sh "${fuzz_seconds}"

echo
echo "==== every check passed in $((SECONDS - started)) s"
printf '  %s\n' "${summary[@]}"
