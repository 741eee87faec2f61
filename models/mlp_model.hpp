#pragma once

// The MLP of the design — Linear 4096→2048 + GELU (fused into the GEMM), dropout 0.2, Linear
// 2048→1024, dropout 0.1, MSE, SGD lr 0.1 — as static buffers, GEMMs, an optimizer and a
// capture-safe generator; `step()` issues one whole training step. Shared by examples/mlp_train
// and the training-step benchmark.

#include <cmath>
#include <cstdint>
#include <functional>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/diagnostics/verify_replay.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/ops/gelu.hpp>
#include <graphstep/ops/gemm_gelu.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/tensor.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/mse_loss.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <graphstep/train/sgd.hpp>
#include <optional>
#include <random>
#include <vector>

namespace mlp_example {

namespace gs = graphstep;
namespace go = graphstep::ops;
namespace gt = graphstep::train;

struct mlp_settings {
  int batch{640};
  go::gemm_math math{go::gemm_math::standard};  // the data is float32; tf32 or not
  bool unfused{false};
  std::uint64_t seed{2024};
};

constexpr int d_in = 4096;
constexpr int hidden = 2048;
constexpr int d_out = 1024;
constexpr float p1 = 0.2F;
constexpr float p2 = 0.1F;
constexpr gs::dtype f32 = gs::dtype::float32;  // every buffer of the model

// One model with its static buffers, GEMMs, optimizer and generator.
class mlp {
 public:
  mlp(mlp_settings const& s, gs::memory::memory_pool& pool, gs::cuda::stream_view stream,
      go::cublaslt_handle const& handle)
      : s_{s}, pool_{pool}, stream_{stream}, rng_{s.seed, stream} {
    std::size_t const m = static_cast<std::size_t>(s.batch);
    x_ = buffer(m * d_in);
    target_ = buffer(m * d_out);
    weights_.emplace(parameter_layout(), stream, pool);
    gradients_.emplace(weights_->layout(), stream, pool);
    w1_ = floats_at(weights_->view("fc1 weight"));
    b1_ = floats_at(weights_->view("fc1 bias"));
    w2_ = floats_at(weights_->view("fc2 weight"));
    b2_ = floats_at(weights_->view("fc2 bias"));
    dw1_ = floats_at(gradients_->view("fc1 weight"));
    db1_ = floats_at(gradients_->view("fc1 bias"));
    dw2_ = floats_at(gradients_->view("fc2 weight"));
    db2_ = floats_at(gradients_->view("fc2 bias"));
    z1_ = buffer(m * hidden);
    a1_ = buffer(m * hidden);
    d1_ = buffer(m * hidden);
    y_ = buffer(m * d_out);
    y2_ = buffer(m * d_out);
    dy2_ = buffer(m * d_out);
    dy_ = buffer(m * d_out);
    dd1_ = buffer(m * hidden);
    loss_ = buffer(1);
    mask1_ = static_cast<std::uint8_t*>(allocate(m * hidden));
    mask2_ = static_cast<std::uint8_t*>(allocate(m * d_out));

    // Weights like PyTorch's default initialization; data: the target is a fixed linear map of
    // the input, so the loss can fall.
    std::mt19937 rng{static_cast<std::uint32_t>(s.seed)};
    upload(w1_, uniform(std::size_t(hidden) * d_in, 1.0F / std::sqrt(float(d_in)), rng));
    upload(b1_, uniform(hidden, 1.0F / std::sqrt(float(d_in)), rng));
    upload(w2_, uniform(std::size_t(d_out) * hidden, 1.0F / std::sqrt(float(hidden)), rng));
    upload(b2_, uniform(d_out, 1.0F / std::sqrt(float(hidden)), rng));
    auto const input = uniform(m * d_in, 1.0F, rng);
    std::vector<float> target(m * d_out);
    for (std::size_t r = 0; r < m; ++r) {
      for (int c = 0; c < d_out; ++c) target[r * d_out + c] = 0.5F * input[r * d_in + c];
    }
    upload(x_, input);
    upload(target_, target);

    std::size_t const ws = go::gemm::workspace_size();
    void* workspace = allocate(ws);
    int const b = s.batch;
    go::gemm_options forward_options;
    forward_options.force_unfused = s.unfused;
    forward_options.allow_unfused = true;
    std::size_t const h = hidden;
    std::size_t const in = d_in;
    std::size_t const out = d_out;
    gs::device_span const none;
    fc1_ = make_gemm(handle, {go::gemm_kind::forward_bias_gelu, b, hidden, d_in, f32, s.math},
                     {floats(x_, m * in), floats(w1_, h * in), floats(a1_, m * h), floats(b1_, h),
                      floats(z1_, m * h), none},
                     workspace, ws, forward_options);
    fc2_ = make_gemm(handle, {go::gemm_kind::forward_bias, b, d_out, hidden, f32, s.math},
                     {floats(d1_, m * h), floats(w2_, out * h), floats(y_, m * out),
                      floats(b2_, out), none, none},
                     workspace, ws, forward_options);
    fc2_wgrad_ =
        make_gemm(handle, {go::gemm_kind::backward_weight_bias, b, d_out, hidden, f32, s.math},
                  {floats(dy_, m * out), floats(d1_, m * h), floats(dw2_, out * h), none, none,
                   floats(db2_, out)},
                  workspace, ws, {});
    // Dropout sits between GELU and fc2, so GELU′ cannot ride in this GEMM's epilogue.
    fc2_dgrad_ = make_gemm(
        handle, {go::gemm_kind::backward_data, b, d_out, hidden, f32, s.math},
        {floats(dy_, m * out), floats(w2_, out * h), floats(dd1_, m * h), none, none, none},
        workspace, ws, {});
    fc1_wgrad_ =
        make_gemm(handle, {go::gemm_kind::backward_weight, b, hidden, d_in, f32, s.math},
                  {floats(dd1_, m * h), floats(x_, m * in), floats(dw1_, h * in), none, none, none},
                  workspace, ws, {});
    mse_.emplace(m * d_out, stream);
    gt::lr_schedule schedule;
    schedule.base = 0.1F;
    sgd_.emplace(*weights_, *gradients_, gt::sgd_options{}, schedule, nullptr, stream);
    stream.synchronize();
  }

