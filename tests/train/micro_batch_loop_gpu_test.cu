// Gradient accumulation in one captured step (train/micro_batch_loop.hpp): K micro-batches of a
// small linear model in a device loop, the optimizer's clip and skip decided on the device.
// Eager and graphed bit for bit, K micro-batches of B against one batch of K x B and an fp64
// reference, node count flat in K, a planted inf and a norm above the threshold skipping exactly
// their step, and the refusals.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/host_readback.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/memory/step_input.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <graphstep/train/micro_batch_loop.hpp>
#include <graphstep/train/mixed_precision_adamw.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"
#include "common/linear_micro_batches.cuh"

namespace gs = graphstep;
namespace gt = graphstep::train;
using gs::testing::contains;
using gs::testing::message_of;

namespace {

using gs::testing::micro_batches::batch;
using gs::testing::micro_batches::data_of;
using gs::testing::micro_batches::features;
using gs::testing::micro_batches::linear_run;
using gs::testing::micro_batches::linear_step_kernel;
using gs::testing::micro_batches::one_tensor;

// What one step leaves behind, read through host_readback after it (no synchronization).
struct step_result {
  float loss{};
  float norm{};
  std::uint32_t skipped{};
  std::vector<float> weights;
};

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

gt::mixed_adamw_options clipped() {
  gt::mixed_adamw_options options;
  options.max_grad_norm = 1.0F;
  return options;
}

class micro_batch_loop_test : public gs::testing::gpu_test {};

// Runs `steps` optimizer steps eagerly or as replays of one captured step.
std::vector<step_result> train(int k, int b, bool graphed, int steps,
                               gt::mixed_adamw_options const& options = clipped(),
                               int inf_step = -1, int inf_micro_batch = 0,
                               std::function<void(gs::cuda::stream_view)> const& after_last = {}) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  linear_run run{k, b, options, stream};
  run.after_last_micro_batch = after_last;
  gs::memory::host_readback<float> loss, norm;
  gs::memory::host_readback<std::uint32_t> skipped;
  gs::graphs::graph_exec step;
  if (graphed) {
    run.upload(0);
    gs::graphs::capture(step, stream, pool, [&] { run.issue(stream); });
  }
  std::vector<step_result> results;
  for (int i = 0; i < steps; ++i) {
    batch data = data_of(i, k * b);
    if (i == inf_step) {
      data.x[static_cast<std::size_t>(inf_micro_batch * b * features + 3)] =
          std::numeric_limits<float>::infinity();
    }
    run.x_all.upload(data.x, stream);
    run.y_all.upload(data.y, stream);
    if (graphed) {
      step.replay(stream);
    } else {
      run.issue(stream);
    }
    auto const l = loss.enqueue(run.loop.loss(), stream);
    auto const n = norm.enqueue(run.optimizer->gradient_norm(), stream);
    auto const s = skipped.enqueue(run.optimizer->skipped_steps(), stream);
    results.push_back(
        {loss.value(l), norm.value(n), skipped.value(s), run.read(run.weights.data())});
  }
  return results;
}

// As `train`, the step issued as K launches of one micro-batch and one of the rest (graphed:
// two graphs replayed K and 1 times).
std::vector<step_result> train_in_passes(int k, int b, bool graphed, int steps) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  linear_run run{k, b, clipped(), stream};
  gs::memory::host_readback<float> loss, norm;
  gs::memory::host_readback<std::uint32_t> skipped;
  gs::graphs::graph_exec one, rest;
  if (graphed) {
    run.upload(0);
    gs::graphs::capture(one, stream, pool, [&] { run.pass_micro_batch(stream); });
    gs::graphs::capture(rest, stream, pool, [&] { run.finish_step_in_passes(stream); });
  }
  run.loop.begin(stream);
  std::vector<step_result> results;
  for (int i = 0; i < steps; ++i) {
    run.upload(i);
    for (int m = 0; m < k; ++m) {
      if (graphed) {
        one.replay(stream);
      } else {
        run.pass_micro_batch(stream);
      }
    }
    if (graphed) {
      rest.replay(stream);
    } else {
      run.finish_step_in_passes(stream);
    }
    auto const l = loss.enqueue(run.loop.loss(), stream);
    auto const n = norm.enqueue(run.optimizer->gradient_norm(), stream);
    auto const s = skipped.enqueue(run.optimizer->skipped_steps(), stream);
    results.push_back(
        {loss.value(l), norm.value(n), skipped.value(s), run.read(run.weights.data())});
  }
  return results;
}

