// Optimizers and the loss on a device, against the fp64 references; a captured optimizer step
// follows a learning-rate schedule on every replay instead of freezing the capture's value.

#include <cmath>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/train/adam.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/loss_scaler.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/mse_loss.hpp>
#include <graphstep/train/optimizer.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/reference.hpp>
#include <graphstep/train/sgd.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;
namespace gt = graphstep::train;

namespace {

class train_test : public gs::testing::gpu_test {
 protected:
  void SetUp() override {
    gs::testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
  }
  float* upload(std::vector<double> const& values) {
    std::vector<float> host(values.begin(), values.end());
    void* device = nullptr;
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&device, sizeof(float) * host.size()));
    allocations_.push_back(device);
    graphstep::testing::copy_to_device(device, host.data(), sizeof(float) * host.size());
    return static_cast<float*>(device);
  }
  std::vector<double> download(float const* device, std::size_t n) {
    std::vector<float> host(n);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), device, sizeof(float) * n,
                                       cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
    return {host.begin(), host.end()};
  }
  void TearDown() override {
    for (void* p : allocations_) GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(p));
  }
  static std::vector<double> random(std::size_t n, std::mt19937& rng) {
    std::uniform_real_distribution<double> dist{-1.0, 1.0};
    std::vector<double> v(n);
    for (auto& x : v) x = static_cast<float>(dist(rng));  // representable in fp32
    return v;
  }
  static double max_relative_error(std::vector<double> const& got,
                                   std::vector<double> const& want) {
    double worst = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::fabs(got[i] - want[i]) / std::max(1.0, std::fabs(want[i])));
    }
    return worst;
  }
  std::optional<gs::cuda::stream> stream_;
  std::vector<void*> allocations_;
};

}  // namespace

TEST_F(train_test, sgd_with_momentum_matches_the_reference_over_many_tensors) {
  std::mt19937 rng{11};
  std::vector<std::size_t> const sizes{1, 7, 70000, 130001};  // several chunks, odd tails
  gt::sgd_options const options{0.9F, 0.1F, 0.01F, false};
  gt::lr_schedule schedule;
  schedule.base = 0.05F;
  std::vector<gt::parameter> params;
  std::vector<std::vector<double>> values;
  std::vector<std::vector<double>> grads;
  std::vector<std::vector<double>> buffers;
  for (std::size_t n : sizes) {
    values.push_back(random(n, rng));
    grads.push_back(random(n, rng));
    buffers.emplace_back(n, 0.0);
    params.push_back({{upload(values.back()), gs::dtype::float32, n},
                      {upload(grads.back()), gs::dtype::float32, n}});
  }
  gt::sgd optimizer{params, options, schedule, {}, *stream_};
  for (int step = 1; step <= 3; ++step) {
    optimizer.step(*stream_);
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      gt::reference::sgd_step(values[t], grads[t], buffers[t], options, schedule.base, step);
    }
  }
  EXPECT_EQ(optimizer.steps_taken(*stream_), 3);
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    EXPECT_LT(max_relative_error(
                  download(static_cast<float const*>(params[t].value.data()), sizes[t]), values[t]),
              1e-5)
        << "tensor " << t;
  }
}

TEST_F(train_test, adam_with_l2_decay_matches_the_reference) {
  std::mt19937 rng{12};
  std::size_t const n = 100003;
  gt::adam_options options;
  options.weight_decay = 0.01F;
  gt::lr_schedule schedule;
  schedule.base = 1e-3F;
  auto values = random(n, rng);
  auto const grads = random(n, rng);
  std::vector<double> m(n, 0.0);
  std::vector<double> v(n, 0.0);
  gt::parameter const p{{upload(values), gs::dtype::float32, n},
                        {upload(grads), gs::dtype::float32, n}};
  gt::adam optimizer{{p}, options, schedule, {}, *stream_};
  for (int step = 1; step <= 5; ++step) {
    optimizer.step(*stream_);
    gt::reference::adam_step(values, grads, m, v, options, schedule.base, step);
  }
  EXPECT_LT(max_relative_error(download(static_cast<float const*>(p.value.data()), n), values),
            1e-5);
}

