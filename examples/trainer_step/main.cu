// trainer_step: the step of a mixed-precision trainer captured once and replayed, with what a
// real trainer changes every step kept out of the graph's frozen values:
//   - token ids and per-step scalars in step_inputs, uploaded before each replay;
//   - a kernel's grid sized by host work each step (the batch's valid rows), set on its node;
//   - AdamW over bf16 weights with fp32 masters, two parameter groups, warm-up + cosine
//     schedule, global-norm clipping and stochastic rounding, all decided on the device;
//   - the loss read back asynchronously, one step late, without a host synchronization.
// The same steps run eagerly on a second copy of the model; the losses must agree bit for bit
// (every kernel sums in a fixed order).

#include <cstdint>
#include <cstdio>
#include <graphstep/graphstep.hpp>
#include <graphstep/train/mixed_precision.hpp>
#include <optional>
#include <random>
#include <vector>

#include "../common/command_line.hpp"

namespace gs = graphstep;

namespace {

constexpr int vocab = 256;
constexpr int dim = 64;
constexpr int max_rows = 128;
constexpr int steps = 12;
constexpr int reduce_threads = 256;

struct step_scalars {
  std::int32_t rows;  // valid rows of this step's batch
};

// residual[r, d] = embedding[token r, d] + bias[d] − target[token r, d], and the loss's
// gradient with respect to the prediction, 2 · residual · normalizer, where normalizer is
// 1 / (rows · dim): a value the host computes per step and passes by value, as trainers do.
// One block per row.
__global__ void residual_kernel(float* residual, float* prediction_gradient,
                                std::uint16_t const* embedding, std::uint16_t const* bias,
                                float const* target, std::int32_t const* tokens, float normalizer) {
  int const r = static_cast<int>(blockIdx.x);
  int const d = static_cast<int>(threadIdx.x);
  int const t = tokens[r];
  float const prediction =
      gs::bfloat16_to_float(embedding[t * dim + d]) + gs::bfloat16_to_float(bias[d]);
  float const difference = prediction - target[t * dim + d];
  residual[r * dim + d] = difference;
  prediction_gradient[r * dim + d] = 2.0F * difference * normalizer;
}

// loss = Σ residual² / (rows · dim), summed in a fixed order by one block.
__global__ void loss_kernel(float* loss, float const* residual, step_scalars const* scalars) {
  __shared__ float partial[reduce_threads];
  int const n = scalars->rows * dim;
  float sum = 0.0F;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += reduce_threads) {
    sum += residual[i] * residual[i];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0F;
    for (float value : partial) total += value;
    *loss = total / static_cast<float>(n);
  }
}

// d loss / d embedding[v, d]: the prediction gradients of the rows with token v, summed in row
// order (no atomics: eager and replayed steps sum alike).
__global__ void embedding_gradient_kernel(std::uint16_t* gradient, float const* prediction_gradient,
                                          std::int32_t const* tokens, step_scalars const* scalars) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= vocab * dim) return;
  int const v = i / dim;
  int const d = i % dim;
  float g = 0.0F;
  for (int r = 0; r < scalars->rows; ++r) {
    if (tokens[r] == v) g += prediction_gradient[r * dim + d];
  }
  gradient[i] = gs::bfloat16_nearest_even(g);
}

__global__ void bias_gradient_kernel(std::uint16_t* gradient, float const* prediction_gradient,
                                     step_scalars const* scalars) {
  int const d = static_cast<int>(threadIdx.x);
  float g = 0.0F;
  for (int r = 0; r < scalars->rows; ++r) g += prediction_gradient[r * dim + d];
  gradient[d] = gs::bfloat16_nearest_even(g);
}

float normalizer_for(int rows) {
  return 1.0F / static_cast<float>(rows * dim);
}

