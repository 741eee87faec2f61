// The mixed-precision AdamW on a device against the fp32 host reference (train/reference.hpp):
// bit for bit over captured replays with parameter groups and a loss scale; within a stated
// bound with global-norm clipping; skipped steps on a found-inf flag and on a non-finite norm;
// stochastic rounding that replays identically for one seed; and what it refuses.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/dtype_conversion.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/memory/step_input.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/device_checkpoint.hpp>
#include <graphstep/train/loss_scaler.hpp>
#include <graphstep/train/loss_scaler_options.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/mixed_precision.hpp>
#include <graphstep/train/mixed_precision_adamw.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/reference.hpp>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;
namespace gt = graphstep::train;
using gs::testing::message_of;

static_assert(std::is_nothrow_move_constructible_v<gt::mixed_precision_adamw>);
static_assert(!std::is_copy_constructible_v<gt::mixed_precision_adamw>);

namespace {

// A backward pass whose gradients are fp16 or bf16: the true gradient times the device loss
// scale, rounded to nearest (inf where the product exceeds the type's range), as autocast's
// backward writes them.
__global__ void scaled_backward_kernel(void* gradient, bool bfloat16, float const* input,
                                       float const* scale, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  if (bfloat16) {
    static_cast<__nv_bfloat16*>(gradient)[i] = __float2bfloat16(input[i] * *scale);
  } else {
    static_cast<__half*>(gradient)[i] = __float2half(input[i] * *scale);
  }
}

class mixed_adamw_test : public gs::testing::gpu_test {
 protected:
  void SetUp() override {
    gs::testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
  }
  void TearDown() override {
    for (void* p : allocations_) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(p));
  }
  template <typename T>
  T* upload(std::vector<T> const& host) {
    void* device = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&device, sizeof(T) * host.size()));
    allocations_.push_back(device);
    gs::testing::copy_to_device(device, host.data(), sizeof(T) * host.size());
    return static_cast<T*>(device);
  }
  template <typename T>
  std::vector<T> download(T const* device, std::size_t n) {
    std::vector<T> host(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), device, sizeof(T) * n, cudaMemcpyDeviceToHost,
                                       stream_->get()));
    stream_->synchronize();
    return host;
  }
  template <typename T>
  void overwrite(T* device, std::vector<T> const& host) {
    gs::testing::copy_to_device(device, host.data(), sizeof(T) * host.size());
  }
  // bf16 values in [-range, range), as bits and as the floats they hold.
  static std::vector<std::uint16_t> random_bf16(std::size_t n, float range, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist{-range, range};
    std::vector<std::uint16_t> bits(n);
    for (auto& b : bits) b = graphstep::bfloat16_nearest_even(dist(rng));
    return bits;
  }
  static std::vector<float> as_floats(std::vector<std::uint16_t> const& bits) {
    std::vector<float> values(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) values[i] = graphstep::bfloat16_to_float(bits[i]);
    return values;
  }
  static std::vector<std::uint32_t> bits_of(std::vector<float> const& values) {
    std::vector<std::uint32_t> bits(values.size());
    std::memcpy(bits.data(), values.data(), sizeof(float) * values.size());
    return bits;
  }
  static gt::reference::mixed_adamw_scalars scalars(gt::mixed_adamw_options const& options,
                                                    gt::lr_schedule const& schedule,
                                                    std::int64_t step, float inv_loss_scale,
                                                    float clip_factor) {
    return {schedule.at(step), gt::reference::bias_correction(options.beta1, step),
            std::sqrt(gt::reference::bias_correction(options.beta2, step)), inv_loss_scale,
            clip_factor};
  }
  template <typename T>
  void checked_half_gradients_skip_overflowing_steps(gs::dtype type, float overflowing);
  std::optional<gs::cuda::stream> stream_;
  std::vector<void*> allocations_;
};

// One host tensor mirrored by the reference.
struct host_tensor {
  std::vector<float> master;
  std::vector<float> gradient;
  std::vector<float> m;
  std::vector<float> v;
};

}  // namespace

