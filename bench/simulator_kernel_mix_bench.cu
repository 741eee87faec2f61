// What the simulated CUDA device costs a C trainer written in llm.c's style: the kernels of one
// step of a tiny GPT-2 (2 layers, width 64, 4 heads, batch 2, sequence 32, vocabulary 8 200:
// per layer two layer norms, the QKV, projection and MLP matmuls with their bias gradients, the
// attention softmax; the final layer norm, the logits matmul and their softmax; AdamW over every
// parameter), launched as a plain CUDA program launches them (llmc_style_kernels.cuh: kernels in
// a header, templates, cooperative groups, shuffles, shared memory), against the same arithmetic
// in plain C++ loops on the host, in one run. Manual time: the process's CPU time per simulated
// step. Counters (medians of three): the host step's time, the ratio, and the simulated step with
// the race checker off. Not every kernel of a training step (no attention matmuls, no backward
// of the matmuls): the mix of idioms, at the sizes where the simulator's per-thread costs show.

#include <benchmark/benchmark.h>

#if defined(GRAPHSTEP_CUDA_SIM)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <graphstep/cuda/check.hpp>
#include <random>
#include <vector>

#include "llmc_style_host.hpp"
#include "llmc_style_kernels.cuh"
#include "simulator_cost.hpp"