// One copy of the model, its optimizer and its step's buffers.
struct model {
  model(std::vector<std::uint16_t> const& initial_embedding, gs::cuda::stream_view stream,
        gs::memory::memory_pool& pool)
      : embedding{{"embedding", {vocab, dim}, gs::dtype::bfloat16}, stream, pool},
        bias{{"bias", {dim}, gs::dtype::bfloat16}, stream, pool},
        embedding_gradient{{"embedding gradient", {vocab, dim}, gs::dtype::bfloat16}, stream, pool},
        bias_gradient{{"bias gradient", {dim}, gs::dtype::bfloat16}, stream, pool},
        residual{max_rows * dim * sizeof(float), stream, pool},
        prediction_gradient{max_rows * dim * sizeof(float), stream, pool},
        loss{sizeof(float), stream, pool},
        tokens{max_rows, stream, pool},
        scalars{1, stream} {
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(embedding.data(), initial_embedding.data(), embedding.size(),
                                       cudaMemcpyHostToDevice, stream.get()));
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(bias.data(), 0, bias.size(), stream.get()));
    stream.synchronize();
    gs::train::lr_schedule schedule;
    schedule.shape = gs::train::lr_shape::warmup_cosine;
    schedule.base = 0.05F;
    schedule.warmup_steps = 3;
    schedule.total_steps = steps;
    schedule.final_fraction = 0.1F;
    gs::train::mixed_adamw_options options;
    options.max_grad_norm = 1.0F;
    options.stochastic_rounding = true;
    options.seed = 2024;
    std::vector<gs::train::parameter> const parameters{
        {embedding.view(), embedding_gradient.view(), 0}, {bias.view(), bias_gradient.view(), 1}};
    // Decay on the embedding, none on the bias.
    optimizer.emplace(parameters,
                      std::vector<gs::train::parameter_group>{{0.01F, 1.0F}, {0.0F, 1.0F}}, options,
                      schedule, nullptr, stream, pool);
  }

  // Forward, backward and optimizer step for a batch of `rows` rows, issued to `stream`.
  void step(gs::cuda::stream_view stream, int rows) {
    auto* r = static_cast<float*>(residual.data());
    auto* g = static_cast<float*>(prediction_gradient.data());
    residual_kernel<<<rows, dim, 0, stream.get()>>>(
        r, g, static_cast<std::uint16_t const*>(embedding.data()),
        static_cast<std::uint16_t const*>(bias.data()), target, tokens.data(),
        normalizer_for(rows));
    if (stream.is_capturing()) node = gs::graphs::last_captured_launch(stream, residual_kernel);
    loss_kernel<<<1, reduce_threads, 0, stream.get()>>>(static_cast<float*>(loss.data()), r,
                                                        scalars.data());
    embedding_gradient_kernel<<<(vocab * dim + 255) / 256, 256, 0, stream.get()>>>(
        static_cast<std::uint16_t*>(embedding_gradient.data()), g, tokens.data(), scalars.data());
    bias_gradient_kernel<<<1, dim, 0, stream.get()>>>(
        static_cast<std::uint16_t*>(bias_gradient.data()), g, scalars.data());
    optimizer->step(stream);
  }

  float const* target{};
  gs::cuda::device_buffer embedding;
  gs::cuda::device_buffer bias;
  gs::cuda::device_buffer embedding_gradient;
  gs::cuda::device_buffer bias_gradient;
  gs::cuda::device_buffer residual;
  gs::cuda::device_buffer prediction_gradient;
  gs::cuda::device_buffer loss;
  gs::memory::step_input<std::int32_t> tokens;
  gs::memory::step_input<step_scalars> scalars;
  std::optional<gs::train::mixed_precision_adamw> optimizer;
  std::optional<gs::graphs::kernel_node_for<residual_kernel>> node;
};

