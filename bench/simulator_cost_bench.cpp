// What the simulated CUDA device costs a trainer's CI: the CPU time of one training step's
// forward and backward of the GPT-2-style model of examples/transformer_lm, run eagerly on the
// simulated device (every kernel from its source, cuBLASLt's GEMMs on the CPU, the race checker
// on), against the same step computed in plain C++ on the host (the fp64 reference of
// models/transformer_reference.hpp: forward, loss and every gradient), in one run, at a tiny and
// a small size. Manual time: the process's CPU time per simulated step. Counters, each the median
// of three steps: the host reference's time, the ratio of the two, and the same simulated step
// with the race checker off (its own cost).
//
// Only built into the simulated device's benchmark binary; not part of the smoke run.

#include <benchmark/benchmark.h>

#if defined(GRAPHSTEP_CUDA_SIM)

#include <algorithm>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/dtype_conversion.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <string>
#include <vector>

#include "simulator_cost.hpp"
#include "transformer_model.hpp"
#include "transformer_reference.hpp"

namespace gs = graphstep;

namespace {

using transformer_example::transformer;
using transformer_example::transformer_config;

void simulated_step(benchmark::State& state, transformer_config const& c) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  graphstep::ops::cublaslt_handle handle;
  transformer model{c, pool, stream, handle};
  auto const step = [&] {
    model.forward_backward();
    stream.synchronize();
  };
  // The first step (warm-up) makes the pool's first mappings and cuBLASLt's plans.
  bench::simulated_cost const cost = bench::time_simulated_steps(state, step);

  // The reference reads the model's own weights (bf16 on the device) as doubles.
  std::vector<std::uint16_t> bits(model.parameter_count());
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(bits.data(), model.weights().data(),
                                     bits.size() * sizeof(std::uint16_t), cudaMemcpyDeviceToHost,
                                     stream.get()));
  stream.synchronize();
  std::vector<double> weights(bits.size());
  std::transform(bits.begin(), bits.end(), weights.begin(),
                 [](std::uint16_t b) { return static_cast<double>(gs::bfloat16_to_float(b)); });
  double const host =
      bench::median_step([&] {
        auto const result = transformer_example::reference_step(
            c, model.tensors(), weights, model.input_tokens(), model.target_tokens());
        benchmark::DoNotOptimize(result.loss);
      }).cpu;

  bench::report_cost(state, cost, host);
  state.SetLabel("wall time per forward+backward step; host reference: fp64 plain C++, one thread");
}

void register_size(char const* name, transformer_config const& c) {
  std::string const full = std::string{"simulator_cost/transformer_step/"} + name;
  benchmark::RegisterBenchmark(full.c_str(), simulated_step, c)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(3)
      ->Repetitions(3)
      ->ReportAggregatesOnly(true);
}

transformer_config sized(int layers, int width, int heads, int batch, int sequence, int vocab) {
  transformer_config c;
  c.layers = layers;
  c.channels = width;
  c.heads = heads;
  c.batch = batch;
  c.sequence = sequence;
  c.vocab = vocab;
  c.attention = transformer_example::attention_path::plain;  // no cuDNN on the simulated device
  return c;
}

// Registered before main() runs, as BENCHMARK() does. The tiny size is the example's test; the
// small one the size the race checker's cost is documented at (sim/docs/simulator.md).
bool const registered = [] {
  register_size("tiny", sized(2, 32, 2, 2, 8, 100));
  register_size("small", sized(2, 128, 4, 4, 64, 1000));
  return true;
}();

}  // namespace

#endif  // GRAPHSTEP_CUDA_SIM
