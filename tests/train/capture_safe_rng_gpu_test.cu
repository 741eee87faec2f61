// The capture-safe generator on a device: masks equal the host's Philox, differ from replay to
// replay, are reproducible from the seed eagerly and graphed, and survive save/restore.

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/philox.hpp>
#include <vector>

#include "common/gpu_test.hpp"

namespace gs = graphstep;

namespace {

class rng_test : public gs::testing::stream_pool_test {
 protected:
  void SetUp() override {
    gs::testing::stream_pool_test::SetUp();
    if (IsSkipped()) return;
    x_ = blocks_->get(n_);
    y_ = blocks_->get(n_);
    mask_ = blocks_->get<std::uint8_t>(n_);
    std::vector<float> const ones(n_, 1.0F);
    graphstep::testing::copy_to_device(x_, ones.data(), n_ * sizeof(float));
  }
  // One step: two dropouts (so reservations within a step matter), then the advance.
  void step(gs::train::capture_safe_rng& rng) {
    gs::device_span const x{x_, gs::dtype::float32, n_};
    gs::device_span const y{y_, gs::dtype::float32, n_};
    gs::device_span const mask{mask_, gs::dtype::uint8, n_};
    std::size_t const half = n_ / 2;
    gs::train::dropout_forward(y.subspan(0, half), mask.subspan(0, half), x.subspan(0, half), p_,
                               rng.reserve(gs::train::dropout_counters(half)), *stream_);
    gs::train::dropout_forward(y.subspan(half, n_ - half), mask.subspan(half, n_ - half),
                               x.subspan(half, n_ - half), p_,
                               rng.reserve(gs::train::dropout_counters(n_ - half)), *stream_);
    rng.end_step(*stream_);
  }
  std::vector<std::uint8_t> mask() {
    std::vector<std::uint8_t> host(n_);
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(host.data(), mask_, n_, cudaMemcpyDeviceToHost, stream_->get()));
    stream_->synchronize();
    return host;
  }
  std::size_t const n_ = 100003;
  float const p_ = 0.2F;
  float* x_{};
  float* y_{};
  std::uint8_t* mask_{};
};

}  // namespace

TEST_F(rng_test, masks_equal_the_host_philox_and_keep_the_right_fraction) {
  gs::train::capture_safe_rng rng{1234, *stream_};
  step(rng);
  auto const got = mask();
  std::size_t const half = n_ / 2;
  std::uint64_t const second_base = gs::train::dropout_counters(half);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n_; ++i) {
    std::size_t const local = i < half ? i : i - half;
    std::uint64_t const position = (i < half ? 0 : second_base) + local / 4;
    auto const bits = gs::train::philox_at(1234, position);
    bool const keep = gs::train::to_unit_float(bits.word[local % 4]) >= p_;
    ASSERT_EQ(got[i], keep ? 1 : 0) << "element " << i;
    kept += keep;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n_, 1.0 - p_, 0.01);
}

TEST_F(rng_test, replays_draw_new_masks_and_graphed_equals_eager_for_one_seed) {
  std::vector<std::vector<std::uint8_t>> eager;
  {
    gs::train::capture_safe_rng rng{99, *stream_};
    for (int i = 0; i < 4; ++i) {
      step(rng);
      eager.push_back(mask());
    }
  }
  EXPECT_NE(eager[0], eager[1]) << "the mask must change from step to step";
  gs::train::capture_safe_rng rng{99, *stream_};
  gs::graphs::graph_exec g;
  gs::graphs::capture(g, *stream_, [&] { step(rng); });
  for (int i = 0; i < 4; ++i) {
    g.replay(*stream_);
    EXPECT_EQ(mask(), eager[static_cast<std::size_t>(i)]) << "replay " << i;
  }
}

TEST_F(rng_test, save_and_restore_reproduce_a_step) {
  gs::train::capture_safe_rng rng{7, *stream_};
  step(rng);
  gs::train::checkpoint saved;
  rng.save_to(saved, "rng", *stream_);
  step(rng);
  auto const next = mask();
  rng.restore_from(saved, "rng", *stream_);
  step(rng);
  EXPECT_EQ(mask(), next);
  gs::train::checkpoint wrong;
  wrong.add_value("rng", std::uint8_t{3});
  EXPECT_THROW(rng.restore_from(wrong, "rng", *stream_), gs::usage_error);
  EXPECT_THROW(rng.restore_from(saved, "generator", *stream_), gs::usage_error);
  static_cast<void>(rng.reserve(1));
  gs::train::checkpoint mid_step;
  EXPECT_THROW(rng.save_to(mid_step, "rng", *stream_), gs::usage_error);
  EXPECT_THROW(rng.restore_from(saved, "rng", *stream_), gs::usage_error);
  rng.end_step(*stream_);
}

TEST_F(rng_test, dropout_backward_uses_the_mask) {
  gs::train::capture_safe_rng rng{3, *stream_};
  step(rng);
  float* dx = blocks_->get(n_);
  gs::device_span const gradient{dx, gs::dtype::float32, n_};
  gs::device_span const upstream{x_, gs::dtype::float32, n_};
  gs::train::dropout_backward(gradient, {mask_, gs::dtype::uint8, n_}, upstream, p_, *stream_);
  std::vector<float> host(n_);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(host.data(), dx, n_ * sizeof(float), cudaMemcpyDeviceToHost, stream_->get()));
  auto const m = mask();
  for (std::size_t i = 0; i < n_; ++i) {
    ASSERT_EQ(host[i], m[i] != 0 ? 1.0F / (1.0F - p_) : 0.0F);
  }
  EXPECT_THROW(gs::train::dropout_backward(gradient, {mask_, gs::dtype::uint8, n_}, upstream, 1.0F,
                                           *stream_),
               gs::usage_error);
}
