// The training step of the design's MLP at batch 1, 8, 64 and 640: eager launches against the
// whole step replayed as one graph, in one run. GPU time per step from CUDA events; the
// counter host_us is the host time spent issuing the step.

#include <benchmark/benchmark.h>

#include <graphstep/cuda/stream.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <optional>

#include "mlp_model.hpp"
#include "step_timing.hpp"

namespace gs = graphstep;

namespace {

void mlp_training_step(benchmark::State& state, bool graphed) {
  mlp_example::mlp_settings settings;
  settings.batch = static_cast<int>(state.range(0));
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  graphstep::ops::cublaslt_handle handle;
  mlp_example::mlp model{settings, pool, stream, handle};
  std::optional<gs::graphs::graph_exec> step;
  if (graphed) {
    step.emplace();
    gs::graphs::capture(*step, stream, pool, [&] { model.step(); });
  }
  auto issue = [&] {
    if (graphed) {
      step->replay(stream);
    } else {
      model.step();
    }
  };
  bench::time_steps(state, stream, 5, issue);
  state.counters["batch"] = settings.batch;
  state.SetLabel(model.fused() ? "fused GELU" : "unfused GELU");
}

void batches(benchmark::internal::Benchmark* b) {
  for (int batch : {1, 8, 64, 640}) b->Arg(batch);
  b->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(5)->ReportAggregatesOnly(true);
}

}  // namespace

BENCHMARK_CAPTURE(mlp_training_step, eager, false)->Apply(batches);
BENCHMARK_CAPTURE(mlp_training_step, graphed, true)->Apply(batches);
