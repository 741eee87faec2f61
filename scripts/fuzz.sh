#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (ASan + UBSan) and fuzzes each for the given
# number of seconds (default 60): the allocator core with the planner, the capture sizes and shapes with
# the graph cache's LRU budget, the validation of step descriptions (plan_step), and the parser of
# safetensors headers (load_safetensors). Needs clang with its libFuzzer runtime (Debian: clang,
# libclang-rt-14-dev), installed with apt-get when missing and run as root. Each target keeps
# its corpus, log and any crash input in build-fuzz/<target>/. The targets compile through ccache
# where it is installed, and fuzz side by side, one per core (GRAPHSTEP_CHECK_JOBS to change it):
# each still gets its seconds of a core.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}

has_libfuzzer() {
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
    clang++ -x c++ -fsanitize=fuzzer - -o /dev/null >/dev/null 2>&1
}
if ! command -v clang++ >/dev/null || ! has_libfuzzer; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "fuzz.sh: installing clang and its libFuzzer runtime"
    apt-get update -qq && apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
  fi
  if ! has_libfuzzer; then
    echo "fuzz.sh: needs clang with libFuzzer (Debian: apt-get install clang libclang-rt-14-dev)" >&2
    exit 2
  fi
fi

# The targets fuzz graphstep_core alone: plain C++, no CUDA.
common_sources=(src/error.cpp)
compiler=(clang++)
# CCACHE_NOHASHDIR: with -g ccache would otherwise hash the folder it runs in, and a clone at
# another path would compile everything again.
if command -v ccache >/dev/null 2>&1; then
  compiler=(env CCACHE_BASEDIR="${PWD}" CCACHE_NOHASHDIR=true ccache clang++)
fi
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
# Each source compiles on its own (ccache caches single compilations, not links), then links.
build() {
  local name=$1
  shift
  mkdir -p "build-fuzz/${name}/corpus" "build-fuzz/${name}/objects"
  local objects=()
  local source
  for source in "fuzz/${name}.cpp" "$@" "${common_sources[@]}"; do
    local object="build-fuzz/${name}/objects/${source//\//_}.o"
    "${compiler[@]}" "${flags[@]}" -Iinclude -Isrc -c "${source}" -o "${object}"
    objects+=("${object}")
  done
  clang++ "${flags[@]}" "${objects[@]}" -o "build-fuzz/${name}/${name}"
}
build block_allocator_fuzz src/memory/detail/block_allocator.cpp src/memory/allocation_plan.cpp &
build capture_sizes_fuzz src/schedule/capture_sizes.cpp src/schedule/capture_shapes.cpp &
build step_plan_fuzz src/schedule/step_plan.cpp &
build safetensors_header_fuzz src/train/detail/safetensors_header.cpp &
wait -n  # each wait stops the script if that build failed
wait -n
wait -n
wait -n

# Fuzzes one target; its exit status is kept in build-fuzz/<target>/status.
fuzz() {
  local name=$1
  local result=0
  (cd "build-fuzz/${name}" &&
    "./${name}" -max_total_time="${seconds}" -max_len=4096 -print_final_stats=1 corpus \
      >fuzz.log 2>&1) || result=$?
  echo "${result}" >"build-fuzz/${name}/status"
}

targets=(block_allocator_fuzz capture_sizes_fuzz step_plan_fuzz safetensors_header_fuzz)
jobs=${GRAPHSTEP_CHECK_JOBS:-$(nproc)}
running=0
for name in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || true  # the status is read from the file
    running=$((running - 1))
  fi
  rm -f "build-fuzz/${name}/status"
  fuzz "${name}" &
  running=$((running + 1))
done
wait || true

status=0
for name in "${targets[@]}"; do
  echo "== ${name}: ${seconds} s"
  if [[ "$(cat "build-fuzz/${name}/status" 2>/dev/null)" == 0 ]]; then
    grep -E "stat::number_of_executed_units|stat::new_units_added" "build-fuzz/${name}/fuzz.log"
  else
    status=1
    echo "${name}: FAILED; the crash input and the report are in build-fuzz/${name}/" >&2
    tail -n 40 "build-fuzz/${name}/fuzz.log" >&2
  fi
done
exit "${status}"