// The loss scale and the found-finite flag of the optimizer's loss_scaler are read from device
// memory on every replay: a scale changed between replays is applied from the next one, and a
// step the scaler found not finite changes nothing, its step count included (so the schedule
// does not move either).
TEST_F(train_test, a_captured_step_follows_the_schedule_the_loss_scale_and_skips) {
  std::mt19937 rng{13};
  std::size_t const n = 4096;
  gt::lr_schedule schedule;
  schedule.shape = gt::lr_shape::warmup_cosine;
  schedule.base = 0.1F;
  schedule.warmup_steps = 3;
  schedule.total_steps = 10;
  auto values = random(n, rng);
  auto const grads = random(n, rng);
  std::vector<double> unused(n, 0.0);
  gt::parameter const p{{upload(values), gs::dtype::float32, n},
                        {upload(grads), gs::dtype::float32, n}};
  gt::loss_scaler_options unit_scale;
  unit_scale.init_scale = 1.0F;
  gt::loss_scaler scaler{{p.gradient}, unit_scale, *stream_};
  gt::sgd optimizer{{p}, {}, schedule, &scaler, *stream_};
  // The scaler's state as its check and update would leave it, set between replays.
  auto const set_scaler = [&](float scale, bool finite) {
    gt::checkpoint state;
    state.add_value("scaler", gt::loss_scaler_state{scale, 1.0F / scale, 0, finite ? 1U : 0U});
    scaler.restore_from(state, "scaler", *stream_);
  };
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, *stream_, [&] { optimizer.step(*stream_); });
  std::int64_t taken = 0;
  for (int i = 1; i <= 12; ++i) {
    bool const skipped = i == 4 || i == 9;
    set_scaler(i >= 6 ? 2.0F : 1.0F, !skipped);
    step.replay(*stream_);
    if (skipped) continue;
    ++taken;
    gt::reference::sgd_step(values, grads, unused, {}, schedule.at(taken), taken,
                            i >= 6 ? 0.5 : 1.0);
  }
  EXPECT_EQ(optimizer.steps_taken(*stream_), 10);
  EXPECT_LT(max_relative_error(download(static_cast<float const*>(p.value.data()), n), values),
            1e-5);
  EXPECT_THROW(gs::graphs::capture(step, *stream_, [] {}), gs::usage_error);  // full graph
  gs::graphs::graph_exec other;
  EXPECT_THROW(
      gs::graphs::capture(other, *stream_, [&] { optimizer.set_schedule(schedule, *stream_); }),
      gs::usage_error);
}

TEST_F(train_test, mse_matches_the_reference_and_is_bitwise_reproducible) {
  std::mt19937 rng{14};
  std::size_t const n = 640 * 1024 + 3;
  auto const prediction = random(n, rng);
  auto const target = random(n, rng);
  std::vector<double> want_gradient;
  double const want = gt::reference::mse(prediction, target, &want_gradient);
  float* pred = upload(prediction);
  float* targ = upload(target);
  float* gradient = upload(std::vector<double>(n, 0.0));
  float* loss = upload({0.0});
  gt::mse_loss mse{n, *stream_};
  auto const floats = [&](float* data) { return gs::device_span{data, gs::dtype::float32, n}; };
  gs::device_span const loss_span{loss, gs::dtype::float32, 1};
  mse.forward_backward(floats(pred), floats(targ), floats(gradient), loss_span, *stream_);
  double const eager = download(loss, 1)[0];
  EXPECT_NEAR(eager, want, 1e-5 * want);
  EXPECT_LT(max_relative_error(download(gradient, n), want_gradient), 1e-6);
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] {
    mse.forward_backward(floats(pred), floats(targ), floats(gradient), loss_span, *stream_);
  });
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(loss, 0, sizeof(float), stream_->get()));
  g.replay(*stream_);
  EXPECT_EQ(download(loss, 1)[0], eager);  // same bits
}