// bf16, fp16 and fp32 tensors in two groups (decay 0.1 at the full rate; no decay at half the
// rate), gradients carrying a loss scale of 8 read from device memory, a warm-up schedule:
// every replay of the captured step gives exactly the reference's master weights, and the
// model weights are those rounded to nearest even.
TEST_F(mixed_adamw_test, captured_replays_match_the_reference_bit_for_bit_with_groups) {
  std::mt19937 rng{21};
  std::vector<std::size_t> const sizes{5, 70000, 1000, 333};
  std::vector<gs::dtype> const types{gs::dtype::bfloat16, gs::dtype::bfloat16, gs::dtype::float16,
                                     gs::dtype::float32};
  std::vector<std::uint32_t> const group_of{0, 1, 0, 1};
  std::vector<gt::parameter_group> const groups{{0.1F, 1.0F}, {0.0F, 0.5F}};
  std::vector<gt::parameter> parameters;
  std::vector<host_tensor> host;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    auto const weight_bits = random_bf16(sizes[t], 1.0F, rng);
    auto const grad_bits = random_bf16(sizes[t], 8.0F, rng);  // loss scale 8
    host_tensor h{as_floats(weight_bits), as_floats(grad_bits), std::vector<float>(sizes[t], 0.0F),
                  std::vector<float>(sizes[t], 0.0F)};
    void* value = nullptr;
    void* gradient = nullptr;
    if (types[t] == gs::dtype::bfloat16) {
      value = upload(weight_bits);
      gradient = upload(grad_bits);
    } else if (types[t] == gs::dtype::float16) {
      std::vector<__half> w(sizes[t]), g(sizes[t]);
      for (std::size_t i = 0; i < sizes[t]; ++i) {
        w[i] = __float2half(h.master[i]);  // the host keeps the values fp16 holds
        g[i] = __float2half(h.gradient[i]);
        h.master[i] = __half2float(w[i]);
        h.gradient[i] = __half2float(g[i]);
      }
      value = upload(w);
      gradient = upload(g);
    } else {
      value = upload(h.master);
      gradient = upload(h.gradient);
    }
    parameters.push_back(
        {{value, types[t], sizes[t]}, {gradient, types[t], sizes[t]}, group_of[t]});
    host.push_back(std::move(h));
  }
  // The gradients carry a loss scale of 8, which the scaler holds (its finding starts finite).
  gt::loss_scaler_options eight;
  eight.init_scale = 8.0F;
  std::vector<gs::device_span> gradients;
  for (auto const& p : parameters) gradients.push_back(p.gradient);
  gt::loss_scaler const scaler{gradients, eight, *stream_};
  gt::mixed_adamw_options const options;
  gt::lr_schedule schedule;
  schedule.shape = gt::lr_shape::linear_warmup;
  schedule.base = 1e-2F;
  schedule.warmup_steps = 3;
  gt::mixed_precision_adamw optimizer{parameters, groups, options, schedule, &scaler, *stream_};
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, [&] { optimizer.step(*stream_); });
  for (std::int64_t s = 1; s <= 5; ++s) {
    step.replay(*stream_);
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      auto& h = host[t];
      gt::reference::mixed_adamw_step(h.master, h.m, h.v, h.gradient, options, groups[group_of[t]],
                                      scalars(options, schedule, s, 0.125F, 1.0F));
      auto const master = download(optimizer.master_weights(t), sizes[t]);
      ASSERT_EQ(bits_of(master), bits_of(h.master)) << "step " << s << ", tensor " << t;
      if (types[t] == gs::dtype::bfloat16) {
        EXPECT_EQ(download(static_cast<std::uint16_t const*>(parameters[t].value.data()), sizes[t]),
                  gt::reference::to_bfloat16(h.master, false, 0, s, 0))
            << "step " << s << ", tensor " << t;
      } else if (types[t] == gs::dtype::float16) {
        auto const got = download(static_cast<__half const*>(parameters[t].value.data()), sizes[t]);
        for (std::size_t i = 0; i < sizes[t]; ++i) {
          __half const want = __float2half(h.master[i]);
          ASSERT_EQ(std::memcmp(&got[i], &want, sizeof want), 0) << "step " << s << ", " << i;
        }
      } else {
        EXPECT_EQ(
            bits_of(download(static_cast<float const*>(parameters[t].value.data()), sizes[t])),
            bits_of(h.master));
      }
    }
  }
  EXPECT_EQ(optimizer.steps_taken(*stream_), 5);
}

// A learning rate the host computes each step, uploaded through a step_input before each
// replay: every replay of the captured step applies its own step's value (bit for bit against
// the reference fed that value), the schedule given at construction is ignored meanwhile, and
// a null source gives the schedule back.
TEST_F(mixed_adamw_test, a_learning_rate_the_host_sets_before_each_replay_is_what_it_applies) {
  std::mt19937 rng{5};
  std::size_t const n = 3000;
  auto const weight_bits = random_bf16(n, 1.0F, rng);
  auto const grad_bits = random_bf16(n, 1.0F, rng);
  host_tensor h{as_floats(weight_bits), as_floats(grad_bits), std::vector<float>(n, 0.0F),
                std::vector<float>(n, 0.0F)};
  std::vector<gt::parameter_group> const groups{{0.01F, 0.5F}};
  std::vector<gt::parameter> const parameters{{{upload(weight_bits), gs::dtype::bfloat16, n},
                                               {upload(grad_bits), gs::dtype::bfloat16, n},
                                               0}};
  gt::mixed_adamw_options const options;
  gt::lr_schedule schedule;  // constant 1e-3: ignored while the host's value is read
  gt::mixed_precision_adamw optimizer{parameters, groups, options, schedule, {}, *stream_};
  gs::memory::step_input<float> learning_rate{1, *stream_};
  optimizer.read_learning_rate_from(learning_rate.data(), *stream_);
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, [&] { optimizer.step(*stream_); });

  auto const host_lr = [](std::int64_t s) { return 0.02F / static_cast<float>(s * s); };
  for (std::int64_t s = 1; s <= 4; ++s) {
    learning_rate.set(host_lr(s), *stream_);
    step.replay(*stream_);
    auto fed = scalars(options, schedule, s, 1.0F, 1.0F);
    fed.lr = host_lr(s);
    gt::reference::mixed_adamw_step(h.master, h.m, h.v, h.gradient, options, groups[0], fed);
    ASSERT_EQ(bits_of(download(optimizer.master_weights(0), n)), bits_of(h.master)) << "step " << s;
  }

  optimizer.read_learning_rate_from(nullptr, *stream_);
  learning_rate.set(123.0F, *stream_);  // no longer read
  step.replay(*stream_);
  gt::reference::mixed_adamw_step(h.master, h.m, h.v, h.gradient, options, groups[0],
                                  scalars(options, schedule, 5, 1.0F, 1.0F));
  EXPECT_EQ(bits_of(download(optimizer.master_weights(0), n)), bits_of(h.master));

  gs::graphs::graph_exec refused;
  EXPECT_THROW(gs::graphs::capture(
                   refused, *stream_,
                   [&] { optimizer.read_learning_rate_from(learning_rate.data(), *stream_); }),
               gs::usage_error);
}