void expect_same_bits(std::vector<step_result> const& a, std::vector<step_result> const& b,
                      std::string const& what) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(same_bits(a[i].loss, b[i].loss))
        << what << " step " << i << ": " << a[i].loss << " vs " << b[i].loss;
    EXPECT_TRUE(same_bits(a[i].norm, b[i].norm)) << what << " step " << i;
    EXPECT_GT(a[i].norm, 0.0F);
    for (int j = 0; j < features; ++j) {
      EXPECT_TRUE(same_bits(a[i].weights[j], b[i].weights[j]))
          << what << " step " << i << " weight " << j;
    }
  }
  // The steps moved the weights: the comparison is not of two untouched buffers.
  EXPECT_NE(a.front().weights, a.back().weights);
}

void expect_bit_for_bit(int k) {
  expect_same_bits(train(k, 2, false, 3), train(k, 2, true, 3), "K " + std::to_string(k));
}

}  // namespace

TEST_F(micro_batch_loop_test, eager_and_graphed_are_bit_for_bit_at_k_1) {
  expect_bit_for_bit(1);
}
TEST_F(micro_batch_loop_test, eager_and_graphed_are_bit_for_bit_at_k_4) {
  expect_bit_for_bit(4);
}
TEST_F(micro_batch_loop_test, eager_and_graphed_are_bit_for_bit_at_k_8) {
  expect_bit_for_bit(8);
}

// The arithmetic: the accumulated gradient and the mean loss of K micro-batches of B are those
// of one batch of K x B, against an fp64 reference.
TEST_F(micro_batch_loop_test, k_micro_batches_of_b_match_one_batch_of_k_times_b) {
  int const k = 4;
  int const b = 3;
  batch const data = data_of(0, k * b);
  std::vector<double> w(features);
  for (int j = 0; j < features; ++j) w[j] = 0.05 * (j % 3);
  double loss = 0.0;
  std::vector<double> gradient(features, 0.0);
  for (int r = 0; r < k * b; ++r) {
    double p = 0.0;
    for (int j = 0; j < features; ++j) p += w[j] * data.x[r * features + j];
    double const residual = p - data.y[r];
    loss += 0.5 * residual * residual / (k * b);
    for (int j = 0; j < features; ++j) gradient[j] += residual * data.x[r * features + j] / (k * b);
  }
  for (auto [micro_batches, batch_rows] : {std::pair{k, b}, std::pair{1, k * b}}) {
    int const rows = batch_rows;  // a lambda cannot capture a structured binding in C++17
    gs::cuda::stream stream;
    linear_run run{micro_batches, rows, clipped(), stream};
    run.upload(0);
    run.loop.run(
        stream, static_cast<float const*>(run.micro_loss.data()), [&](gs::cuda::stream_view s) {
          run.loop.select(run.x_all, static_cast<float*>(run.x.data()),
                          static_cast<std::size_t>(rows) * features, s);
          run.loop.select(run.y_all, static_cast<float*>(run.y.data()),
                          static_cast<std::size_t>(rows), s);
          linear_step_kernel<features><<<1, 1, 0, s.get()>>>(
              static_cast<float const*>(run.weights.data()),
              static_cast<float const*>(run.x.data()), static_cast<float const*>(run.y.data()),
              rows, run.loop.loss_weight(), static_cast<float*>(run.gradients.data()),
              static_cast<float*>(run.micro_loss.data()));
        });
    auto const g = run.read(run.gradients.data());
    float const mean_loss = gs::testing::copy_to_host(run.loop.loss(), 1, stream).front();
    EXPECT_NEAR(mean_loss, loss, 1e-6 * std::abs(loss) + 1e-7) << micro_batches << " x " << rows;
    for (int j = 0; j < features; ++j) {
      EXPECT_NEAR(g[j], gradient[j], 1e-5 * std::abs(gradient[j]) + 1e-7)
          << micro_batches << " x " << rows << ", gradient " << j;
    }
  }
}

