// Dynamic loss scaling on a device, captured whole with the step it guards: PyTorch's graphed
// GradScaler test (test_graph_grad_scaling, test/test_cuda.py) with the check, the optimizer
// step that unscales as it reads and skips on the scaler's finding, and the scale's update
// inside the graph; and what the scaler refuses.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/loss_scaler.hpp>
#include <graphstep/train/loss_scaler_options.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/sgd.hpp>
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

// The same backward with the gradient stored in fp16, as a model whose gradients are fp16.
__global__ void scaled_half_backward_kernel(__half* gradient, float const* input,
                                            float const* scale, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) gradient[i] = __float2half(input[i] * *scale);
}

template <typename T>
std::uint16_t bits_of(T x) {
  static_assert(sizeof(T) == sizeof(std::uint16_t));
  std::uint16_t bits{};
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
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
  template <typename T>
  T* upload(std::vector<T> const& host) {
    auto* device = static_cast<T*>(pool_->allocate(sizeof(T) * host.size(), *stream_));
    blocks_.push_back(device);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device, host.data(), sizeof(T) * host.size(),
                                       cudaMemcpyHostToDevice, stream_->get()));
    stream_->synchronize();
    return device;
  }
  template <typename T>
  std::vector<std::uint16_t> download_bits(T const* device, std::size_t n) {
    std::vector<T> host(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), device, sizeof(T) * n, cudaMemcpyDeviceToHost,
                                       stream_->get()));
    stream_->synchronize();
    std::vector<std::uint16_t> bits(n);
    for (std::size_t i = 0; i < n; ++i) bits[i] = bits_of(host[i]);
    return bits;
  }
  std::optional<gs::cuda::stream> stream_;
  std::optional<gs::memory::memory_pool> pool_;
  std::vector<void*> blocks_;
};

}  // namespace

// GradScaler(init_scale=4) with its other defaults over inputs 5, 20000, 5, 40000: scales 4, 2,
// 2, 1 and growth trackers 1, 0, 1, 0 after each update, as in PyTorch. The gradients stay
// scaled and read what PyTorch's test reads before its unscale (20, inf, 10, inf); the SGD step
// given the scaler divides them by the scale as it reads them (5 on both finite steps) and runs
// only on the finite steps. Its learning rate, 1/8, is exact in binary: w - lr * g rounds alike
// whether or not nvcc fuses it into one FMA (0.1 would not: 0.5 - 0.1f * 5 gives -7.45e-09
// fused and 0 unfused).
TEST_F(loss_scaler_test, pytorchs_graphed_grad_scaling_sequence) {
  int const n = 100;
  auto const count = static_cast<std::size_t>(n);
  float* weight = fill(count, 1.0F);
  float* gradient = fill(count, 0.0F);
  float* input = fill(count, 1.0F);
  gt::loss_scaler_options options;
  options.init_scale = 4.0F;
  gt::loss_scaler scaler{{{gradient, gs::dtype::float32, count}}, options, *stream_, *pool_};
  gt::lr_schedule schedule;
  schedule.base = 0.125F;
  gt::sgd optimizer{{{{weight, gs::dtype::float32, count}, {gradient, gs::dtype::float32, count}}},
                    {},
                    schedule,
                    &scaler,
                    *stream_,
                    *pool_};
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    scaled_backward_kernel<<<1, 128, 0, stream_->get()>>>(gradient, input, scaler.scale(), n);
    scaler.check(*stream_);
    optimizer.step(*stream_);
    scaler.update(*stream_);
  });
  float const inf = std::numeric_limits<float>::infinity();
  std::vector<float> const inputs{5.0F, 20000.0F, 5.0F, 40000.0F};
  std::vector<float> const scales{4.0F, 2.0F, 2.0F, 1.0F};
  std::vector<std::int32_t> const trackers{1, 0, 1, 0};
  std::vector<float> const gradients{20.0F, inf, 10.0F, inf};
  std::vector<float> const weights{0.375F, 0.375F, -0.25F, -0.25F};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<float> const batch(count, inputs[i]);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(input, batch.data(), sizeof(float) * count,
                                       cudaMemcpyHostToDevice, stream_->get()));
    step.replay(*stream_);
    gt::loss_scaler_state const state = scaler.read(*stream_);
    EXPECT_EQ(state.scale, scales[i]) << "step " << i;
    EXPECT_EQ(state.inv_scale, 1.0F / scales[i]) << "step " << i;
    EXPECT_EQ(state.growth_tracker, trackers[i]) << "step " << i;
    EXPECT_EQ(state.all_finite, std::isinf(gradients[i]) ? 0U : 1U) << "step " << i;
    EXPECT_EQ(download(gradient, count), std::vector<float>(count, gradients[i])) << "step " << i;
    EXPECT_EQ(download(weight, count), std::vector<float>(count, weights[i])) << "step " << i;
  }
  EXPECT_EQ(optimizer.steps_taken(*stream_), 2);
}