// Resume: an optimizer restored from a checkpoint file of another's state after 3 steps (bf16
// tensors with stochastic rounding, an fp32 one, clipping, a warm-up schedule) takes the
// same next steps bit for bit, graphed, as the one that went on: weights, master weights and
// step count.
TEST_F(mixed_adamw_test, a_restored_optimizer_continues_bit_for_bit) {
  std::mt19937 rng{31};
  std::vector<std::size_t> const sizes{4099, 300, 70};
  std::vector<gs::dtype> const types{gs::dtype::bfloat16, gs::dtype::float32, gs::dtype::bfloat16};
  gt::mixed_adamw_options options;
  options.max_grad_norm = 0.5F;
  options.stochastic_rounding = true;
  options.seed = 99;
  gt::lr_schedule schedule;
  schedule.shape = gt::lr_shape::warmup_cosine;
  schedule.base = 1e-2F;
  schedule.warmup_steps = 2;
  schedule.total_steps = 10;
  std::vector<gt::parameter_group> const groups{{0.1F, 1.0F}};
  // Two copies of the model: the one that goes on, and the one that resumes (other weights).
  auto const make_parameters = [&](float range) {
    std::vector<gt::parameter> parameters;
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      auto const weights = random_bf16(sizes[t], range, rng);
      auto const gradients = random_bf16(sizes[t], 1.0F, rng);
      void* value = nullptr;
      void* gradient = nullptr;
      if (types[t] == gs::dtype::float32) {
        value = upload(as_floats(weights));
        gradient = upload(as_floats(gradients));
      } else {
        value = upload(weights);
        gradient = upload(gradients);
      }
      parameters.push_back({{value, types[t], sizes[t]}, {gradient, types[t], sizes[t]}, 0});
    }
    return parameters;
  };
  auto const went_on_parameters = make_parameters(1.0F);
  auto const resumed_parameters = make_parameters(3.0F);
  for (std::size_t t = 0; t < sizes.size(); ++t) {  // the same gradients every step on both
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpy(resumed_parameters[t].gradient.data(), went_on_parameters[t].gradient.data(),
                   sizes[t] * gs::size_in_bytes(types[t]), cudaMemcpyDeviceToDevice));
  }
  // A device-to-device cudaMemcpy does not wait for its copy ("no host-side synchronization is
  // performed"), and the optimizers run on a non-blocking stream.
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  gt::mixed_precision_adamw went_on{went_on_parameters, groups, options, schedule, {}, *stream_};
  gt::mixed_precision_adamw resumed{resumed_parameters, groups, options, schedule, {}, *stream_};
  gs::graphs::graph_exec went_on_step;
  gs::graphs::graph_exec resumed_step;
  gs::graphs::capture(went_on_step, *stream_, [&] { went_on.step(*stream_); });
  gs::graphs::capture(resumed_step, *stream_, [&] { resumed.step(*stream_); });
  resumed_step.replay(*stream_);  // its own history, which the restore must replace

  for (int s = 0; s < 3; ++s) went_on_step.replay(*stream_);
  char directory_template[] = "/tmp/graphstep_adamw_XXXXXX";
  ASSERT_NE(mkdtemp(directory_template), nullptr);
  std::string const path = std::string{directory_template} + "/optimizer.ckpt";
  {
    gt::checkpoint saved;
    for (std::size_t t = 0; t < sizes.size(); ++t) {  // the model's part: its weights
      gt::add_device_tensor(
          saved,
          {went_on_parameters[t].value.data(),
           {"model/" + std::to_string(t), {static_cast<std::int64_t>(sizes[t])}, types[t]}},
          *stream_);
    }
    went_on.save_to(saved, "optimizer", *stream_);
    saved.save(path);
  }
  auto const loaded = gt::checkpoint::load(path);
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    gt::load_device_tensor(
        loaded,
        {resumed_parameters[t].value.data(),
         {"model/" + std::to_string(t), {static_cast<std::int64_t>(sizes[t])}, types[t]}},
        *stream_);
  }
  resumed.restore_from(loaded, "optimizer", *stream_);
  std::remove(path.c_str());
  rmdir(directory_template);
  EXPECT_EQ(resumed.steps_taken(*stream_), 3);

  for (int s = 0; s < 4; ++s) {
    went_on_step.replay(*stream_);
    resumed_step.replay(*stream_);
  }
  EXPECT_EQ(resumed.steps_taken(*stream_), went_on.steps_taken(*stream_));
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    EXPECT_EQ(bits_of(download(resumed.master_weights(t), sizes[t])),
              bits_of(download(went_on.master_weights(t), sizes[t])))
        << "tensor " << t;
    std::size_t const bytes = sizes[t] * gs::size_in_bytes(types[t]);
    EXPECT_EQ(
        download(static_cast<unsigned char const*>(resumed_parameters[t].value.data()), bytes),
        download(static_cast<unsigned char const*>(went_on_parameters[t].value.data()), bytes))
        << "tensor " << t;
  }
}