TEST_F(train_test, bad_arguments_are_usage_errors) {
  EXPECT_THROW(gt::sgd({}, {}, {}, {}, *stream_), gs::usage_error);
  EXPECT_THROW(gt::sgd({{{nullptr, gs::dtype::float32, 4}, {nullptr, gs::dtype::float32, 4}}}, {},
                       {}, {}, *stream_),
               gs::usage_error);
  float* const values = upload(std::vector<double>(4, 1.0));
  float* const gradients = upload(std::vector<double>(4, 0.5));
  EXPECT_NE(gs::testing::message_of([&] {
              gt::sgd({{{values, gs::dtype::bfloat16, 8}, {gradients, gs::dtype::bfloat16, 8}}}, {},
                      {}, {}, *stream_);
            }).find("sgd: parameter 0 is bfloat16; sgd and adam update float32 tensors"),
            std::string::npos);
  EXPECT_NE(gs::testing::message_of([&] {
              gt::adam({{{values, gs::dtype::float32, 4}, {gradients, gs::dtype::float32, 4}, 1}},
                       {}, {}, {}, *stream_);
            }).find("adam: parameter 0 names group 1; sgd and adam have one group"),
            std::string::npos);
  EXPECT_THROW(gt::mse_loss(0, *stream_), gs::usage_error);
  // The loss's spans: float32, as long as the count it was made for.
  gt::mse_loss const mse{4, *stream_};
  gs::device_span const four{values, gs::dtype::float32, 4};
  gs::device_span const loss{gradients, gs::dtype::float32, 1};
  EXPECT_NE(gs::testing::message_of([&] {
              mse.forward_backward(four, {values, gs::dtype::float32, 3}, four, loss, *stream_);
            }).find("mse_loss::forward_backward: target is 3 float32"),
            std::string::npos);
  EXPECT_NE(gs::testing::message_of([&] {
              mse.forward_backward(four, four, {values, gs::dtype::bfloat16, 8}, loss, *stream_);
            }).find("gradient is 8 bfloat16"),
            std::string::npos);
  EXPECT_NE(gs::testing::message_of([&] {
              mse.forward_backward(four, four, four, {}, *stream_);
            }).find("mse_loss::forward_backward: loss holds no element"),
            std::string::npos);
}

// They allocate and upload at construction, which a capture cannot record: refused with the
// fix, before anything reaches the capture, so the capture itself completes.
TEST_F(train_test, construction_inside_a_capture_is_a_usage_error) {
  float* value = upload({1.0, 2.0});
  float* gradient = upload({0.5, 0.5});
  std::vector<gt::parameter> const parameters{
      {{value, gs::dtype::float32, 2}, {gradient, gs::dtype::float32, 2}}};
  gs::graphs::graph_exec g;
  std::vector<std::string> refused;
  gs::graphs::capture(g, *stream_, [&] {
    using gs::testing::message_of;
    refused.push_back(message_of([&] { gt::sgd{parameters, {}, {}, {}, *stream_}; }));
    refused.push_back(message_of([&] { gt::mse_loss{2, *stream_}; }));
    refused.push_back(message_of([&] { gs::train::capture_safe_rng{7, *stream_}; }));
    GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(gradient, 0, sizeof(float), stream_->get()));
  });
  ASSERT_EQ(refused.size(), 3U);
  EXPECT_NE(refused[0].find("sgd: construct it before the capture"), std::string::npos)
      << refused[0];
  EXPECT_NE(refused[1].find("mse_loss: construct it before the capture"), std::string::npos)
      << refused[1];
  EXPECT_NE(refused[2].find("before the capture"), std::string::npos) << refused[2];
  EXPECT_FALSE(g.empty());
}