// The same sequence with fp16 gradients that `check` leaves scaled: they read what PyTorch's
// test reads before its unscale (20, inf, 10, inf), and the flag and the scale follow them.
// A scaler restored from a checkpoint scales, backs off and grows as the saved one: the state
// saved after a back-off comes back over the state a later step left, and is refused from a
// value of another size or with a scale that is not positive and finite.
TEST_F(loss_scaler_test, a_restored_scaler_goes_on_from_the_saved_state) {
  int const n = 64;
  auto const count = static_cast<std::size_t>(n);
  float* gradient = fill(count, 0.0F);
  float* input = fill(count, 1.0F);
  gt::loss_scaler_options options;
  options.init_scale = 8.0F;
  options.growth_interval = 2;
  gt::loss_scaler scaler{{{gradient, gs::dtype::float32, count}}, options, *stream_, *pool_};
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    scaled_backward_kernel<<<1, 128, 0, stream_->get()>>>(gradient, input, scaler.scale(), n);
    scaler.check(*stream_);
    scaler.update(*stream_);
  });
  auto const run = [&](float value) {
    std::vector<float> const batch(count, value);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(input, batch.data(), sizeof(float) * count,
                                       cudaMemcpyHostToDevice, stream_->get()));
    step.replay(*stream_);
    return scaler.read(*stream_);
  };
  float const overflowing = std::numeric_limits<float>::max();
  run(overflowing);  // backs off to 4
  gt::checkpoint saved;
  scaler.save_to(saved, "scaler", *stream_);
  gt::loss_scaler_state const at_save = scaler.read(*stream_);
  ASSERT_EQ(at_save.scale, 4.0F);
  run(1.0F);
  auto const went_on = run(1.0F);  // grew to 8 after two finite steps
  ASSERT_EQ(went_on.scale, 8.0F);

  scaler.restore_from(saved, "scaler", *stream_);
  auto const restored = scaler.read(*stream_);
  EXPECT_EQ(restored.scale, at_save.scale);
  EXPECT_EQ(restored.growth_tracker, at_save.growth_tracker);
  EXPECT_EQ(restored.all_finite, at_save.all_finite);
  run(1.0F);
  EXPECT_EQ(run(1.0F).scale, went_on.scale) << "the same steps from the same state";

  gt::checkpoint wrong;
  wrong.add_value("scaler", 1.0F);
  gt::loss_scaler_state broken = at_save;
  broken.scale = -1.0F;
  wrong.add_value("broken", broken);
  EXPECT_THROW(scaler.restore_from(wrong, "scaler", *stream_), gs::usage_error);
  std::string const said = message_of([&] { scaler.restore_from(wrong, "broken", *stream_); });
  EXPECT_NE(said.find("not positive and finite"), std::string::npos) << said;
}