// A checkpoint of another layout is refused naming the entry and both layouts, and changes
// nothing: the optimizer's step count and master weights are as they were.
TEST_F(mixed_adamw_test, a_checkpoint_of_another_layout_is_refused_and_changes_nothing) {
  std::mt19937 rng{37};
  auto const make = [&](std::vector<std::size_t> const& sizes) {
    std::vector<gt::parameter> parameters;
    for (std::size_t n : sizes) {
      parameters.push_back({{upload(random_bf16(n, 1.0F, rng)), gs::dtype::bfloat16, n},
                            {upload(random_bf16(n, 1.0F, rng)), gs::dtype::bfloat16, n}});
    }
    return parameters;
  };
  std::vector<gt::parameter_group> const groups{{0.0F, 1.0F}};
  gt::mixed_precision_adamw saved_one{make({64, 128}), groups, {}, {}, {}, *stream_};
  saved_one.step(*stream_);
  gt::checkpoint saved;
  saved_one.save_to(saved, "optimizer", *stream_);

  gt::mixed_precision_adamw wider{make({64, 256}), groups, {}, {}, {}, *stream_};
  auto const master_before = download(wider.master_weights(0), 64);
  std::string const said = message_of([&] { wider.restore_from(saved, "optimizer", *stream_); });
  EXPECT_NE(said.find("optimizer/1/master"), std::string::npos) << said;
  EXPECT_NE(said.find("[128]"), std::string::npos) << said;
  EXPECT_NE(said.find("[256]"), std::string::npos) << said;
  EXPECT_EQ(wider.steps_taken(*stream_), 0);
  EXPECT_EQ(bits_of(download(wider.master_weights(0), 64)), bits_of(master_before));

  gt::mixed_precision_adamw fewer{make({64}), groups, {}, {}, {}, *stream_};
  std::string const more = message_of([&] { fewer.restore_from(saved, "optimizer", *stream_); });
  EXPECT_NE(more.find("more tensors"), std::string::npos) << more;
  EXPECT_EQ(fewer.steps_taken(*stream_), 0);

  gt::mixed_precision_adamw elsewhere{make({64, 128}), groups, {}, {}, {}, *stream_};
  std::string const missing = message_of([&] { elsewhere.restore_from(saved, "adamw", *stream_); });
  EXPECT_NE(missing.find("adamw/step"), std::string::npos) << missing;

  gs::graphs::graph_exec refused;
  EXPECT_THROW(gs::graphs::capture(refused, *stream_,
                                   [&] { elsewhere.restore_from(saved, "optimizer", *stream_); }),
               gs::usage_error);
}