  mlp(mlp const&) = delete;
  mlp& operator=(mlp const&) = delete;
  mlp(mlp&&) = delete;
  mlp& operator=(mlp&&) = delete;

  void step() {
    std::size_t const m = static_cast<std::size_t>(s_.batch);
    fc1_->run(stream_);
    gs::train::dropout_forward(floats(d1_, m * hidden), bytes(mask1_, m * hidden),
                               floats(a1_, m * hidden), p1,
                               rng_.reserve(gs::train::dropout_counters(m * hidden)), stream_);
    fc2_->run(stream_);
    gs::train::dropout_forward(floats(y2_, m * d_out), bytes(mask2_, m * d_out),
                               floats(y_, m * d_out), p2,
                               rng_.reserve(gs::train::dropout_counters(m * d_out)), stream_);
    mse_->forward_backward(floats(y2_, m * d_out), floats(target_, m * d_out),
                           floats(dy2_, m * d_out), floats(loss_, 1), stream_);
    gs::train::dropout_backward(floats(dy_, m * d_out), bytes(mask2_, m * d_out),
                                floats(dy2_, m * d_out), p2, stream_);
    fc2_wgrad_->run(stream_);
    // fc2's weight and bias gradients, the first two in the gradient buffer, are final.
    if (gradients_finished_) {
      std::size_t const fc2_bias = *gradients_->layout().find("fc2 bias");
      gradients_finished_(gradients_->layout().bytes_through(fc2_bias) / sizeof(float), stream_);
    }
    fc2_dgrad_->run(stream_);
    gs::train::dropout_backward(floats(dd1_, m * hidden), bytes(mask1_, m * hidden),
                                floats(dd1_, m * hidden), p1, stream_);
    go::launch_gelu_backward(floats(dd1_, m * hidden), floats(dd1_, m * hidden),
                             floats(z1_, m * hidden), s_.batch, hidden, go::gelu_form::tanh,
                             stream_);
    go::launch_bias_gradient(floats(db1_, hidden), floats(dd1_, m * hidden), s_.batch, hidden,
                             stream_);
    fc1_wgrad_->run(stream_);
    if (after_backward_) after_backward_(stream_);
    sgd_->step(stream_);
    rng_.end_step(stream_);
  }

  float loss() {
    float value = 0.0F;
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(&value, loss_, sizeof value, cudaMemcpyDeviceToHost, stream_.get()));
    stream_.synchronize();
    return value;
  }
  bool fused() const { return fc1_->fused(); }

