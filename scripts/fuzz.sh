#!/usr/bin/env bash
# Builds the libFuzzer target of the allocator core and the planner with clang (ASan + UBSan) and
# fuzzes it for the given number of seconds (default 60). Needs clang and its runtime
# (Debian: clang, libclang-rt-14-dev). Crashes are written to build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
mkdir -p build-fuzz/corpus
clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Iinclude -I/usr/local/cuda/include \
  fuzz/block_allocator_fuzz.cpp src/memory/block_allocator.cpp src/memory/allocation_plan.cpp \
  src/error.cpp src/detail/driver_api.cpp \
  -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart \
  -o build-fuzz/block_allocator_fuzz
cd build-fuzz
./block_allocator_fuzz -max_total_time="${seconds}" -max_len=4096 -print_final_stats=1 corpus
