// What one barrier costs on the simulated device, per thread: the CPU time of a grid whose
// threads do little but meet at __syncthreads (a tiled kernel's pattern: a shared-memory read
// and a multiply-add between barriers), or exchange a value by __shfl_xor_sync, divided by the
// threads times the barriers each meets. The figure the simulator_cost steps are most sensitive
// to: a tiled matmul's threads meet at two barriers for every 16 multiply-adds.
//
// Only built into the simulated device's benchmark binary; not part of the smoke run.

#include <benchmark/benchmark.h>

#if defined(GRAPHSTEP_CUDA_SIM)

#include <cuda_runtime.h>

#include <graphstep/cuda/check.hpp>

#include "simulator_cost.hpp"

namespace {

constexpr unsigned block_threads = 256;
constexpr unsigned blocks = 64;
constexpr int rounds = 64;

__global__ void meet_at_barriers(float* out, int round_count) {
  __shared__ float staged[block_threads];
  float acc = 0.0F;
  for (int r = 0; r < round_count; ++r) {
    staged[threadIdx.x] = static_cast<float>(r + static_cast<int>(threadIdx.x));
    __syncthreads();
    acc += staged[(threadIdx.x + 1U) % block_threads] * 0.5F;
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

__global__ void exchange_in_warps(float* out, int round_count) {
  float acc = static_cast<float>(threadIdx.x);
  for (int r = 0; r < round_count; ++r) acc += __shfl_xor_sync(0xFFFFFFFFU, acc, 1 + r % 16) * 0.5F;
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// One grid of `Shuffle ? exchange_in_warps : meet_at_barriers` on one host thread (without the
// helpers' hand-offs) after a warm-up; the median CPU time of three, per thread per barrier.
template <bool Shuffle>
double cpu_ns_per_thread_barrier() {
  float* out = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&out, sizeof(float) * blocks * block_threads));
  auto const grid = [&] {
    if constexpr (Shuffle) {
      exchange_in_warps<<<blocks, block_threads>>>(out, rounds);
    } else {
      meet_at_barriers<<<blocks, block_threads>>>(out, rounds);
    }
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  };
  bench::step_time t;
  {
    bench::one_block_thread const one;
    grid();
    t = bench::median_step(grid);
  }
  GRAPHSTEP_CUDA_TRY(cudaFree(out));
  double const barriers_per_thread = Shuffle ? rounds : 2.0 * rounds;
  return t.cpu * 1e9 / (barriers_per_thread * blocks * block_threads);
}

template <bool Shuffle>
void per_thread_barrier(benchmark::State& state) {
  double ns = 0.0;
  for (auto _ : state) {
    ns = cpu_ns_per_thread_barrier<Shuffle>();
    state.SetIterationTime(ns * 1e-9);
  }
  state.counters["ns_per_thread_barrier"] = ns;
  state.SetLabel(Shuffle ? "CPU time per thread and shuffle"
                         : "CPU time per thread and __syncthreads");
}

}  // namespace

double bench::ns_per_thread_barrier() {
  return cpu_ns_per_thread_barrier<false>();
}

namespace {

BENCHMARK(per_thread_barrier<false>)
    ->Name("simulator_cost/barrier/block")
    ->UseManualTime()
    ->Unit(benchmark::kNanosecond)
    ->Iterations(3);
BENCHMARK(per_thread_barrier<true>)
    ->Name("simulator_cost/barrier/warp_shuffle")
    ->UseManualTime()
    ->Unit(benchmark::kNanosecond)
    ->Iterations(3);

}  // namespace

#endif  // GRAPHSTEP_CUDA_SIM