namespace {

constexpr int layers = 2;
constexpr int channels = 64;
constexpr int heads = 4;
constexpr int batch = 2;
constexpr int sequence = 32;
constexpr int vocab = 8200;
constexpr int rows = batch * sequence;
constexpr int tile = 16;

// The buffers of the step, on the device or on the host: one flat array each, filled alike.
struct buffers {
  std::size_t parameters = 0;  // every weight and bias, AdamW's view
  float* weights{};            // [parameters]
  float* gradients{};          // [parameters]
  float* m{};
  float* v{};
  float* x{};       // rows × channels
  float* normed{};  // rows × channels
  float* wide{};    // rows × max(3·channels, 4·channels, vocab)
  float* mean{};    // rows
  float* rstd{};    // rows
  float* scores{};  // batch · heads · sequence × sequence
  float* probs{};   // as scores, and the logits' rows × vocab
};

std::size_t parameter_count() {
  std::size_t const per_layer = 4 * channels +                            // two layer norms
                                3 * channels * channels + 3 * channels +  // qkv
                                channels * channels + channels +          // projection
                                4 * channels * channels + 4 * channels +  // fc
                                4 * channels * channels + channels;       // fc2
  return layers * per_layer + 2 * channels + static_cast<std::size_t>(vocab) * channels;
}

std::size_t wide_columns() {
  return std::max<std::size_t>(4 * channels, vocab);
}

std::size_t score_elements() {
  return static_cast<std::size_t>(batch) * heads * sequence * sequence;
}

// Runs one step through `ops`, which launches (device) or loops (host); the offsets into the
// parameters are the same either way.
template <typename Ops>
void step(Ops& ops, buffers const& b) {
  std::size_t offset = 0;
  auto take = [&](std::size_t count) {
    float* const p = b.weights + offset;
    float* const g = b.gradients + offset;
    offset += count;
    return std::pair<float*, float*>{p, g};
  };
  // A layer norm with its weight and shift; returns the shift.
  auto const layernorm = [&](float* out, float const* in) {
    float const* const weight = take(channels).first;
    float const* const shift = take(channels).first;
    ops.layernorm(out, in, weight, shift, rows, channels);
    return shift;
  };
  // A linear layer (columns × inner weight, columns bias) and its bias gradient.
  auto const linear = [&](float* out, float const* in, int inner, int columns) {
    float const* const weight = take(static_cast<std::size_t>(columns) * inner).first;
    auto const bias = take(static_cast<std::size_t>(columns));
    ops.matmul(out, in, weight, bias.first, rows, inner, columns);
    ops.bias_gradient(bias.second, out, rows, columns);
  };
  for (int l = 0; l < layers; ++l) {
    layernorm(b.normed, b.x);
    linear(b.wide, b.normed, channels, 3 * channels);
    ops.softmax(b.probs, b.scores, batch * heads * sequence, sequence);
    linear(b.x, b.normed, channels, channels);
    layernorm(b.normed, b.x);
    linear(b.wide, b.normed, channels, 4 * channels);
    linear(b.x, b.wide, 4 * channels, channels);
  }
  float const* const final_shift = layernorm(b.normed, b.x);
  float const* const wte = take(static_cast<std::size_t>(vocab) * channels).first;
  // The logits have no bias: the layer norm's shift serves (zeros would do as well).
  ops.matmul(b.wide, b.normed, wte, final_shift, rows, channels, vocab);
  ops.softmax(b.probs, b.wide, rows, vocab);
  ops.adamw(b.weights, b.gradients, b.m, b.v, b.parameters);
}

struct adamw_settings {
  float learning_rate = 1e-4F;
  float beta1 = 0.9F;
  float beta2 = 0.95F;
  float epsilon = 1e-8F;
  float weight_decay = 0.0F;
};

struct device_ops {
  cudaStream_t stream{};
  float* mean{};
  float* rstd{};
  adamw_settings adam;
  void layernorm(float* out, float const* x, float const* w, float const* bias, int n, int c) {
    llmc_style::layernorm_forward<float>
        <<<(n + 3) / 4, 128, 0, stream>>>(out, mean, rstd, x, w, bias, n, c);
  }
  void matmul(float* out, float const* in, float const* w, float const* bias, int n, int k, int c) {
    dim3 const grid{static_cast<unsigned>((c + tile - 1) / tile),
                    static_cast<unsigned>((n + tile - 1) / tile)};
    llmc_style::matmul_forward<float, tile>
        <<<grid, dim3{tile, tile}, 0, stream>>>(out, in, w, bias, n, k, c);
  }
  void bias_gradient(float* dbias, float const* dout, int n, int c) {
    llmc_style::matmul_backward_bias<float><<<(c + 31) / 32, 256, 0, stream>>>(dbias, dout, n, c);
  }
  void softmax(float* out, float const* x, int n, int c) {
    llmc_style::softmax_forward<float><<<n, 128, 0, stream>>>(out, x, c);
  }
  void adamw(float* p, float const* g, float* m, float* v, std::size_t count) {
    llmc_style::adamw<float><<<static_cast<unsigned>((count + 255) / 256), 256, 0, stream>>>(
        p, g, m, v, count, adam.learning_rate, adam.beta1, adam.beta2, 1.0F - adam.beta1,
        1.0F - adam.beta2, adam.epsilon, adam.weight_decay);
  }
};

struct host_ops {
  float* mean{};
  float* rstd{};
  adamw_settings adam;
  void layernorm(float* out, float const* x, float const* w, float const* bias, int n, int c) {
    llmc_style::layernorm_forward_host(out, mean, rstd, x, w, bias, n, c);
  }
  static void matmul(float* out, float const* in, float const* w, float const* bias, int n, int k,
                     int c) {
    llmc_style::matmul_forward_host(out, in, w, bias, n, k, c);
  }
  static void bias_gradient(float* dbias, float const* dout, int n, int c) {
    llmc_style::matmul_backward_bias_host(dbias, dout, n, c);
  }
  static void softmax(float* out, float const* x, int n, int c) {
    llmc_style::softmax_forward_host(out, x, n, c);
  }
  void adamw(float* p, float const* g, float* m, float* v, std::size_t count) const {
    llmc_style::adamw_host(p, g, m, v, count, adam.learning_rate, adam.beta1, adam.beta2,
                           1.0F - adam.beta1, 1.0F - adam.beta2, adam.epsilon, adam.weight_decay);
  }
};

// Every buffer's initial values, the same for the device and the host step.
std::vector<std::vector<float>> initial_values() {
  std::mt19937 generator{7};
  std::normal_distribution<float> normal{0.0F, 0.02F};
  std::size_t const sizes[] = {parameter_count(),
                               parameter_count(),
                               parameter_count(),
                               parameter_count(),
                               static_cast<std::size_t>(rows) * channels,
                               static_cast<std::size_t>(rows) * channels,
                               rows * wide_columns(),
                               score_elements()};
  std::vector<std::vector<float>> values;
  for (std::size_t const n : sizes) {
    std::vector<float> v(n);
    for (float& e : v) e = normal(generator);
    values.push_back(std::move(v));
  }
  for (float& e : values[3]) e = std::abs(e);  // AdamW's second moments are not negative
  return values;
}

void llmc_style_step(benchmark::State& state) {
  auto const values = initial_values();
  std::vector<float*> device(values.size() + 3);
  for (std::size_t i = 0; i < values.size(); ++i) {
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&device[i], values[i].size() * sizeof(float)));
    GRAPHSTEP_CUDA_TRY(cudaMemcpy(device[i], values[i].data(), values[i].size() * sizeof(float),
                                  cudaMemcpyHostToDevice));
  }
  std::size_t const probs = std::max(score_elements(), rows * wide_columns());
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&device[values.size()], probs * sizeof(float)));
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&device[values.size() + 1], rows * sizeof(float)));
  GRAPHSTEP_CUDA_TRY(cudaMalloc(&device[values.size() + 2], rows * sizeof(float)));
  auto const as_buffers = [](std::vector<float*> const& p) {
    buffers b;
    b.parameters = parameter_count();
    b.weights = p[0];
    b.gradients = p[1];
    b.m = p[2];
    b.v = p[3];
    b.x = p[4];
    b.normed = p[5];
    b.wide = p[6];
    b.scores = p[7];
    b.probs = p[8];
    b.mean = p[9];
    b.rstd = p[10];
    return b;
  };
  // A copy from pageable memory may return before it lands, and the step's stream does not
  // wait for the legacy stream: the host waits for the uploads.
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  buffers const on_device = as_buffers(device);
  cudaStream_t stream = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  device_ops launch{stream, on_device.mean, on_device.rstd, {}};
  auto const simulated_step = [&] {
    step(launch, on_device);
    GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(stream));
  };
  bench::simulated_cost const cost = bench::time_simulated_steps(state, simulated_step);

  std::vector<std::vector<float>> host_values = values;
  host_values.emplace_back(probs);
  host_values.emplace_back(rows);
  host_values.emplace_back(rows);
  std::vector<float*> host(host_values.size());
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = host_values[i].data();
  buffers const on_host = as_buffers(host);
  host_ops loops{on_host.mean, on_host.rstd, {}};
  double const plain = bench::median_step([&] { step(loops, on_host); }).cpu;
  benchmark::DoNotOptimize(host_values[8].data());

  for (float* p : device) GRAPHSTEP_CUDA_TRY(cudaFree(p));
  GRAPHSTEP_CUDA_TRY(cudaStreamDestroy(stream));
  bench::report_cost(state, cost, plain);
  state.SetLabel("wall time per step; host: the same loops in plain C++, one thread");
}

BENCHMARK(llmc_style_step)
    ->Name("simulator_cost/llmc_style_kernels")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

}  // namespace

#endif  // GRAPHSTEP_CUDA_SIM
