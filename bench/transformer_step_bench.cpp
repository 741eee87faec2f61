// The training step of the GPT-2-style model of examples/transformer_lm, eager launches against
// the whole step replayed as one graph, in one run: at a launch-bound configuration (12 layers,
// width 768, batch 1, sequence 128) and a compute-bound one (batch 16, sequence 1024). GPU time
// per step from CUDA events; counters: the host time spent issuing a step, capture and
// instantiation times, and the pool's memory against the bytes live at its peak.

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

[[maybe_unused]] transformer_config gpt2_small(int batch, int sequence) {
  transformer_config c;
  c.layers = 12;
  c.channels = 768;
  c.heads = 12;
  c.batch = batch;
  c.sequence = sequence;
  return c;
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

void transformer_step(benchmark::State& state, bool graphed, transformer_config const& c) {
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
  }
  auto issue = [&] {
    if (graphed) {
      step->replay(stream);
    } else {
      model.step();
    }
  };
  bench::time_steps(state, stream, 3, issue);
  auto const memory = pool.statistics();
  state.counters["layers"] = c.layers;
  state.counters["width"] = c.channels;
  state.counters["heads"] = c.heads;
  state.counters["batch"] = c.batch;
  state.counters["sequence"] = c.sequence;
  state.counters["parameters"] = static_cast<double>(model.parameter_count());
  state.counters["pool_reserved_bytes"] = static_cast<double>(memory.reserved_bytes);
  state.counters["pool_mapped_bytes"] = static_cast<double>(memory.mapped_bytes);
  state.counters["peak_live_bytes"] = static_cast<double>(memory.peak_bytes_in_use);
  state.SetLabel("attention: plain CUDA kernels");
}

void register_configuration(char const* name, transformer_config const& c, int repetitions) {
  for (bool graphed : {false, true}) {
    std::string const full =
        std::string{"transformer_step/"} + (graphed ? "graphed/" : "eager/") + name;
    benchmark::RegisterBenchmark(full.c_str(), transformer_step, graphed, c)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->Repetitions(repetitions)
        ->ReportAggregatesOnly(true);
  }
}

// Registered before main() runs, as BENCHMARK() does.
bool const registered = [] {
#if defined(GRAPHSTEP_CUDA_SIM)
  // On the simulated device a tiny model shows that the benchmark runs.
  transformer_config tiny;
  tiny.layers = 2;
  tiny.channels = 32;
  tiny.heads = 2;
  tiny.batch = 2;
  tiny.sequence = 8;
  tiny.vocab = 100;
  register_configuration("tiny", tiny, 1);
#else
  register_configuration("launch_bound", gpt2_small(1, 128), 5);
  register_configuration("compute_bound", gpt2_small(16, 1024), 5);
#endif
  return true;
}();

}  // namespace