TEST_F(micro_batch_loop_test, the_graph_does_not_grow_with_k) {
  std::size_t totals[2]{};
  int const ks[2]{1, 8};
  for (int i = 0; i < 2; ++i) {
    gs::cuda::stream stream;
    gs::memory::memory_pool pool;
    linear_run run{ks[i], 2, clipped(), stream};
    run.upload(0);
    gs::graphs::graph_exec step;
    gs::graphs::capture(step, stream, pool, [&] { run.issue(stream); });
    // The loop, and the update, which a clipped step whose norm is not finite skips.
    EXPECT_EQ(step.node_counts().conditional, 2U);
    totals[i] = step.node_counts().total;
  }
  EXPECT_EQ(totals[0], totals[1]);
}

// The update is a conditional node where a step may be skipped (here: clipping on), so that a
// skipped step launches no update; where none can be, it is a plain kernel node.
TEST_F(micro_batch_loop_test, the_update_is_conditional_only_where_a_step_may_be_skipped) {
  for (bool clipping : {false, true}) {
    gs::cuda::stream stream;
    gs::memory::memory_pool pool;
    linear_run run{2, 2, clipping ? clipped() : gt::mixed_adamw_options{}, stream};
    run.upload(0);
    gs::graphs::graph_exec step;
    gs::graphs::capture(step, stream, pool, [&] { run.issue(stream); });
    EXPECT_EQ(step.node_counts().conditional, clipping ? 2U : 1U);
  }
}

// The last micro-batch after the device loop (`run` with a `last`): the values of the loop
// that holds all K, bit for bit, eager and graphed; `last` is captured once.
TEST_F(micro_batch_loop_test, the_last_micro_batch_after_the_loop_computes_the_same_bits) {
  int calls = 0;
  auto const count = [&](gs::cuda::stream_view) { ++calls; };
  for (int k : {1, 4, 8}) {
    auto const inside = train(k, 2, false, 3);
    for (bool graphed : {false, true}) {
      calls = 0;
      auto const after = train(k, 2, graphed, 3, clipped(), -1, 0, count);
      expect_same_bits(inside, after, "K " + std::to_string(k) + (graphed ? " graphed" : " eager"));
      EXPECT_EQ(calls, graphed ? 1 : 3) << "K " << k;
    }
  }
}

// begin and K passes, eager or as K replays of a one-micro-batch graph: the device loop's
// values, bit for bit (the baseline the one launch is measured against).
TEST_F(micro_batch_loop_test, k_launches_of_one_micro_batch_compute_what_the_loop_does) {
  for (int k : {1, 4}) {
    auto const loop = train(k, 2, false, 3);
    for (bool graphed : {false, true}) {
      expect_same_bits(loop, train_in_passes(k, 2, graphed, 3),
                       "K " + std::to_string(k) + (graphed ? " replays" : " passes"));
    }
  }
}

TEST_F(micro_batch_loop_test, the_graph_with_the_last_micro_batch_after_the_loop_does_not_grow) {
  std::size_t totals[2]{};
  int const ks[3]{2, 8, 1};
  for (int i = 0; i < 3; ++i) {
    gs::cuda::stream stream;
    gs::memory::memory_pool pool;
    linear_run run{ks[i], 2, clipped(), stream};
    run.after_last_micro_batch = [](gs::cuda::stream_view) {};
    run.upload(0);
    gs::graphs::graph_exec step;
    gs::graphs::capture(step, stream, pool, [&] { run.issue(stream); });
    // The update's node, and the loop's but at K = 1: the one micro-batch is the last.
    EXPECT_EQ(step.node_counts().conditional, ks[i] == 1 ? 1U : 2U) << "K " << ks[i];
    if (i < 2) totals[i] = step.node_counts().total;
  }
  EXPECT_EQ(totals[0], totals[1]);
}

