#pragma once

// A small linear model trained in K micro-batches (train::micro_batch_loop) with the
// mixed-precision AdamW, for the tests of gradient accumulation on one rank
// (tests/train/micro_batch_loop_gpu_test.cu) and on several (tests/nccl/).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/memory/step_input.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/micro_batch_loop.hpp>
#include <graphstep/train/mixed_precision_adamw.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <optional>
#include <vector>

#include "common/gpu_test.hpp"

namespace graphstep::testing::micro_batches {

namespace gs = graphstep;
namespace gt = graphstep::train;

inline constexpr int features = 8;

// One thread, in a fixed order: loss = (1/B) sum_r (w.x_r - y_r)^2 / 2, and
// gradient += weight (1/B) sum_r (w.x_r - y_r) x_r.
template <int Features>
__global__ void linear_step_kernel(float const* w, float const* x, float const* y, int rows,
                                   float weight, float* gradient, float* loss) {
  float sum = 0.0F;
  float residuals[64];  // rows <= 64
  for (int r = 0; r < rows; ++r) {
    float p = 0.0F;
    for (int j = 0; j < Features; ++j) p += w[j] * x[r * Features + j];
    residuals[r] = p - y[r];
    sum += 0.5F * residuals[r] * residuals[r];
  }
  *loss = sum / static_cast<float>(rows);
  for (int j = 0; j < Features; ++j) {
    float g = 0.0F;
    for (int r = 0; r < rows; ++r) g += residuals[r] * x[r * Features + j];
    gradient[j] += weight * (g / static_cast<float>(rows));
  }
}

// Deterministic data of step `step`: K x B rows of x and y.
struct batch {
  std::vector<float> x, y;
};
inline batch data_of(int step, int rows) {
  batch b;
  std::uint32_t state = 12345U + 7919U * static_cast<std::uint32_t>(step);
  auto next = [&] {
    state = state * 1664525U + 1013904223U;
    return static_cast<float>(state >> 8U) / static_cast<float>(1U << 24U) - 0.5F;
  };
  for (int r = 0; r < rows; ++r) {
    float target = 0.25F;
    for (int j = 0; j < features; ++j) {
      float const v = next();
      b.x.push_back(v);
      target += static_cast<float>(j + 1) * 0.1F * v;
    }
    b.y.push_back(target + 0.01F * next());
  }
  return b;
}

inline gs::parameter_layout one_tensor() {
  gs::parameter_layout layout{64};
  static_cast<void>(layout.add({"w", {features}, gs::dtype::float32}));
  return layout;
}

// The model, its K micro-batches, the optimizer; one optimizer step per `issue`.
struct linear_run {
  // Between the loop and the optimizer: e.g. the gradients' all-reduce, once per step.
  std::function<void(gs::cuda::stream_view)> after_loop;
  // When set: the last micro-batch runs after the device loop (micro_batch_loop::run with a
  // `last`), and this runs right after its kernels, on its stream.
  std::function<void(gs::cuda::stream_view)> after_last_micro_batch;

  linear_run(int k, int b, gt::mixed_adamw_options const& options, gs::cuda::stream_view s)
      : micro_batches{k},
        rows{b},
        stream{s},
        weights{one_tensor(), s},
        gradients{one_tensor(), s},
        x_all{static_cast<std::size_t>(k * b * features), s},
        y_all{static_cast<std::size_t>(k * b), s},
        x{sizeof(float) * b * features, s},
        y{sizeof(float) * b, s},
        micro_loss{sizeof(float), s},
        loop{k, gradients, s} {
    std::vector<float> w(features);
    for (int j = 0; j < features; ++j) w[j] = 0.05F * static_cast<float>(j % 3);
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(weights.data(), w.data(), sizeof(float) * features,
                                       cudaMemcpyHostToDevice, s.get()));
    s.synchronize();
    gt::lr_schedule schedule;
    schedule.base = 0.01F;
    optimizer.emplace(weights, gradients, std::vector<gt::parameter_group>{{}}, options, schedule,
                      nullptr, s);
  }

  // Micro-batch *loop.index(): its rows selected, its loss and gradient (added) computed.
  void micro_batch(gs::cuda::stream_view body) {
    loop.select(x_all, static_cast<float*>(x.data()), static_cast<std::size_t>(rows) * features,
                body);
    loop.select(y_all, static_cast<float*>(y.data()), static_cast<std::size_t>(rows), body);
    linear_step_kernel<features><<<1, 1, 0, body.get()>>>(
        static_cast<float const*>(weights.data()), static_cast<float const*>(x.data()),
        static_cast<float const*>(y.data()), rows, loop.loss_weight(),
        static_cast<float*>(gradients.data()), static_cast<float*>(micro_loss.data()));
    GRAPHSTEP_CUDA_TRY(cudaGetLastError());
  }

  // The step as K + 1 launches, as trainers replaying a micro-batch graph issue it: after one
  // `loop.begin` before the first step, K `pass_micro_batch` and one `finish_step_in_passes`,
  // which also begins the next step.
  void pass_micro_batch(gs::cuda::stream_view s) {
    loop.pass(s, static_cast<float const*>(micro_loss.data()),
              [&](gs::cuda::stream_view body) { micro_batch(body); });
  }
  void finish_step_in_passes(gs::cuda::stream_view s) {
    if (after_loop) after_loop(s);
    optimizer->step(s);
    loop.begin(s);
  }

  void issue(gs::cuda::stream_view s) {
    auto const micro_batch = [&](gs::cuda::stream_view body) { this->micro_batch(body); };
    auto const* const loss = static_cast<float const*>(micro_loss.data());
    if (after_last_micro_batch) {
      loop.run(s, loss, micro_batch, [&](gs::cuda::stream_view last) {
        micro_batch(last);
        after_last_micro_batch(last);
      });
    } else {
      loop.run(s, loss, micro_batch);
    }
    if (after_loop) after_loop(s);
    optimizer->step(s);
  }

  void upload(int step) {
    batch const b = data_of(step, micro_batches * rows);
    x_all.upload(b.x, stream);
    y_all.upload(b.y, stream);
  }

  [[nodiscard]] std::vector<float> read(void const* device) const {
    return gs::testing::copy_to_host(static_cast<float const*>(device), features, stream);
  }

  int micro_batches;
  int rows;
  gs::cuda::stream_view stream;
  gs::memory::parameter_buffer weights, gradients;
  gs::memory::step_input<float> x_all, y_all;
  gs::cuda::device_buffer x, y, micro_loss;
  gt::micro_batch_loop loop;
  std::optional<gt::mixed_precision_adamw> optimizer;
};

}  // namespace graphstep::testing::micro_batches
