// Launch overhead: N tiny kernels per step, launched eagerly, as a raw cudaGraphLaunch (the
// floor) and through graph::replay. Reports GPU time per step (CUDA events, manual time) and
// the host time spent enqueuing the step (counter host_us).

#include <benchmark/benchmark.h>

#include <chrono>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>

#include "step_timing.hpp"

namespace gs = graphstep;

namespace {

__global__ void tiny_kernel(float* x) {
  if (threadIdx.x == 0) x[blockIdx.x] += 1.0F;
}

void launch_tiny(gs::cuda::stream_view stream, float* x, int kernels) {
  for (int i = 0; i < kernels; ++i) tiny_kernel<<<1, 32, 0, stream.get()>>>(x);
}

enum class mode { eager, raw_graph, replay };

void launch_overhead(benchmark::State& state, mode how) {
  int const kernels = static_cast<int>(state.range(0));
  gs::cuda::stream stream;
  float* x = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, sizeof(float)));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float), stream.get()));  // ordered before use
  switch (how) {
    case mode::eager:
      bench::time_steps(state, stream, 10, [&] { launch_tiny(stream, x, kernels); });
      break;
    case mode::raw_graph: {
      cudaGraph_t raw = nullptr;
      cudaGraphExec_t exec = nullptr;
      GRAPHSTEP_CUDA_TRY(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
      launch_tiny(stream, x, kernels);
      GRAPHSTEP_CUDA_TRY(cudaStreamEndCapture(stream.get(), &raw));
      GRAPHSTEP_CUDA_TRY(cudaGraphInstantiateWithFlags(&exec, raw, 0));
      GRAPHSTEP_CUDA_TRY(cudaGraphUpload(exec, stream.get()));
      bench::time_steps(state, stream, 10,
                        [&] { GRAPHSTEP_CUDA_TRY(cudaGraphLaunch(exec, stream.get())); });
      GRAPHSTEP_CUDA_TRY(cudaGraphExecDestroy(exec));
      GRAPHSTEP_CUDA_TRY(cudaGraphDestroy(raw));
      break;
    }
    case mode::replay: {
      gs::graphs::graph_exec step;
      gs::graphs::capture(step, stream, [&] { launch_tiny(stream, x, kernels); });
      bench::time_steps(state, stream, 10, [&] { step.replay(stream); });
      break;
    }
  }
  stream.synchronize();
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
  state.counters["kernels"] = kernels;
}

void apply_sizes(benchmark::internal::Benchmark* b) {
  for (int n : {1, 10, 100, 1000}) b->Arg(n);
  b->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(5)->ReportAggregatesOnly(true);
}

}  // namespace

// Host time to capture N kernels and instantiate (and upload) the graph, per node.
void capture_and_instantiate(benchmark::State& state) {
  int const kernels = static_cast<int>(state.range(0));
  gs::cuda::stream stream;
  float* x = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&x, sizeof(float)));
  double seconds = 0.0;
  for (auto _ : state) {
    auto const start = std::chrono::steady_clock::now();
    gs::graphs::graph_exec g;
    gs::graphs::capture(g, stream, [&] { launch_tiny(stream, x, kernels); });
    double const elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    seconds += elapsed;
    state.SetIterationTime(elapsed);
    state.PauseTiming();
    stream.synchronize();
    state.ResumeTiming();
  }
  GRAPHSTEP_CUDA_TRY(cudaFree(x));
  state.counters["us_per_node"] = seconds * 1e6 / static_cast<double>(state.iterations()) / kernels;
}

BENCHMARK(capture_and_instantiate)
    ->Arg(10)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(launch_overhead, eager, mode::eager)->Apply(apply_sizes);
BENCHMARK_CAPTURE(launch_overhead, raw_cuda_graph, mode::raw_graph)->Apply(apply_sizes);
BENCHMARK_CAPTURE(launch_overhead, graph_replay, mode::replay)->Apply(apply_sizes);
