// graphstep_bench: the GPU benchmark suite. Without a device it says so and fails, rather than
// reporting numbers that measure nothing.

#include <benchmark/benchmark.h>

#include <cstdio>
#include <graphstep/cuda/device.hpp>

int main(int argc, char** argv) {
  if (graphstep::cuda::device_count() == 0) {
    std::fprintf(stderr,
                 "graphstep_bench: no CUDA device visible; the GPU benchmarks need an "
                 "NVIDIA GPU (graphstep_cpu_bench runs the CPU-only ones)\n");
    return 1;
  }
#if defined(GRAPHSTEP_CUDA_SIM)
  std::fprintf(stderr,
               "graphstep_bench: on the simulated CUDA device: these are CPU times of a "
               "simulation, not GPU timings; they only show that the benchmarks run\n");
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