// Clipping to max_norm 0.5 with the norm computed in the graph (within 1e-5 of the fp64 norm;
// the master weights within 2e-6 of the reference fed that norm's clip factor), a step the
// found-inf flag skips, a step skipped for a NaN gradient, and the next finite step resuming
// as the reference's second step.
TEST_F(mixed_adamw_test, clipping_on_the_device_and_skipped_steps) {
  std::mt19937 rng{22};
  std::size_t const n = 50000;
  auto const weight_bits = random_bf16(n, 1.0F, rng);
  auto const grad_bits = random_bf16(n, 1.0F, rng);
  host_tensor h{as_floats(weight_bits), as_floats(grad_bits), std::vector<float>(n, 0.0F),
                std::vector<float>(n, 0.0F)};
  auto* weight = upload(weight_bits);
  auto* gradient = upload(grad_bits);
  // A scaler of scale 1 whose finding the test sets, as its `check` would leave it.
  gt::loss_scaler_options unit_scale;
  unit_scale.init_scale = 1.0F;
  gt::loss_scaler scaler{{{gradient, gs::dtype::bfloat16, n}}, unit_scale, *stream_};
  auto const set_finding = [&](unsigned int all_finite) {
    gt::checkpoint finding;
    finding.add_value("scaler", gt::loss_scaler_state{1.0F, 1.0F, 0, all_finite});
    scaler.restore_from(finding, "scaler", *stream_);
  };
  gt::mixed_adamw_options options;
  options.max_grad_norm = 0.5F;
  gt::lr_schedule schedule;
  schedule.base = 1e-2F;
  gt::mixed_precision_adamw optimizer{
      {{{weight, gs::dtype::bfloat16, n}, {gradient, gs::dtype::bfloat16, n}, 0}},
      {{0.01F, 1.0F}},
      options,
      schedule,
      &scaler,
      *stream_};
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, [&] { optimizer.step(*stream_); });
  double const norm = gt::reference::global_norm({h.gradient});
  ASSERT_GT(norm, 10.0);  // the clip is active
  auto const reference_step = [&](std::int64_t s) {
    float const clip = gt::gradient_clip_factor(static_cast<float>(norm), options.max_grad_norm,
                                                options.clip_epsilon);
    gt::reference::mixed_adamw_step(h.master, h.m, h.v, h.gradient, options, {0.01F, 1.0F},
                                    scalars(options, schedule, s, 1.0F, clip));
  };
  auto const expect_master_near_reference = [&](char const* when) {
    auto const master = download(optimizer.master_weights(0), n);
    double worst = 0.0;
    for (std::size_t i = 0; i < n; ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(master[i]) - h.master[i]));
    EXPECT_LT(worst, 2e-6) << when;
  };

  step.replay(*stream_);
  reference_step(1);
  EXPECT_NEAR(optimizer.last_gradient_norm(*stream_), norm, 1e-5 * norm);
  expect_master_near_reference("after step 1");
  auto const master_after_1 = download(optimizer.master_weights(0), n);
  auto const weight_after_1 = download(weight, n);

  set_finding(0U);  // the scaler found an inf
  step.replay(*stream_);
  EXPECT_EQ(optimizer.steps_taken(*stream_), 1);
  EXPECT_EQ(bits_of(download(optimizer.master_weights(0), n)), bits_of(master_after_1));
  EXPECT_EQ(download(weight, n), weight_after_1);

  set_finding(1U);
  auto with_nan = grad_bits;
  with_nan[n / 2] = 0x7FC0;  // a bf16 NaN: the norm is NaN, so clipping cannot scale the step
  overwrite(gradient, with_nan);
  step.replay(*stream_);
  EXPECT_EQ(optimizer.steps_taken(*stream_), 1);
  EXPECT_TRUE(std::isnan(optimizer.last_gradient_norm(*stream_)));
  EXPECT_EQ(download(weight, n), weight_after_1);

  overwrite(gradient, grad_bits);
  step.replay(*stream_);
  reference_step(2);
  EXPECT_EQ(optimizer.steps_taken(*stream_), 2);
  expect_master_near_reference("after step 2");
}

// Stochastic rounding: an eager optimizer and a replayed one with the same seed write the same
// bits every step, the reference's bits for the device's master weights; the pattern changes
// from step to step and with the seed.
TEST_F(mixed_adamw_test, stochastic_rounding_replays_deterministically_for_a_seed) {
  std::mt19937 rng{23};
  std::vector<std::size_t> const sizes{1001, 20000};
  gt::mixed_adamw_options options;
  options.stochastic_rounding = true;
  options.seed = 0xC0FFEEULL;
  gt::lr_schedule schedule;
  schedule.base = 1e-3F;
  std::vector<gt::parameter> eager_parameters;
  std::vector<gt::parameter> graphed_parameters;
  std::vector<gt::parameter> other_seed_parameters;
  for (std::size_t n : sizes) {
    auto const w = random_bf16(n, 1.0F, rng);
    auto const g = random_bf16(n, 1.0F, rng);
    auto* const grad = upload(g);
    eager_parameters.push_back(
        {{upload(w), gs::dtype::bfloat16, n}, {grad, gs::dtype::bfloat16, n}, 0});
    graphed_parameters.push_back(
        {{upload(w), gs::dtype::bfloat16, n}, {grad, gs::dtype::bfloat16, n}, 0});
    other_seed_parameters.push_back(
        {{upload(w), gs::dtype::bfloat16, n}, {grad, gs::dtype::bfloat16, n}, 0});
  }
  std::vector<gt::parameter_group> const groups{{0.1F, 1.0F}};
  gt::mixed_precision_adamw eager{eager_parameters, groups, options, schedule, {}, *stream_};
  gt::mixed_precision_adamw graphed{graphed_parameters, groups, options, schedule, {}, *stream_};
  gt::mixed_adamw_options other_seed_options = options;
  other_seed_options.seed += 1;
  gt::mixed_precision_adamw other_seed{
      other_seed_parameters, groups, other_seed_options, schedule, {}, *stream_};
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, [&] { graphed.step(*stream_); });
  std::vector<std::uint16_t> previous_rounding;
  for (std::int64_t s = 1; s <= 3; ++s) {
    eager.step(*stream_);
    step.replay(*stream_);
    other_seed.step(*stream_);
    std::uint64_t first_element = 0;
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      auto const* value = static_cast<std::uint16_t const*>(graphed_parameters[t].value.data());
      auto const got = download(value, sizes[t]);
      EXPECT_EQ(
          download(static_cast<std::uint16_t const*>(eager_parameters[t].value.data()), sizes[t]),
          got)
          << "step " << s << ", tensor " << t;
      auto const master = download(graphed.master_weights(t), sizes[t]);
      EXPECT_EQ(got, gt::reference::to_bfloat16(master, true, options.seed, s, first_element))
          << "step " << s << ", tensor " << t;
      auto const other = download(
          static_cast<std::uint16_t const*>(other_seed_parameters[t].value.data()), sizes[t]);
      EXPECT_NE(other, got) << "another seed rounds otherwise";
      first_element += sizes[t];
    }
    // The same master weights rounded with the bits of the previous step differ: every step
    // draws new bits.
    auto const master = download(graphed.master_weights(1), sizes[1]);
    auto const now = gt::reference::to_bfloat16(master, true, options.seed, s, sizes[0]);
    auto const earlier = gt::reference::to_bfloat16(master, true, options.seed, s - 1, sizes[0]);
    EXPECT_NE(now, earlier);
  }
}

