// What every optimizer decides alike on the host: the tensors of a parameter layout as its
// parameters, and which checkpoints its restore accepts (before it copies anything).

#include "train/detail/optimizer_state.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/mixed_precision.hpp>
#include <limits>
#include <string>
#include <vector>

#include "common/error_message.hpp"

namespace gs = graphstep;
namespace gt = graphstep::train;
using gs::testing::message_of;

TEST(optimizer_state, a_layouts_tensors_become_parameters_at_its_offsets_and_groups) {
  gs::parameter_layout layout{64};
  layout.add({"w", {3, 5}, gs::dtype::bfloat16}, 0);
  layout.add({"b", {5}, gs::dtype::bfloat16}, 1);
  layout.add({"scale", {7}, gs::dtype::float32}, 2);
  std::vector<unsigned char> weights(layout.buffer_bytes());
  std::vector<unsigned char> gradients(layout.buffer_bytes());
  auto const parameters =
      gt::detail::layout_parameters(layout, weights.data(), gradients.data(), "sgd");
  ASSERT_EQ(parameters.size(), 3U);
  for (std::size_t t = 0; t < parameters.size(); ++t) {
    auto const& slot = layout.at(t);
    EXPECT_EQ(parameters[t].value.data(), weights.data() + slot.byte_offset()) << slot.spec.name();
    EXPECT_EQ(parameters[t].gradient.data(), gradients.data() + slot.byte_offset())
        << slot.spec.name();
    EXPECT_EQ(parameters[t].value.type(), slot.spec.type()) << slot.spec.name();
    EXPECT_EQ(parameters[t].gradient.count(), slot.spec.count()) << slot.spec.name();
    EXPECT_EQ(parameters[t].group, slot.group) << slot.spec.name();
  }
  EXPECT_EQ(layout.at(1).byte_offset(), 64U) << "the layout's alignment, not the tensors' sizes";
  EXPECT_EQ(parameters[1].value.count(), 5U);
}

TEST(optimizer_state, an_empty_layout_or_a_null_buffer_is_refused_by_name) {
  std::vector<float> buffer(64);
  EXPECT_NE(message_of([&] {
              (void)gt::detail::layout_parameters(gs::parameter_layout{}, buffer.data(),
                                                  buffer.data(), "adam");
            }).find("adam: the parameter layout holds no tensor"),
            std::string::npos);
  gs::parameter_layout layout;
  layout.add({"w", {4}, gs::dtype::float32});
  EXPECT_NE(message_of([&] {
              (void)gt::detail::layout_parameters(layout, nullptr, buffer.data(), "sgd");
            }).find("sgd: the weight or gradient buffer"),
            std::string::npos);
  EXPECT_THROW((void)gt::detail::layout_parameters(layout, buffer.data(), nullptr, "sgd"),
               gs::usage_error);
}

TEST(optimizer_state, gradients_of_another_layout_are_refused_naming_the_tensor) {
  gs::parameter_layout weights;
  weights.add({"w", {4}, gs::dtype::float32});
  weights.add({"b", {2}, gs::dtype::float32}, 1);
  EXPECT_NO_THROW(gt::detail::expect_same_layout(weights, weights, "sgd"));
  gs::parameter_layout fewer;
  fewer.add({"w", {4}, gs::dtype::float32});
  EXPECT_NE(message_of([&] { gt::detail::expect_same_layout(weights, fewer, "adam"); })
                .find("adam: the weights' layout holds 2 tensors and the gradients' 1"),
            std::string::npos);
  gs::parameter_layout other_group;
  other_group.add({"w", {4}, gs::dtype::float32});
  other_group.add({"b", {2}, gs::dtype::float32}, 0);
  EXPECT_NE(message_of([&] { gt::detail::expect_same_layout(weights, other_group, "sgd"); })
                .find("sgd: tensor 1 is 'b'"),
            std::string::npos);
}

