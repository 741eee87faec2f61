// The overlap gain of bucketed all-reduce in a captured step: a simulated backward pass (one
// compute kernel per layer, each producing one gradient bucket) with each bucket averaged as
// soon as it is ready, against the same step that averages all buckets after the backward
// pass. Both are captured graphs; GPU time per step from CUDA events.

#include <benchmark/benchmark.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/nccl.hpp>
#include <vector>

namespace gs = graphstep;
namespace gn = graphstep::nccl;

namespace {

// Stands in for a layer's backward: enough arithmetic per element to take a while.
__global__ void backward_layer_kernel(float* gradient, int n, int work) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = gradient[i];
  for (int k = 0; k < work; ++k) x = x * 0.999F + 0.001F;
  gradient[i] = x;
}

void bucketed_step(benchmark::State& state, bool overlap) {
  int const layers = 8;
  std::size_t const elements = std::size_t{4} << 20;  // 16 MiB of gradient per layer
  static gn::nccl_comm* const comm = new gn::nccl_comm{gn::communicator_from_environment()};
  gs::cuda::stream stream;
  std::vector<std::size_t> const counts(layers, elements);
  auto const plan = gn::plan_buckets(gs::dtype::float32, counts, elements * sizeof(float),
                                     elements * sizeof(float));
  void* flat = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&flat, plan.buffer_bytes()));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(flat, 0, plan.buffer_bytes(), stream.get()));
  auto* gradients = static_cast<float*>(flat);
  gn::bucketed_all_reduce reducer{
      comm->view(), {flat, gs::dtype::float32, plan.buffer_count}, plan};
  auto step = [&] {
    for (int l = 0; l < layers; ++l) {
      float* g = gradients + plan.offsets[static_cast<std::size_t>(l)];
      int const n = static_cast<int>(elements);
      backward_layer_kernel<<<(n + 255) / 256, 256, 0, stream.get()>>>(g, n, 64);
      if (overlap) reducer.bucket_ready(static_cast<std::size_t>(l), stream);
    }
    if (overlap) {
      reducer.join(stream);
    } else {
      reducer.all(stream);
    }
  };
  step();  // warm-up and lazy connection
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, stream, step);
  gn::verify_captured_sequence(comm->view(), stream);
  gs::cuda::timed_event start;
  gs::cuda::timed_event stop;
  for (int i = 0; i < 3; ++i) g.replay(stream);
  for (auto _ : state) {
    start.record(stream);
    g.replay(stream);
    stop.record(stream);
    stop.synchronize();
    state.SetIterationTime(gs::cuda::timed_event::elapsed_ms(start, stop) / 1e3);
  }
  state.counters["ranks"] = comm->view().size();
  GRAPHSTEP_CUDA_TRY(cudaFree(flat));
}

}  // namespace

BENCHMARK_CAPTURE(bucketed_step, overlapped, true)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(bucketed_step, after_backward, false)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
