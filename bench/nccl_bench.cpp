// All-reduce bus bandwidth, eager against captured in a graph, on the communicator of this
// process (one rank: a copy on one GPU; launch several ranks to measure a real collective).
// busbw = algbw · 2(n−1)/n, as nccl-tests reports it.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/nccl.hpp>

namespace gs = graphstep;
namespace gn = graphstep::nccl;

namespace {

void all_reduce_bandwidth(benchmark::State& state, bool graphed) {
  if (gs::cuda::device_count() == 0) return state.SkipWithError("no CUDA device visible");
  std::size_t const bytes = static_cast<std::size_t>(state.range(0));
  // One communicator for the whole run; never destroyed, so no NCCL teardown runs after the
  // CUDA runtime has begun shutting down at exit.
  static gn::nccl_comm* const comm = new gn::nccl_comm{gn::communicator_from_environment()};
  auto const view = comm->view();
  gs::cuda::stream stream;
  void* data = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&data, bytes));
  gs::device_span const buffer{data, gs::dtype::float32, bytes / sizeof(float)};
  auto reduce = [&] { gn::all_reduce(buffer, buffer, gn::reduce_op::sum, view, stream); };
  reduce();  // warm-up and lazy connection, never inside the capture
  gs::graphs::graph_exec g;
  if (graphed) {
    gs::graphs::capture(g, stream, [&] {
      for (int i = 0; i < 10; ++i) reduce();
    });
    gn::verify_captured_sequence(view, stream);  // every rank captured the same ten
    g.replay(stream);                            // the first replay is not timed
  }
  gs::cuda::timed_event start;
  gs::cuda::timed_event stop;
  for (auto _ : state) {
    start.record(stream);
    if (graphed) {
      g.replay(stream);
    } else {
      for (int i = 0; i < 10; ++i) reduce();
    }
    stop.record(stream);
    stop.synchronize();
    state.SetIterationTime(gs::cuda::timed_event::elapsed_ms(start, stop) / 1e3 / 10);
  }
  double const ranks = view.size();
  state.counters["busbw_GBps"] = benchmark::Counter(
      static_cast<double>(bytes) * 2.0 * (ranks - 1) / std::max(ranks, 1.0),
      benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["algbw_GBps"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
  GRAPHSTEP_CUDA_TRY(cudaFree(data));
}

// 8 B to 256 MiB: latency-bound, then bandwidth-bound sizes.
void sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t bytes = 8; bytes < (std::int64_t{256} << 20); bytes *= 8) b->Arg(bytes);
  b->Arg(std::int64_t{256} << 20);
  // A fixed count: Google Benchmark would otherwise iterate until 0.5 s of manual (GPU) time,
  // and one rank's all-reduce takes under a microsecond of GPU time against about 13 µs of host
  // time a step, so each size ran for about a minute on an H100.
  b->UseManualTime()
      ->Iterations(200)
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(5)
      ->ReportAggregatesOnly(true);
}

}  // namespace

BENCHMARK_CAPTURE(all_reduce_bandwidth, eager, false)->Apply(sizes);
BENCHMARK_CAPTURE(all_reduce_bandwidth, graphed, true)->Apply(sizes);
