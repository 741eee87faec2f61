// Dynamic loss scaling on a device, captured whole with the step it guards: PyTorch's graphed
// GradScaler test (test_graph_grad_scaling, test/test_cuda.py) with the unscale, the skipped
// optimizer step and the scale's update inside the graph; and what the scaler refuses.

#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <graphstep/graphstep.hpp>
#include <graphstep/train/loss_scaler.hpp>
#include <limits>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;
namespace gt = graphstep::train;
using gs::testing::message_of;

namespace {

// The backward of loss = sum(half(weight) * input), scaled: each weight's gradient is its input
// times the scale, rounded to fp16 as autocast computes it (inf from 65520 on).
__global__ void scaled_backward_kernel(float* gradient, float const* input, float const* scale,
                                       int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) gradient[i] = __half2float(__float2half(input[i] * *scale));
}

class loss_scaler_test : public gs::testing::gpu_test {
 protected:
  void SetUp() override {
    gs::testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
    pool_.emplace();
  }
  void TearDown() override {
    for (void* block : blocks_) pool_->deallocate(block, *stream_);
  }
  float* fill(std::size_t n, float value) {
    auto* device = static_cast<float*>(pool_->allocate(sizeof(float) * n, *stream_));
    blocks_.push_back(device);
    std::vector<float> const host(n, value);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device, host.data(), sizeof(float) * n,
                                       cudaMemcpyHostToDevice, stream_->get()));
    stream_->synchronize();
    return device;
  }
  std::vector<float> download(float const* device, std::size_t n) {
    std::vector<float> host(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), device, sizeof(float) * n,
                                       cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
    return host;
  }
  std::optional<gs::cuda::stream> stream_;
  std::optional<gs::memory::memory_pool> pool_;
  std::vector<void*> blocks_;
};

}  // namespace

// GradScaler(init_scale=4) with its other defaults over inputs 5, 20000, 5, 40000: scales 4, 2,
// 2, 1 and growth trackers 1, 0, 1, 0 after each update, as in PyTorch. Its test reads the
// gradients before the unscale (20, inf, 10, inf); here the unscale is in the graph, so they
// read 5, inf, 5, inf, and the SGD step (lr 0.1) runs only on the finite steps.
TEST_F(loss_scaler_test, pytorchs_graphed_grad_scaling_sequence) {
  int const n = 100;
  auto const count = static_cast<std::size_t>(n);
  float* weight = fill(count, 1.0F);
  float* gradient = fill(count, 0.0F);
  float* input = fill(count, 1.0F);
  gt::loss_scale_options options;
  options.init_scale = 4.0F;
  gt::loss_scaler scaler{{{gradient, count}}, options, *stream_, *pool_};
  gt::lr_schedule schedule;
  schedule.base = 0.1F;
  gt::sgd optimizer{{{weight, gradient, count}}, {}, schedule, *stream_, *pool_};
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    scaled_backward_kernel<<<1, 128, 0, stream_->get()>>>(gradient, input, scaler.scale(), n);
    scaler.unscale(*stream_);
    gs::graphs::capture_if(*stream_, scaler.all_finite(),
                           [&](gs::cuda::stream_view s) { optimizer.step(s); });
    scaler.update(*stream_);
  });
  float const inf = std::numeric_limits<float>::infinity();
  std::vector<float> const inputs{5.0F, 20000.0F, 5.0F, 40000.0F};
  std::vector<float> const scales{4.0F, 2.0F, 2.0F, 1.0F};
  std::vector<std::int32_t> const trackers{1, 0, 1, 0};
  std::vector<float> const gradients{5.0F, inf, 5.0F, inf};
  std::vector<float> const weights{0.5F, 0.5F, 0.0F, 0.0F};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<float> const batch(count, inputs[i]);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(input, batch.data(), sizeof(float) * count,
                                       cudaMemcpyHostToDevice, stream_->get()));
    step.replay(*stream_);
    gt::loss_scale_state const state = scaler.read(*stream_);
    EXPECT_EQ(state.scale, scales[i]) << "step " << i;
    EXPECT_EQ(state.inv_scale, 1.0F / scales[i]) << "step " << i;
    EXPECT_EQ(state.growth_tracker, trackers[i]) << "step " << i;
    EXPECT_EQ(state.all_finite, std::isinf(gradients[i]) ? 0U : 1U) << "step " << i;
    EXPECT_EQ(download(gradient, count), std::vector<float>(count, gradients[i])) << "step " << i;
    EXPECT_EQ(download(weight, count), std::vector<float>(count, weights[i])) << "step " << i;
  }
  EXPECT_EQ(optimizer.steps_taken(*stream_), 2);
}

