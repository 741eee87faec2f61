// Launch overhead: N tiny kernels per step, launched eagerly, as a raw cudaGraphLaunch (the
// floor) and through graph::replay. Reports GPU time per step (CUDA events, manual time) and
// the host time spent enqueuing the step (counter host_us). Then graph_exec::replay alone, with
// and without a pool, for bench/replay_cost_callgrind.py to count graphstep's own instructions
// and CUDA calls beyond the launch.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/memory/memory_pool.hpp>

// Under valgrind --tool=callgrind --collect-atstart=no, only the timed replays are counted
// (bench/replay_cost_callgrind.py); elsewhere the toggles do nothing.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

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

// Replays timed in every run of the benchmark so far, trial runs included: what a profiler
// collecting around each saw (bench/replay_cost_callgrind.py divides by it).
std::int64_t timed_replays = 0;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

// graph_exec::replay of a one-kernel graph on one stream: /0 without a pool, /1 with the
// graph's memory from a pool (whose replays the pool orders). Timed: the call alone; the stream
// is synchronized every 64 replays, untimed.
void graph_exec_replay(benchmark::State& state) {
  bool const with_pool = state.range(0) != 0;
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  auto* x = static_cast<float*>(pool.allocate(sizeof(float), stream));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x, 0, sizeof(float), stream.get()));
  gs::graphs::graph_exec step;
  if (with_pool) {
    gs::graphs::capture(step, stream, pool, [&] {
      auto* temporary = static_cast<float*>(pool.allocate(sizeof(float), stream));
      launch_tiny(stream, temporary, 1);
      pool.deallocate(temporary, stream);
      launch_tiny(stream, x, 1);
    });
  } else {
    gs::graphs::capture(step, stream, [&] { launch_tiny(stream, x, 1); });
  }
  for (int i = 0; i < 2; ++i)
    step.replay(stream);  // the first replay asks what later ones need not
  stream.synchronize();
  std::int64_t replays = 0;
  for (auto _ : state) {
    ++timed_replays;
    CALLGRIND_TOGGLE_COLLECT;
    auto const start = std::chrono::steady_clock::now();
    step.replay(stream);
    auto const end = std::chrono::steady_clock::now();
    CALLGRIND_TOGGLE_COLLECT;
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
    if (++replays % 64 == 0) stream.synchronize();
  }
  stream.synchronize();
  step.reset();
  pool.deallocate(x, stream);
  state.counters["timed_requests"] = static_cast<double>(timed_replays);
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
BENCHMARK(graph_exec_replay)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