TEST(optimizer_state, state_entries_are_named_by_prefix_tensor_and_buffer) {
  EXPECT_EQ(gt::detail::state_entry("optimizer", 0, "exp_avg"), "optimizer/0/exp_avg");
  EXPECT_EQ(gt::detail::state_entry("run/opt", 12, "momentum_buffer"),
            "run/opt/12/momentum_buffer");
}

namespace {
// The entries an optimizer of tensors of `counts` elements would save.
gt::checkpoint saved_state(std::vector<std::size_t> const& counts,
                           std::vector<std::string> const& buffers) {
  gt::checkpoint saved;
  for (std::size_t t = 0; t < counts.size(); ++t) {
    for (auto const& buffer : buffers) {
      saved.add_tensor({gt::detail::state_entry("opt", t, buffer),
                        {static_cast<std::int64_t>(counts[t])},
                        gs::dtype::float32},
                       std::vector<unsigned char>(sizeof(float) * counts[t]));
    }
  }
  return saved;
}
}  // namespace

TEST(optimizer_state, a_checkpoint_of_the_same_layout_is_accepted) {
  std::vector<std::string> const buffers{"exp_avg", "exp_avg_sq"};
  auto const saved = saved_state({10, 3}, buffers);
  EXPECT_NO_THROW(gt::detail::expect_state_entries(saved, "opt", {10, 3}, buffers, "adam"));
  // An optimizer without per-tensor state (SGD without momentum) checks nothing here.
  EXPECT_NO_THROW(gt::detail::expect_state_entries(saved, "opt", {99}, {}, "sgd"));
}

TEST(optimizer_state, another_layout_is_refused_naming_the_entry) {
  std::vector<std::string> const buffers{"exp_avg", "exp_avg_sq"};
  auto const saved = saved_state({10, 3}, buffers);
  std::string const other_size = message_of([&] {
    gt::detail::expect_state_entries(saved, "opt", {10, 4}, buffers, "adam");
  });
  EXPECT_NE(other_size.find("opt/1/exp_avg"), std::string::npos) << other_size;
  EXPECT_NE(other_size.find("[3]"), std::string::npos) << other_size;
  EXPECT_NE(other_size.find("[4]"), std::string::npos) << other_size;
  std::string const fewer = message_of([&] {
    gt::detail::expect_state_entries(saved, "opt", {10, 3, 5}, buffers, "adam");
  });
  EXPECT_NE(fewer.find("opt/2/exp_avg"), std::string::npos) << fewer;
  std::string const more =
      message_of([&] { gt::detail::expect_state_entries(saved, "opt", {10}, buffers, "adam"); });
  EXPECT_NE(more.find("adam::restore_from: the checkpoint holds more tensors under 'opt' than "
                      "the 1 this optimizer updates"),
            std::string::npos)
      << more;
  std::string const other_optimizer = message_of([&] {
    gt::detail::expect_state_entries(saved, "opt", {10, 3}, {"momentum_buffer"}, "sgd");
  });
  EXPECT_NE(other_optimizer.find("opt/0/momentum_buffer"), std::string::npos) << other_optimizer;
}

// step_may_be_skipped says no exactly where no norm and no finding of a scaler present skips.
TEST(optimizer_state, a_step_may_be_skipped_exactly_where_some_input_skips_it) {
  float const inf = std::numeric_limits<float>::infinity();
  float const nan = std::numeric_limits<float>::quiet_NaN();
  for (bool scaler : {false, true}) {
    for (float max_grad_norm : {0.0F, 1.0F}) {
      for (float skip_norm : {inf, 2.0F}) {
        bool some_skip = false;
        for (bool finite : {true, false}) {
          if (!finite && !scaler) continue;  // only a scaler finds gradients not finite
          for (float norm : {0.0F, 1.5F, 1e30F, inf, nan}) {
            some_skip = some_skip || gt::skips_step(finite, norm, max_grad_norm, skip_norm);
          }
        }
        EXPECT_EQ(gt::detail::step_may_be_skipped(scaler, max_grad_norm, skip_norm), some_skip)
            << "scaler " << scaler << ", max_grad_norm " << max_grad_norm << ", skip_norm "
            << skip_norm;
      }
    }
  }
}