TEST_F(loss_scaler_test, pytorchs_graphed_grad_scaling_sequence_with_checked_fp16_gradients) {
  int const n = 100;
  auto const count = static_cast<std::size_t>(n);
  auto* gradient = upload(std::vector<__half>(count, __float2half(0.0F)));
  float* input = fill(count, 1.0F);
  gt::loss_scaler_options options;
  options.init_scale = 4.0F;
  gt::loss_scaler scaler{{{gradient, gs::dtype::float16, count}}, options, *stream_, *pool_};
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, *pool_, [&] {
    scaled_half_backward_kernel<<<1, 128, 0, stream_->get()>>>(gradient, input, scaler.scale(), n);
    scaler.check(*stream_);
    scaler.update(*stream_);
  });
  float const inf = std::numeric_limits<float>::infinity();
  std::vector<float> const inputs{5.0F, 20000.0F, 5.0F, 40000.0F};
  std::vector<float> const scales{4.0F, 2.0F, 2.0F, 1.0F};
  std::vector<std::int32_t> const trackers{1, 0, 1, 0};
  std::vector<float> const gradients{20.0F, inf, 10.0F, inf};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<float> const batch(count, inputs[i]);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(input, batch.data(), sizeof(float) * count,
                                       cudaMemcpyHostToDevice, stream_->get()));
    step.replay(*stream_);
    gt::loss_scaler_state const state = scaler.read(*stream_);
    EXPECT_EQ(state.scale, scales[i]) << "step " << i;
    EXPECT_EQ(state.growth_tracker, trackers[i]) << "step " << i;
    EXPECT_EQ(state.all_finite, std::isinf(gradients[i]) ? 0U : 1U) << "step " << i;
    EXPECT_EQ(download_bits(gradient, count),
              std::vector<std::uint16_t>(count, bits_of(__float2half(gradients[i]))))
        << "step " << i;
  }
}

// fp32, fp16 and bf16 gradients in one scaler, the fp16 one across chunk boundaries. `check`
// finds an inf in fp16 and a NaN in bf16 and changes no bit.
TEST_F(loss_scaler_test, half_gradients_are_checked_as_they_are) {
  std::size_t const n16 = 70001;
  std::vector<__half> half_host(n16);
  for (std::size_t i = 0; i < n16; ++i) {
    half_host[i] = __float2half(static_cast<float>(static_cast<int>(i % 511) - 255) * 4.0F);
  }
  half_host[n16 - 1] = __float2half(1.0F / 1024.0F);
  std::vector<__nv_bfloat16> bf16_host{__float2bfloat16(-256.0F), __float2bfloat16(3.0F),
                                       __float2bfloat16(0.5F), __float2bfloat16(1.0F / 1024.0F),
                                       __float2bfloat16(65536.0F)};
  auto* half_data = upload(half_host);
  auto* bf16_data = upload(bf16_host);
  float* fp32_data = fill(3, 96.0F);
  gt::loss_scaler_options options;
  options.init_scale = 65536.0F;
  gt::loss_scaler scaler{{{fp32_data, gs::dtype::float32, 3},
                          {half_data, gs::dtype::float16, n16},
                          {bf16_data, gs::dtype::bfloat16, bf16_host.size()}},
                         options,
                         *stream_,
                         *pool_};
  auto const half_bits = [&] { return download_bits(half_data, n16); };
  auto const bf16_bits = [&] { return download_bits(bf16_data, bf16_host.size()); };
  std::vector<std::uint16_t> half_before;
  for (__half h : half_host) half_before.push_back(bits_of(h));
  std::vector<std::uint16_t> bf16_before;
  for (__nv_bfloat16 b : bf16_host) bf16_before.push_back(bits_of(b));

  __half const half_inf = __float2half(std::numeric_limits<float>::infinity());
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(half_data + 65536, &half_inf, sizeof half_inf,
                                     cudaMemcpyHostToDevice, stream_->get()));
  scaler.check(*stream_);
  EXPECT_EQ(scaler.read(*stream_).all_finite, 0U) << "an fp16 inf in the second chunk";
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(half_data + 65536, &half_host[65536], sizeof(__half),
                                     cudaMemcpyHostToDevice, stream_->get()));
  scaler.check(*stream_);
  EXPECT_EQ(scaler.read(*stream_).all_finite, 1U);
  __nv_bfloat16 const bf16_nan = __float2bfloat16(std::numeric_limits<float>::quiet_NaN());
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(bf16_data + 2, &bf16_nan, sizeof bf16_nan,
                                     cudaMemcpyHostToDevice, stream_->get()));
  scaler.check(*stream_);
  EXPECT_EQ(scaler.read(*stream_).all_finite, 0U) << "a bf16 NaN";
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(bf16_data + 2, &bf16_host[2], sizeof(__nv_bfloat16),
                                     cudaMemcpyHostToDevice, stream_->get()));
  scaler.check(*stream_);
  EXPECT_EQ(scaler.read(*stream_).all_finite, 1U);
  EXPECT_EQ(half_bits(), half_before) << "check writes no gradient";
  EXPECT_EQ(bf16_bits(), bf16_before);
  EXPECT_EQ(download(fp32_data, 3), std::vector<float>(3, 96.0F));
}