TEST_F(mixed_adamw_test, bad_arguments_are_usage_errors_that_say_what_to_fix) {
  auto* data = upload(std::vector<std::uint16_t>(16, 0x3F80));
  gt::mixed_adamw_options stochastic;
  stochastic.stochastic_rounding = true;
  auto const refused = [&](std::vector<gt::parameter> const& parameters,
                           std::vector<gt::parameter_group> const& groups,
                           gt::mixed_adamw_options const& options) {
    return message_of(
        [&] { gt::mixed_precision_adamw{parameters, groups, options, {}, {}, *stream_}; });
  };
  EXPECT_NE(refused({}, {{}}, {}).find("no parameter"), std::string::npos);
  EXPECT_NE(
      refused({{{data, gs::dtype::bfloat16, 16}, {nullptr, gs::dtype::bfloat16, 16}, 0}}, {{}}, {})
          .find("mixed_precision_adamw: parameter 0 gradient is a null pointer"),
      std::string::npos);
  EXPECT_NE(refused({{{data, gs::dtype::float16, 16}, {data, gs::dtype::float16, 16}, 0}}, {{}},
                    stochastic)
                .find("stochastic rounding is implemented for bfloat16"),
            std::string::npos);
  EXPECT_NE(
      refused({{{data, gs::dtype::bfloat16, 16}, {data, gs::dtype::bfloat16, 16}, 1}}, {{}}, {})
          .find("tensor 0 names group 1"),
      std::string::npos);
  EXPECT_NE(refused({{{data, gs::dtype::bfloat16, 0}, {data, gs::dtype::bfloat16, 0}, 0}}, {{}}, {})
                .find("parameter 0 value holds no element"),
            std::string::npos);
  gt::mixed_adamw_options bad;
  bad.max_grad_norm = -1.0F;
  EXPECT_NE(
      refused({{{data, gs::dtype::bfloat16, 16}, {data, gs::dtype::bfloat16, 16}, 0}}, {{}}, bad)
          .find("max_grad_norm"),
      std::string::npos);
  gt::mixed_precision_adamw optimizer{
      {{{data, gs::dtype::bfloat16, 16}, {data, gs::dtype::bfloat16, 16}, 0}},
      {{}},
      {},
      {},
      {},
      *stream_};
  EXPECT_NE(message_of([&] { (void)optimizer.master_weights(1); }).find("tensor 1 does not exist"),
            std::string::npos);
  gs::graphs::graph_exec g;
  std::string inside;
  std::string schedule_inside;
  gs::graphs::capture(g, *stream_, [&] {
    inside =
        refused({{{data, gs::dtype::bfloat16, 16}, {data, gs::dtype::bfloat16, 16}, 0}}, {{}}, {});
    schedule_inside = message_of([&] { optimizer.set_schedule({}, *stream_); });
    optimizer.step(*stream_);
  });
  EXPECT_NE(inside.find("construct it before the capture"), std::string::npos) << inside;
  EXPECT_NE(schedule_inside.find("call it between replays"), std::string::npos) << schedule_inside;
}

// With fp32 gradients a loss_scaler checks them, the step unscales them as it reads and the
// scaler's finding drives the skip, all in one captured step (check, step, update): a step with
// an inf gradient leaves the weights and the step count alone while the scale backs off, and
// the next step is the reference's second, under a schedule replaced between replays.
TEST_F(mixed_adamw_test, a_loss_scalers_flag_skips_the_step_inside_the_graph) {
  std::mt19937 rng{24};
  std::size_t const n = 3000;
  host_tensor h{as_floats(random_bf16(n, 1.0F, rng)), as_floats(random_bf16(n, 1.0F, rng)),
                std::vector<float>(n, 0.0F), std::vector<float>(n, 0.0F)};
  float* weight = upload(h.master);
  float* gradient = upload(std::vector<float>(n, 0.0F));
  gt::loss_scaler_options scale_options;
  scale_options.init_scale = 1024.0F;
  gt::loss_scaler const scaler{{{gradient, gs::dtype::float32, n}}, scale_options, *stream_};
  gt::mixed_adamw_options const options;
  gt::lr_schedule schedule;
  schedule.base = 1e-2F;
  gt::mixed_precision_adamw optimizer{
      {{{weight, gs::dtype::float32, n}, {gradient, gs::dtype::float32, n}, 0}},
      {{0.01F, 1.0F}},
      options,
      schedule,
      &scaler,
      *stream_};
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, [&] {
    scaler.check(*stream_);
    optimizer.step(*stream_);
    scaler.update(*stream_);
  });
  auto const scaled = [&](float scale) {  // exact: the scales are powers of two
    std::vector<float> g(n);
    for (std::size_t i = 0; i < n; ++i) g[i] = h.gradient[i] * scale;
    return g;
  };
  overwrite(gradient, scaled(1024.0F));
  step.replay(*stream_);
  gt::reference::mixed_adamw_step(h.master, h.m, h.v, h.gradient, options, {0.01F, 1.0F},
                                  scalars(options, schedule, 1, 1.0F, 1.0F));
  EXPECT_EQ(bits_of(download(weight, n)), bits_of(h.master));

  auto overflowed = scaled(1024.0F);
  overflowed[7] = std::numeric_limits<float>::infinity();
  overwrite(gradient, overflowed);
  step.replay(*stream_);
  EXPECT_EQ(optimizer.steps_taken(*stream_), 1);
  EXPECT_EQ(scaler.read(*stream_).scale, 512.0F);
  EXPECT_EQ(bits_of(download(weight, n)), bits_of(h.master));

  schedule.base = 5e-3F;
  optimizer.set_schedule(schedule, *stream_);
  overwrite(gradient, scaled(512.0F));
  step.replay(*stream_);
  gt::reference::mixed_adamw_step(h.master, h.m, h.v, h.gradient, options, {0.01F, 1.0F},
                                  scalars(options, schedule, 2, 1.0F, 1.0F));
  EXPECT_EQ(optimizer.steps_taken(*stream_), 2);
  EXPECT_EQ(bits_of(download(weight, n)), bits_of(h.master));
  EXPECT_EQ(bits_of(download(optimizer.master_weights(0), n)), bits_of(h.master));
}