  /// The weights and, at the same offsets, the gradients, in the order the backward finishes
  /// the gradients (fc2's first): what the optimizer and a data-parallel run's buckets take.
  [[nodiscard]] gs::memory::parameter_buffer const& weights() const { return *weights_; }
  [[nodiscard]] gs::memory::parameter_buffer const& gradients() const { return *gradients_; }
  /// The memory a step reads and changes that `verify_replay` compares: the weights, the
  /// gradients and the loss. The generator's state is restored through `rng()` instead.
  [[nodiscard]] std::vector<gs::tensor_view> watched() const {
    std::vector<gs::tensor_view> watched;
    for (std::size_t t = 0; t < weights_->layout().size(); ++t) {
      watched.push_back(weights_->view(t));
    }
    watched.push_back(gs::diagnostics::watch("gradients", gradients_->span()));
    watched.push_back(gs::diagnostics::watch("loss", {loss_, gs::dtype::float32, 1}));
    return watched;
  }
  [[nodiscard]] gs::train::capture_safe_rng& rng() { return rng_; }
  /// Runs between the backward pass and the optimizer (e.g. averaging gradients across ranks).
  void set_after_backward(std::function<void(gs::cuda::stream_view)> hook) {
    after_backward_ = std::move(hook);
  }
  /// Called in the backward when the gradient buffer's first `count` elements are final for this
  /// step (the buffer holds the gradients in the order the backward finishes them), so a
  /// data-parallel run can reduce them while the backward goes on.
  void set_gradients_finished(std::function<void(std::size_t count, gs::cuda::stream_view)> hook) {
    gradients_finished_ = std::move(hook);
  }

 private:
  // Its tensors, laid out in the order the backward finishes their gradients (fc2's first), so
  // that the finished gradients are always a prefix of the gradient buffer.
  static gs::parameter_layout parameter_layout() {
    gs::parameter_layout layout;
    layout.add({"fc2 weight", {d_out, hidden}, f32});
    layout.add({"fc2 bias", {d_out}, f32});
    layout.add({"fc1 bias", {hidden}, f32});
    layout.add({"fc1 weight", {hidden, d_in}, f32});
    return layout;
  }
  static float* floats_at(gs::tensor_view const& tensor) {
    return static_cast<float*>(tensor.data());
  }
  float* buffer(std::size_t n) { return static_cast<float*>(allocate(n * sizeof(float))); }
  // n floats at data, as the element-wise functions take them.
  static gs::device_span floats(float* data, std::size_t n) {
    return {data, gs::dtype::float32, n};
  }
  static gs::device_span bytes(std::uint8_t* data, std::size_t n) {
    return {data, gs::dtype::uint8, n};
  }
  // Pool memory the model gives back, in stream order, when it goes.
  void* allocate(std::size_t bytes) {
    return allocations_.emplace_back(bytes, stream_, pool_).data();
  }
  void upload(float* device, std::vector<float> const& host) {
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, stream_.get()));
    stream_.synchronize();
  }
  static std::vector<float> uniform(std::size_t n, float bound, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist{-bound, bound};
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  }
  std::optional<go::gemm> make_gemm(go::cublaslt_handle const& handle, go::gemm_problem const& p,
                                    go::gemm_operands const& o, void* workspace, std::size_t ws,
                                    go::gemm_options const& options) {
    return std::optional<go::gemm>{std::in_place, handle, p, o, workspace, ws, options, stream_};
  }

  mlp_settings s_;
  gs::memory::memory_pool& pool_;
  gs::cuda::stream_view stream_;
  gs::train::capture_safe_rng rng_;
  // Declared before the optimizer and everything else that uses it: destroyed after them, and
  // also when the constructor throws.
  std::vector<gs::cuda::device_buffer> allocations_;
  std::optional<gs::memory::parameter_buffer> weights_, gradients_;
  std::function<void(gs::cuda::stream_view)> after_backward_;
  std::function<void(std::size_t, gs::cuda::stream_view)> gradients_finished_;
  float *x_, *target_, *w1_, *b1_, *z1_, *a1_, *d1_, *w2_, *b2_, *y_, *y2_, *dy2_, *dy_, *dd1_,
      *dw1_, *db1_, *dw2_, *db2_, *loss_;
  std::uint8_t *mask1_, *mask2_;
  std::optional<go::gemm> fc1_, fc2_, fc2_wgrad_, fc2_dgrad_, fc1_wgrad_;
  std::optional<gt::mse_loss> mse_;
  std::optional<gt::sgd> sgd_;
};

}  // namespace mlp_example