// One launch checks every tensor, across chunk boundaries; a NaN in the last tensor clears the
// flag, and the next check of finite gradients sets it again. No gradient is written.
TEST_F(loss_scaler_test, one_check_covers_every_tensor_and_finds_a_nan) {
  std::vector<std::size_t> const sizes{3, 70000, 130001};
  std::vector<float*> tensors;
  std::vector<gs::device_span> gradients;
  for (std::size_t size : sizes) {
    tensors.push_back(fill(size, 8.0F));
    gradients.push_back({tensors.back(), gs::dtype::float32, size});
  }
  gt::loss_scaler_options options;
  options.init_scale = 2.0F;
  gt::loss_scaler const scaler{gradients, options, *stream_, *pool_};
  float const nan = std::numeric_limits<float>::quiet_NaN();
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(tensors[2] + 130000, &nan, sizeof nan, cudaMemcpyHostToDevice,
                                     stream_->get()));
  scaler.check(*stream_);
  EXPECT_EQ(scaler.read(*stream_).all_finite, 0U);
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    std::vector<float> const got = download(tensors[t], sizes[t]);
    for (std::size_t i = 0; i + 1 < sizes[t]; i += 997) ASSERT_EQ(got[i], 8.0F) << t << ", " << i;
    if (t < 2) {
      EXPECT_EQ(got.back(), 8.0F);
    }
  }
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(tensors[2] + 130000, 0, sizeof(float), stream_->get()));
  scaler.check(*stream_);
  EXPECT_EQ(scaler.read(*stream_).all_finite, 1U);
  scaler.update(*stream_);
  gt::loss_scaler_state const state = scaler.read(*stream_);
  EXPECT_EQ(state.scale, 2.0F);
  EXPECT_EQ(state.growth_tracker, 1);
}

TEST_F(loss_scaler_test, bad_arguments_are_usage_errors_that_say_what_to_fix) {
  float* gradient = fill(16, 1.0F);
  EXPECT_NE(message_of([&] {
              gt::loss_scaler{{}, {}, *stream_};
            }).find("no gradient"),
            std::string::npos);
  EXPECT_NE(
      message_of([&] {
        gt::loss_scaler{
            {{gradient, gs::dtype::float32, 16}, {nullptr, gs::dtype::float32, 16}}, {}, *stream_};
      }).find("gradient 1 is a null pointer"),
      std::string::npos);
  EXPECT_THROW((gt::loss_scaler{{{gradient, gs::dtype::float32, 0}}, {}, *stream_}),
               gs::usage_error);
  EXPECT_NE(message_of([&] {
              gt::loss_scaler{{{gradient, static_cast<gs::dtype>(7), 16}}, {}, *stream_};
            }).find("gradient 0 has an unknown dtype (7); use float32, float16, bfloat16"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              gt::loss_scaler{{{gradient, gs::dtype::int32, 16}}, {}, *stream_};
            }).find("loss_scaler: gradient 0 is int32; it takes float32, float16 or bfloat16"),
            std::string::npos);
  auto* const bytes = reinterpret_cast<unsigned char*>(gradient);
  EXPECT_NE(message_of([&] {
              gt::loss_scaler{{{bytes + 2, gs::dtype::float32, 8}}, {}, *stream_};
            }).find("gradient 0 is not aligned to the 4 bytes of its dtype float32"),
            std::string::npos);
  EXPECT_NE(
      message_of([&] {
        gt::loss_scaler{
            {{gradient, gs::dtype::float32, 16}, {bytes + 1, gs::dtype::float16, 8}}, {}, *stream_};
      }).find("gradient 1 is not aligned to the 2 bytes of its dtype float16"),
      std::string::npos);
  gt::loss_scaler_options bad;
  bad.backoff_factor = 2.0F;
  EXPECT_NE(message_of([&] {
              gt::loss_scaler{{{gradient, gs::dtype::float32, 16}}, bad, *stream_};
            }).find("backoff_factor"),
            std::string::npos);
  gt::loss_scaler const scaler{{{gradient, gs::dtype::float32, 16}}, {}, *stream_, *pool_};
  gs::graphs::graph_exec g;
  EXPECT_NE(message_of([&] {
              gs::graphs::capture(g, *stream_, *pool_, [&] {
                gt::loss_scaler{{{gradient, gs::dtype::float32, 16}}, {}, *stream_};
              });
            }).find("construct it before the capture"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              gs::graphs::capture(g, *stream_, *pool_,
                                  [&] { static_cast<void>(scaler.read(*stream_)); });
            }).find("read the state after the replay"),
            std::string::npos);
}