// fp16 or bf16 weights and gradients trained in one captured step: backward (gradients scaled
// by the device scale, rounded to T), `loss_scaler::check`, the optimizer step unscaling them in
// fp32 as it reads them, the scale's update. A step whose scaled gradients overflow leaves the
// master weights, the model weights and the step count alone and backs the scale off by the
// backoff factor; the finite steps before and after are the reference's, bit for bit, and
// growth after two finite steps changes the scale that the next step unscales by.
template <typename T>
void mixed_adamw_test::checked_half_gradients_skip_overflowing_steps(gs::dtype type,
                                                                     float overflowing) {
  std::mt19937 rng{25};
  int const n = 3000;
  auto const count = static_cast<std::size_t>(n);
  std::uniform_int_distribution<int> numerator{-256, 256};
  std::vector<float> truth(count);  // k / 256: times any scale used here, exact in fp16 and bf16
  for (float& g : truth) g = static_cast<float>(numerator(rng)) / 256.0F;
  host_tensor h{as_floats(random_bf16(count, 1.0F, rng)), truth, std::vector<float>(count, 0.0F),
                std::vector<float>(count, 0.0F)};
  std::vector<T> weights(count);
  for (std::size_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<T, __half>) {
      weights[i] = __float2half(h.master[i]);
      h.master[i] = __half2float(weights[i]);  // the host keeps the values fp16 holds
    } else {
      weights[i] = __float2bfloat16(h.master[i]);  // exact: they are bf16 values
    }
  }
  T* weight = upload(weights);
  T* gradient = upload(std::vector<T>(count));
  float* input = upload(truth);
  gt::loss_scaler_options scale_options;
  scale_options.init_scale = 1024.0F;
  scale_options.backoff_factor = 0.25F;
  scale_options.growth_interval = 2;
  gt::loss_scaler const scaler{{{gradient, type, count}}, scale_options, *stream_};
  gt::mixed_adamw_options const options;
  gt::parameter_group const group{0.01F, 1.0F};
  gt::lr_schedule schedule;
  schedule.base = 1e-2F;
  gt::mixed_precision_adamw optimizer{{{{weight, type, count}, {gradient, type, count}, 0}},
                                      {group},
                                      options,
                                      schedule,
                                      &scaler,
                                      *stream_};
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, [&] {
    scaled_backward_kernel<<<(n + 255) / 256, 256, 0, stream_->get()>>>(
        gradient, type == gs::dtype::bfloat16, input, scaler.scale(), n);
    scaler.check(*stream_);
    optimizer.step(*stream_);
    scaler.update(*stream_);
  });
  auto const model_bits = [&] {
    auto const got = download(weight, count);
    std::vector<std::uint16_t> bits(count);
    std::memcpy(bits.data(), got.data(), sizeof(T) * count);
    return bits;
  };
  auto const rounded_master = [&] {
    std::vector<std::uint16_t> bits(count);
    for (std::size_t i = 0; i < count; ++i) {
      if constexpr (std::is_same_v<T, __half>) {
        __half const w = __float2half(h.master[i]);
        std::memcpy(&bits[i], &w, sizeof w);
      } else {
        __nv_bfloat16 const w = __float2bfloat16(h.master[i]);
        std::memcpy(&bits[i], &w, sizeof w);
      }
    }
    return bits;
  };
  auto const finite_step = [&](std::int64_t taken, float scale_after, char const* when) {
    step.replay(*stream_);
    gt::reference::mixed_adamw_step(h.master, h.m, h.v, h.gradient, options, group,
                                    scalars(options, schedule, taken, 1.0F, 1.0F));
    EXPECT_EQ(optimizer.steps_taken(*stream_), taken) << when;
    EXPECT_EQ(bits_of(download(optimizer.master_weights(0), count)), bits_of(h.master)) << when;
    EXPECT_EQ(model_bits(), rounded_master()) << when;
    gt::loss_scaler_state const state = scaler.read(*stream_);
    EXPECT_EQ(state.all_finite, 1U) << when;
    EXPECT_EQ(state.scale, scale_after) << when;
  };

  finite_step(1, 1024.0F, "step 1, scale 1024");
  auto const master_before = download(optimizer.master_weights(0), count);
  auto const model_before = model_bits();
  auto overflowed = truth;
  overflowed[7] = overflowing;  // times 1024: beyond the type's range, so the gradient is inf
  overwrite(input, overflowed);
  step.replay(*stream_);
  gt::loss_scaler_state const backed_off = scaler.read(*stream_);
  EXPECT_EQ(backed_off.all_finite, 0U);
  EXPECT_EQ(backed_off.scale, 1024.0F * scale_options.backoff_factor);
  EXPECT_EQ(backed_off.growth_tracker, 0);
  EXPECT_EQ(optimizer.steps_taken(*stream_), 1) << "the overflowing step is skipped";
  EXPECT_EQ(bits_of(download(optimizer.master_weights(0), count)), bits_of(master_before));
  EXPECT_EQ(model_bits(), model_before);

  overwrite(input, truth);
  finite_step(2, 256.0F, "step 2, scale 256");
  finite_step(3, 512.0F, "step 3, scale 256, grown after it");
  finite_step(4, 512.0F, "step 4, scale 512");
}

