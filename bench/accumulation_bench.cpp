// One optimizer step of K micro-batches (train::micro_batch_loop in the transformer of
// examples/transformer_lm): eager (K passes issued from a host loop) against one graph whose
// device loop runs the K passes, at K = 1, 4, 8. GPU time per step from CUDA events; counters:
// graph launches the host issues per optimizer step, the graph's nodes and conditional nodes
// (flat in K: the loop's body is captured once), capture and instantiation times, and the host
// time spent issuing a step.

#include <benchmark/benchmark.h>

#include <chrono>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <optional>
#include <string>

#include "step_timing.hpp"
#include "transformer_model.hpp"

namespace gs = graphstep;

namespace {

using transformer_example::transformer_config;

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

void accumulated_step(benchmark::State& state, bool graphed, transformer_config const& c) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  graphstep::ops::cublaslt_handle handle;
  transformer_example::transformer model{c, pool, stream, handle};
  std::optional<gs::graphs::graph_exec> step;
  model.step();  // loads cuBLASLt's and graphstep's kernels before any capture
  if (graphed) {
    auto const start = std::chrono::steady_clock::now();
    gs::graphs::graph captured;
    gs::graphs::capture(captured, stream, pool, [&] { model.step(); });
    state.counters["capture_ms"] = milliseconds_since(start);
    auto const instantiate_start = std::chrono::steady_clock::now();
    step.emplace(captured.instantiate());
    state.counters["instantiate_ms"] = milliseconds_since(instantiate_start);
    auto const nodes = step->node_counts();
    state.counters["graph_nodes"] = static_cast<double>(nodes.total);
    state.counters["conditional_nodes"] = static_cast<double>(nodes.conditional);
  }
  std::size_t launches = 0;
  auto issue = [&] {
    if (graphed) {
      step->replay(stream);
      ++launches;
    } else {
      model.step();
    }
  };
  bench::time_steps(state, stream, 2, issue);
  if (graphed) {
    // Counted, not assumed: replays issued per optimizer step, warm-up included.
    state.counters["graph_launches_per_step"] =
        static_cast<double>(launches) / static_cast<double>(state.iterations() + 2);
  }
  state.counters["micro_batches"] = c.micro_batches;
  state.counters["layers"] = c.layers;
  state.counters["width"] = c.channels;
  state.counters["batch"] = c.batch;
  state.counters["sequence"] = c.sequence;
}

void register_configuration(char const* name, transformer_config c, int repetitions) {
  for (int k : {1, 4, 8}) {
    c.micro_batches = k;
    for (bool graphed : {false, true}) {
      std::string const full = std::string{"accumulated_step/"} +
                               (graphed ? "one_launch/" : "eager/") + name + "/K" +
                               std::to_string(k);
      benchmark::RegisterBenchmark(full.c_str(), accumulated_step, graphed, c)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond)
          ->Repetitions(repetitions)
          ->ReportAggregatesOnly(true);
    }
  }
}

bool const registered = [] {
  transformer_config c;
#if defined(GRAPHSTEP_CUDA_SIM)
  // On the simulated device a tiny model shows that the benchmark runs and what the graph holds.
  c.layers = 2;
  c.channels = 32;
  c.heads = 2;
  c.batch = 2;
  c.sequence = 8;
  c.vocab = 100;
  c.attention = transformer_example::attention_path::plain;
  register_configuration("tiny", c, 1);
#else
  c.layers = 12;
  c.channels = 768;
  c.heads = 12;
  c.batch = 1;
  c.sequence = 128;
  register_configuration("launch_bound", c, 5);
#endif
  return true;
}();

}  // namespace