// check_finite, the scaler's finding for one tensor without a scale: an inf or NaN of each
// dtype clears the flag wherever it lies, finite values (65504, fp16's largest) set it, and an
// empty span sets it.
TEST_F(loss_scaler_test, check_finite_finds_an_inf_or_nan_of_each_dtype) {
  auto* flag = static_cast<unsigned int*>(pool_->allocate(sizeof(unsigned int), *stream_));
  blocks_.push_back(flag);
  auto const finding = [&](gs::device_span data) {
    gt::check_finite(data, flag, *stream_);
    unsigned int host = 7U;
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(&host, flag, sizeof host, cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
    return host;
  };
  float const inf = std::numeric_limits<float>::infinity();
  float const nan = std::numeric_limits<float>::quiet_NaN();
  std::size_t const n = 300001;  // past one grid of the check's 4096 blocks of 256
  float* fp32 = fill(n, 1.5F);
  EXPECT_EQ(finding({fp32, gs::dtype::float32, n}), 1U);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(fp32 + n - 1, &nan, sizeof nan, cudaMemcpyHostToDevice, stream_->get()));
  EXPECT_EQ(finding({fp32, gs::dtype::float32, n}), 0U) << "a NaN in the last element";
  EXPECT_EQ(finding({fp32, gs::dtype::float32, n - 1}), 1U) << "the NaN lies past the span";

  std::vector<__half> half_host(1000, __float2half(65504.0F));
  auto* half = upload(half_host);
  EXPECT_EQ(finding({half, gs::dtype::float16, half_host.size()}), 1U);
  __half const half_inf = __float2half(inf);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(half + 500, &half_inf, sizeof half_inf, cudaMemcpyHostToDevice,
                                     stream_->get()));
  EXPECT_EQ(finding({half, gs::dtype::float16, half_host.size()}), 0U) << "an fp16 inf";

  std::vector<__nv_bfloat16> bf16_host(1000, __float2bfloat16(3.0e38F));
  auto* bf16 = upload(bf16_host);
  EXPECT_EQ(finding({bf16, gs::dtype::bfloat16, bf16_host.size()}), 1U);
  __nv_bfloat16 const bf16_nan = __float2bfloat16(nan);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(bf16, &bf16_nan, sizeof bf16_nan, cudaMemcpyHostToDevice, stream_->get()));
  EXPECT_EQ(finding({bf16, gs::dtype::bfloat16, bf16_host.size()}), 0U) << "a bf16 NaN";

  EXPECT_EQ(finding({nullptr, gs::dtype::float32, 0}), 1U) << "nothing to find";
}

TEST_F(loss_scaler_test, check_finite_refuses_what_it_cannot_read) {
  float* data = fill(8, 1.0F);
  auto* flag = static_cast<unsigned int*>(pool_->allocate(sizeof(unsigned int), *stream_));
  blocks_.push_back(flag);
  EXPECT_NE(message_of([&] {
              gt::check_finite({data, gs::dtype::int32, 8}, flag, *stream_);
            }).find("check_finite: data is int32; it takes float32, float16 or bfloat16"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              gt::check_finite({data, gs::dtype::float32, 8}, nullptr, *stream_);
            }).find("check_finite: the all_finite flag is a null pointer"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              gt::check_finite({nullptr, gs::dtype::float32, 8}, flag, *stream_);
            }).find("check_finite: data"),
            std::string::npos);
  auto* const bytes = reinterpret_cast<unsigned char*>(data);
  EXPECT_NE(message_of([&] {
              gt::check_finite({bytes + 1, gs::dtype::bfloat16, 2}, flag, *stream_);
            }).find("not aligned"),
            std::string::npos);
}
