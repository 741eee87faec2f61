// One optimizer step of K micro-batches (train::micro_batch_loop in the transformer of
// examples/transformer_lm): eager (K passes issued from a host loop), K replays of a graph of one
// micro-batch and one of the rest (K + 1 launches, as trainers replaying a captured micro-batch
// issue it; K = 4, 8), and one graph whose device loop runs the K passes, at K = 1, 4, 8. GPU
// time per step from CUDA events; counters:
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

enum class issued_as { eager, k_replays, one_launch };

char const* name(issued_as how) {
  switch (how) {
    case issued_as::eager: return "eager";
    case issued_as::k_replays: return "k_replays";
    case issued_as::one_launch: return "one_launch";
  }
  return "?";
}

void accumulated_step(benchmark::State& state, issued_as how, transformer_config const& c) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  graphstep::ops::cublaslt_handle handle;
  transformer_example::transformer model{c, pool, stream, handle};
  std::optional<gs::graphs::graph_exec> step;
  model.step();  // loads cuBLASLt's and graphstep's kernels before any capture
  bool const graphed = how != issued_as::eager;
  std::optional<gs::graphs::graph_exec> micro_batch, rest;
  if (how == issued_as::k_replays) {
    auto const start = std::chrono::steady_clock::now();
    micro_batch.emplace();
    rest.emplace();
    gs::graphs::capture(*micro_batch, stream, pool, [&] { model.accumulate_micro_batch(); });
    gs::graphs::capture(*rest, stream, pool, [&] { model.finish_accumulated_step(); });
    state.counters["capture_ms"] = milliseconds_since(start);
    state.counters["graph_nodes"] =
        static_cast<double>(micro_batch->node_counts().total + rest->node_counts().total);
    model.begin_accumulation();
  } else if (graphed) {
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
    if (how == issued_as::k_replays) {
      for (int i = 0; i < c.micro_batches; ++i) {
        micro_batch->replay(stream);
        ++launches;
      }
      rest->replay(stream);
      ++launches;
    } else if (graphed) {
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
    for (issued_as how : {issued_as::eager, issued_as::k_replays, issued_as::one_launch}) {
      if (how == issued_as::k_replays && k == 1) continue;  // one micro-batch: one_launch's graph
      std::string const full =
          std::string{"accumulated_step/"} + ::name(how) + "/" + name + "/K" + std::to_string(k);
      benchmark::RegisterBenchmark(full.c_str(), accumulated_step, how, c)
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