int run() {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  std::mt19937 random{7};
  std::normal_distribution<float> normal{0.0F, 0.5F};
  std::vector<float> target_host(vocab * dim);
  for (float& t : target_host) t = normal(random);
  std::vector<std::uint16_t> initial(vocab * dim);
  for (std::uint16_t& w : initial) w = gs::bfloat16_nearest_even(normal(random));
  gs::cuda::device_buffer target{target_host.size() * sizeof(float), stream, pool};
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(target.data(), target_host.data(), target.size(),
                                     cudaMemcpyHostToDevice, stream.get()));

  model eager{initial, stream, pool};
  model graphed{initial, stream, pool};
  eager.target = graphed.target = static_cast<float const*>(target.data());

  gs::graphs::graph_exec step;
  gs::graphs::capture(step, stream, pool, [&] { graphed.step(stream, max_rows); });
  std::printf("captured: %zu kernel nodes, %zu memcpy, %zu memset\n", step.node_counts().kernel,
              step.node_counts().memcpy, step.node_counts().memset);

  gs::memory::host_readback<float> graphed_losses;
  std::uniform_int_distribution<int> row_count{max_rows / 2, max_rows};
  std::uniform_int_distribution<std::int32_t> token{0, vocab - 1};
  int mismatches = 0;
  for (int k = 1; k <= steps; ++k) {
    // Host work decides the batch: its length, hence the residual kernel's grid.
    int const rows = row_count(random);
    std::vector<std::int32_t> batch(max_rows, 0);
    for (int r = 0; r < rows; ++r) batch[static_cast<std::size_t>(r)] = token(random);

    eager.tokens.upload(batch, stream);
    eager.scalars.set(step_scalars{rows}, stream);
    eager.step(stream, rows);
    float eager_loss = 0.0F;
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(&eager_loss, eager.loss.data(), sizeof(float),
                                       cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();

    graphed.tokens.upload(batch, stream);
    graphed.scalars.set(step_scalars{rows}, stream);
    // The grid and the by-value normalizer of this step; the capture's would be frozen.
    graphed.node->set_argument<6>(step, normalizer_for(rows));  // residual_kernel's normalizer
    graphed.node->set_grid(step, dim3(static_cast<unsigned>(rows)));
    step.replay(stream);
    std::uint64_t const ticket =
        graphed_losses.enqueue(static_cast<float const*>(graphed.loss.data()), stream);
    float const graphed_loss = graphed_losses.value(ticket);
    bool const same = graphed_loss == eager_loss;
    mismatches += same ? 0 : 1;
    std::printf("step %2d  rows %3d  loss eager %.7f  graphed %.7f  %s\n", k, rows, eager_loss,
                graphed_loss, same ? "identical" : "DIFFERENT");
  }
  std::printf("steps taken: eager %lld, graphed %lld\n",
              static_cast<long long>(eager.optimizer->steps_taken(stream)),
              static_cast<long long>(graphed.optimizer->steps_taken(stream)));
  if (mismatches != 0) {
    std::fprintf(stderr, "trainer_step: %d of %d steps gave another loss when replayed\n",
                 mismatches, steps);
    return 1;
  }
  std::printf("trainer_step: the replayed step gave the eager losses bit for bit\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  examples::command_line{
      argc, argv, "trainer_step", "",
      "The step of a mixed-precision trainer captured once and replayed, with what changes every\n"
      "step kept out of the graph's frozen values: token ids and scalars uploaded before each\n"
      "replay, a grid sized each step, AdamW with a warm-up and cosine schedule, clipping and\n"
      "stochastic rounding decided on the device, the loss read back one step late. The same\n"
      "steps run eagerly on a second copy, and the losses must agree bit for bit.\n"
      "Takes no arguments.\n"}
      .expect_none();
  if (gs::cuda::device_count() == 0) {
    std::fprintf(stderr,
                 "trainer_step: no CUDA device visible; this example needs an NVIDIA GPU, or a "
                 "build for the simulated device (cmake --preset sim)\n");
    return 1;
  }
#if defined(GRAPHSTEP_CUDA_SIM)
  std::printf("trainer_step: running on the simulated CUDA device (no GPU)\n");
#endif
  try {
    return run();
  } catch (std::exception const& e) {
    std::fprintf(stderr, "trainer_step: %s\n", e.what());
    return 1;
  }
}