// One launch unscales every tensor, across chunk boundaries; a NaN in the last tensor clears
// the flag, and the next unscale of finite gradients sets it again.
TEST_F(loss_scaler_test, one_unscale_covers_every_tensor_and_finds_a_nan) {
  std::vector<std::size_t> const sizes{3, 70000, 130001};
  std::vector<float*> tensors;
  std::vector<gt::scaled_gradient> gradients;
  for (std::size_t size : sizes) {
    tensors.push_back(fill(size, 8.0F));
    gradients.push_back({tensors.back(), size});
  }
  gt::loss_scale_options options;
  options.init_scale = 2.0F;
  gt::loss_scaler const scaler{gradients, options, *stream_, *pool_};
  float const nan = std::numeric_limits<float>::quiet_NaN();
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(tensors[2] + 130000, &nan, sizeof nan, cudaMemcpyHostToDevice,
                                     stream_->get()));
  scaler.unscale(*stream_);
  EXPECT_EQ(scaler.read(*stream_).all_finite, 0U);
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    std::vector<float> const got = download(tensors[t], sizes[t]);
    for (std::size_t i = 0; i + 1 < sizes[t]; i += 997) ASSERT_EQ(got[i], 4.0F) << t << ", " << i;
    if (t < 2) {
      EXPECT_EQ(got.back(), 4.0F);
    }
  }
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(tensors[2] + 130000, 0, sizeof(float), stream_->get()));
  scaler.unscale(*stream_);
  EXPECT_EQ(scaler.read(*stream_).all_finite, 1U);
  scaler.update(*stream_);
  gt::loss_scale_state const state = scaler.read(*stream_);
  EXPECT_EQ(state.scale, 2.0F);
  EXPECT_EQ(state.growth_tracker, 1);
}

TEST_F(loss_scaler_test, bad_arguments_are_usage_errors_that_say_what_to_fix) {
  float* gradient = fill(16, 1.0F);
  EXPECT_NE(message_of([&] {
              gt::loss_scaler{{}, {}, *stream_};
            }).find("no gradient"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              gt::loss_scaler{{{gradient, 16}, {nullptr, 16}}, {}, *stream_};
            }).find("gradient 1 has a null pointer"),
            std::string::npos);
  EXPECT_THROW((gt::loss_scaler{{{gradient, 0}}, {}, *stream_}), gs::usage_error);
  gt::loss_scale_options bad;
  bad.backoff_factor = 2.0F;
  EXPECT_NE(message_of([&] {
              gt::loss_scaler{{{gradient, 16}}, bad, *stream_};
            }).find("backoff_factor"),
            std::string::npos);
  gt::loss_scaler const scaler{{{gradient, 16}}, {}, *stream_, *pool_};
  gs::graphs::graph_exec g;
  EXPECT_NE(message_of([&] {
              gs::graphs::capture(g, *stream_, *pool_, [&] {
                gt::loss_scaler{{{gradient, 16}}, {}, *stream_};
              });
            }).find("construct it before the capture"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              gs::graphs::capture(g, *stream_, *pool_,
                                  [&] { static_cast<void>(scaler.read(*stream_)); });
            }).find("read the state after the replay"),
            std::string::npos);
}