// What a conditional node's body cannot hold and the last micro-batch can: work forked to
// another stream and joined back, as a gradient bucket's all-reduce is. Here a copy of the
// accumulated gradients, made on a side stream once the last micro-batch has added its own.
TEST_F(micro_batch_loop_test, the_last_micro_batch_may_fork_work_to_another_stream) {
  for (bool graphed : {false, true}) {
    gs::cuda::stream stream;
    gs::cuda::stream side;
    gs::cuda::event forked;
    gs::cuda::event joined;
    gs::memory::memory_pool pool;
    linear_run run{4, 2, clipped(), stream};
    gs::cuda::device_buffer copy{sizeof(float) * features, stream};
    run.after_last_micro_batch = [&](gs::cuda::stream_view last) {
      EXPECT_EQ(last.get(), stream.get()) << "the last micro-batch runs on the step's stream";
      forked.record(last);
      side.view().wait(forked);
      GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(copy.data(), run.gradients.data(), copy.size(),
                                         cudaMemcpyDeviceToDevice, side.get()));
      joined.record(side);
      last.wait(joined);
    };
    gs::graphs::graph_exec step;
    run.upload(0);
    if (graphed) gs::graphs::capture(step, stream, pool, [&] { run.issue(stream); });
    for (int i = 0; i < 2; ++i) {
      run.upload(i);
      if (graphed) {
        step.replay(stream);
      } else {
        run.issue(stream);
      }
      std::vector<float> const gradients = run.read(run.gradients.data());
      EXPECT_EQ(run.read(copy.data()), gradients) << "graphed " << graphed << " step " << i;
      EXPECT_NE(gradients, std::vector<float>(features, 0.0F));
    }
  }
}

// Micro-batch 3 of 4 (index 2) carries an inf: its gradient poisons the accumulated one, the
// norm is not finite, and that optimizer step alone is skipped; the next goes on.
TEST_F(micro_batch_loop_test, an_inf_in_one_micro_batch_skips_exactly_that_step) {
  for (bool graphed : {false, true}) {
    auto const r = train(4, 2, graphed, 4, clipped(), 2, 2);
    EXPECT_EQ(r[0].skipped, 0U);
    EXPECT_EQ(r[1].skipped, 0U);
    EXPECT_EQ(r[2].skipped, 1U) << "graphed " << graphed;
    EXPECT_FALSE(std::isfinite(r[2].norm));
    EXPECT_EQ(r[2].weights, r[1].weights) << "the poisoned step must leave the weights";
    EXPECT_EQ(r[3].skipped, 1U);
    EXPECT_NE(r[3].weights, r[2].weights) << "the step after it goes on";
  }
}

// A threshold ten times the first step's norm: the second step, whose targets are a thousand
// times larger, is skipped (counted, the step count and schedule waiting); the third goes on.
TEST_F(micro_batch_loop_test, a_norm_above_the_threshold_skips_and_the_step_count_waits) {
  float const first_norm = train(2, 2, true, 1).front().norm;
  ASSERT_GT(first_norm, 0.0F);
  gt::mixed_adamw_options options = clipped();
  options.skip_norm = 10.0F * first_norm;
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  linear_run run{2, 2, options, stream};
  gs::graphs::graph_exec step;
  run.upload(0);
  gs::graphs::capture(step, stream, pool, [&] { run.issue(stream); });
  gs::memory::host_readback<std::uint32_t> skipped;
  gs::memory::host_readback<float> norm;
  std::vector<float> weights;
  for (int i = 0; i < 3; ++i) {
    batch data = data_of(i, 4);
    if (i == 1) {
      for (float& y : data.y) y *= 1000.0F;
    }
    run.x_all.upload(data.x, stream);
    run.y_all.upload(data.y, stream);
    std::vector<float> const before = run.read(run.weights.data());
    step.replay(stream);
    auto const n = norm.enqueue(run.optimizer->gradient_norm(), stream);
    auto const k = skipped.enqueue(run.optimizer->skipped_steps(), stream);
    std::vector<float> const after = run.read(run.weights.data());
    if (i == 0) {
      EXPECT_EQ(norm.value(n), first_norm);
    }
    EXPECT_EQ(norm.value(n) > options.skip_norm, i == 1) << "step " << i;
    EXPECT_EQ(skipped.value(k), i >= 1 ? 1U : 0U) << "step " << i;
    EXPECT_EQ(after == before, i == 1) << "step " << i;
    EXPECT_EQ(run.optimizer->steps_taken(stream), i >= 1 ? i : 1) << "step " << i;
  }
}