TEST_F(mixed_adamw_test, fp16_gradients_checked_by_a_loss_scaler_skip_overflowing_steps) {
  checked_half_gradients_skip_overflowing_steps<__half>(gs::dtype::float16, 100.0F);
}

TEST_F(mixed_adamw_test, bf16_gradients_checked_by_a_loss_scaler_skip_overflowing_steps) {
  checked_half_gradients_skip_overflowing_steps<__nv_bfloat16>(gs::dtype::bfloat16, 1e38F);
}

// Built from a parameter layout, the optimizer is the one built from the tensors the layout
// places: the same master weights, tensor by tensor, and the same weights after a step.
TEST_F(mixed_adamw_test, a_parameter_layout_places_each_tensor_as_an_explicit_list_would) {
  gs::parameter_layout layout{128};
  layout.add({"weight", {5, 9}, gs::dtype::bfloat16}, 0);
  layout.add({"bias", {9}, gs::dtype::bfloat16}, 1);
  std::mt19937 rng{11};
  std::size_t const elements = layout.buffer_bytes() / sizeof(std::uint16_t);
  std::vector<std::uint16_t> const weights = random_bf16(elements, 1.0F, rng);
  std::vector<std::uint16_t> const gradients = random_bf16(elements, 0.1F, rng);
  gs::memory::parameter_buffer weight_buffer{layout, *stream_};
  gs::memory::parameter_buffer gradient_buffer{layout, *stream_};
  auto* by_layout = static_cast<std::uint16_t*>(weight_buffer.data());
  auto* gradient = static_cast<std::uint16_t*>(gradient_buffer.data());
  stream_->synchronize();  // the buffers are the stream's until then
  overwrite(by_layout, weights);
  overwrite(gradient, gradients);
  auto* by_list = upload(weights);
  std::vector<gt::parameter_group> const groups{{0.1F, 1.0F}, {0.0F, 0.5F}};
  gt::lr_schedule schedule;
  schedule.base = 1e-2F;
  gt::mixed_precision_adamw from_layout{weight_buffer, gradient_buffer, groups, {},
                                        schedule,      {},              *stream_};
  std::vector<gt::parameter> list;
  for (gs::parameter_slot const& slot : layout.slots()) {
    std::size_t const first = slot.offset;  // elements of bfloat16
    list.push_back({{by_list + first, slot.spec.type(), slot.spec.count()},
                    {gradient + first, slot.spec.type(), slot.spec.count()},
                    slot.group});
  }
  gt::mixed_precision_adamw from_list{list, groups, {}, schedule, {}, *stream_};
  for (std::size_t t = 0; t < layout.size(); ++t) {
    std::size_t const count = layout.at(t).spec.count();
    EXPECT_EQ(bits_of(download(from_layout.master_weights(t), count)),
              bits_of(download(from_list.master_weights(t), count)))
        << layout.at(t).spec.name();
  }
  from_layout.step(*stream_);
  from_list.step(*stream_);
  EXPECT_EQ(download(by_layout, elements), download(by_list, elements));
  EXPECT_NE(download(by_layout, elements), weights) << "the step changed nothing";

  gs::memory::parameter_buffer moved_from{layout, *stream_};
  gs::memory::parameter_buffer const taken{std::move(moved_from)};
  EXPECT_NE(message_of([&] {
              // NOLINTNEXTLINE(bugprone-use-after-move): a moved-from buffer, refused by name
              gt::mixed_precision_adamw{moved_from, gradient_buffer, groups, {}, {}, {}, *stream_};
            }).find("mixed_precision_adamw: the weights' or the gradients' parameter_buffer was "
                    "moved from"),
            std::string::npos);
}