// The count of skipped steps is part of the optimizer's checkpoint: a resumed run counts on
// from it. A checkpoint written before it was saved restores 0.
TEST_F(micro_batch_loop_test, the_skip_count_is_saved_and_restored) {
  gt::mixed_adamw_options options = clipped();
  options.skip_norm = 1e-9F;  // below every norm: every step is skipped
  gs::cuda::stream stream;
  auto skipped_of = [&](linear_run const& run) {
    gs::memory::host_readback<std::uint32_t> skipped;
    auto const slot = skipped.enqueue(run.optimizer->skipped_steps(), stream);
    return skipped.value(slot);
  };
  linear_run trained{2, 2, options, stream};
  for (int i = 0; i < 3; ++i) {
    trained.upload(i);
    trained.issue(stream);
  }
  ASSERT_EQ(skipped_of(trained), 3U);
  gt::checkpoint saved;
  trained.optimizer->save_to(saved, "optimizer", stream);
  EXPECT_EQ(saved.value<std::uint32_t>("optimizer/skipped_steps"), 3U);

  linear_run resumed{2, 2, options, stream};
  resumed.optimizer->restore_from(saved, "optimizer", stream);
  EXPECT_EQ(skipped_of(resumed), 3U);
  resumed.upload(3);
  resumed.issue(stream);
  EXPECT_EQ(skipped_of(resumed), 4U);

  gt::checkpoint older;  // the same entries but the count
  for (gt::checkpoint_entry const& entry : saved.entries()) {
    if (entry.kind == gt::checkpoint_kind::tensor) {
      older.add_tensor(entry.spec, entry.bytes);
    } else if (entry.spec.name() != "optimizer/skipped_steps") {
      std::array<unsigned char, 24> step{};  // the step count and the two beta products
      ASSERT_EQ(entry.bytes.size(), step.size());
      std::copy(entry.bytes.begin(), entry.bytes.end(), step.begin());
      older.add_value(entry.spec.name(), step);
    }
  }
  resumed.optimizer->restore_from(older, "optimizer", stream);
  EXPECT_EQ(skipped_of(resumed), 0U);
  EXPECT_EQ(resumed.optimizer->steps_taken(stream), 0);
}

TEST_F(micro_batch_loop_test, bad_input_is_refused_by_value_before_it_is_enqueued) {
  gs::cuda::stream stream;
  gs::memory::parameter_buffer gradients{one_tensor(), stream};
  EXPECT_TRUE(contains(message_of([&] { gt::micro_batch_loop loop(0, gradients, stream); }),
                       "micro_batches is 0"));
  EXPECT_TRUE(contains(message_of([&] { gt::micro_batch_loop loop(-2, gradients, stream); }),
                       "micro_batches is -2"));
  gt::mixed_adamw_options options;
  options.skip_norm = 0.0F;
  gs::memory::parameter_buffer weights{one_tensor(), stream};
  EXPECT_TRUE(contains(message_of([&] {
                         gt::mixed_precision_adamw optimizer(weights, gradients, {{}}, options,
                                                             gt::lr_schedule{}, nullptr, stream);
                       }),
                       "skip_norm is 0"));

  // A step_input of 3 micro-batches for a loop of 4: refused while capturing, and the capture
  // is discarded.
  gs::memory::memory_pool pool;
  gt::micro_batch_loop loop{4, gradients, stream};
  gs::memory::step_input<float> three{3 * 5, stream};
  gs::cuda::device_buffer into{sizeof(float) * 5, stream};
  gs::graphs::graph_exec step;
  std::string const message = message_of([&] {
    gs::graphs::capture(step, stream, pool, [&] {
      loop.run(stream, nullptr, [&](gs::cuda::stream_view s) {
        loop.select(three, static_cast<float*>(into.data()), 5, s);
      });
    });
  });
  EXPECT_TRUE(contains(message, "holds 15 elements, not 4 micro-batches of 5")) << message;
  EXPECT_FALSE(stream.view().is_capturing());
  EXPECT_TRUE(step.empty());

  // A body that allocates from the pool, which a conditional body cannot.
  std::string const allocating = message_of([&] {
    gs::graphs::capture(step, stream, pool, [&] {
      loop.run(stream, nullptr, [&](gs::cuda::stream_view s) {
        gs::cuda::device_buffer scratch{64, s, pool};
      });
    });
  });
  EXPECT_TRUE(contains(allocating, "allocated from a memory pool")) << allocating;
  EXPECT_FALSE(stream.view().is_capturing());

  EXPECT_TRUE(contains(message_of([&] { loop.run(stream, nullptr, {}); }), "body is required"));
  EXPECT_TRUE(contains(message_of([&] { loop.pass(stream, nullptr, {}); }),
                       "micro_batch_loop::pass: the micro-batch body is required"));
  EXPECT_TRUE(
      contains(message_of([&] { loop.run(stream, nullptr, [](gs::cuda::stream_view) {}, {}); }),
               "the last micro-batch's body is required"));
}
