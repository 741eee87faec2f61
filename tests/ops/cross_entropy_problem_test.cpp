// cross_entropy_problem (ops/cross_entropy_problem.hpp): the checks the cross-entropy launcher
// calls before any CUDA call, and its workspace size. The pointers are host addresses that no
// kernel ever sees.

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/cross_entropy_problem.hpp>
#include <string>

#include "common/error_message.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
using gs::testing::contains;
using gs::testing::message_of;

namespace {

// 3 rows of 8 bf16 logits (vocab 7) and room to spare.
struct fake_buffers {
  alignas(16) std::array<unsigned char, 256> logit_bytes{};
  alignas(16) std::array<unsigned char, 256> gradient_bytes{};
  alignas(16) std::array<float, 2> loss_values{};
  alignas(16) std::array<std::int32_t, 4> target_ids{};
  alignas(16) std::array<float, 4> workspace_values{};
  unsigned char* logits{logit_bytes.data()};
  unsigned char* dlogits{gradient_bytes.data()};
  float* loss{loss_values.data()};
  std::int32_t* targets{target_ids.data()};
  float* workspace{workspace_values.data()};
};

go::cross_entropy_shape const good{3, 7, 8};

struct call {
  float* loss{};
  void* dlogits{};
  void const* logits{};
  std::int32_t const* targets{};
  go::cross_entropy_shape shape{};
  void* workspace{};
  std::size_t workspace_bytes{};
  gs::dtype type{gs::dtype::bfloat16};
  // Elements of each span: what the good shape needs.
  std::size_t logit_count{3 * 8};
  std::size_t target_count{3};
  gs::dtype target_type{gs::dtype::int32};
};

call good_call(fake_buffers& b) {
  return {b.loss,
          b.dlogits,
          b.logits,
          b.targets,
          good,
          b.workspace,
          sizeof(float) * b.workspace_values.size()};
}

std::string error_of(call const& c) {
  return message_of([&] {
    // NOLINTBEGIN(cppcoreguidelines-pro-type-const-cast): spans do not make memory const
    static_cast<void>(go::cross_entropy_problem{c.shape}.check(
        {c.loss, gs::dtype::float32, 1}, {c.dlogits, c.type, c.logit_count},
        {const_cast<void*>(c.logits), c.type, c.logit_count},
        {const_cast<std::int32_t*>(c.targets), c.target_type, c.target_count}, c.workspace,
        c.workspace_bytes));
    // NOLINTEND(cppcoreguidelines-pro-type-const-cast)
  });
}

// The type that a call the checks accept names.
gs::dtype checked_type(call const& c) {
  // NOLINTBEGIN(cppcoreguidelines-pro-type-const-cast): spans do not make memory const
  return go::cross_entropy_problem{c.shape}.check(
      {c.loss, gs::dtype::float32, 1}, {c.dlogits, c.type, c.logit_count},
      {const_cast<void*>(c.logits), c.type, c.logit_count},
      {const_cast<std::int32_t*>(c.targets), c.target_type, c.target_count}, c.workspace,
      c.workspace_bytes);
  // NOLINTEND(cppcoreguidelines-pro-type-const-cast)
}

}  // namespace

TEST(cross_entropy_arguments, refuses_null_pointers) {
  fake_buffers b;
  auto c = good_call(b);
  c.loss = nullptr;
  auto message = error_of(c);
  EXPECT_TRUE(contains(message, "cross_entropy: loss is a null pointer")) << message;
  c = good_call(b);
  c.dlogits = nullptr;
  message = error_of(c);
  EXPECT_TRUE(contains(message, "cross_entropy: dlogits is a null pointer")) << message;
  c = good_call(b);
  c.logits = nullptr;
  message = error_of(c);
  EXPECT_TRUE(contains(message, "cross_entropy: logits is a null pointer")) << message;
  c = good_call(b);
  c.targets = nullptr;
  message = error_of(c);
  EXPECT_TRUE(contains(message, "cross_entropy: targets is a null pointer")) << message;
  c = good_call(b);
  c.workspace = nullptr;
  message = error_of(c);
  EXPECT_TRUE(contains(message, "cross_entropy: workspace is a null pointer")) << message;
}

TEST(cross_entropy_arguments, refuses_misaligned_pointers_and_unknown_types) {
  fake_buffers b;
  auto c = good_call(b);
  c.loss = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(b.loss) + 2);
  auto message = error_of(c);
  EXPECT_TRUE(contains(message, "loss is not aligned to the 4 bytes")) << message;
  c = good_call(b);
  c.logits = b.logits + 1;
  message = error_of(c);
  EXPECT_TRUE(contains(message, "logits is not aligned to the 2 bytes")) << message;
  c = good_call(b);
  c.dlogits = b.dlogits + 2;
  c.type = gs::dtype::float32;
  message = error_of(c);
  EXPECT_TRUE(contains(message, "dlogits is not aligned to the 4 bytes")) << message;
  c = good_call(b);
  c.targets =
      reinterpret_cast<std::int32_t const*>(reinterpret_cast<unsigned char const*>(b.targets) + 2);
  message = error_of(c);
  EXPECT_TRUE(contains(message, "targets is not aligned to the 4 bytes")) << message;
  c = good_call(b);
  c.workspace = reinterpret_cast<unsigned char*>(b.workspace) + 1;
  message = error_of(c);
  EXPECT_TRUE(contains(message, "workspace is not 4-byte aligned")) << message;
  c = good_call(b);
  c.type = static_cast<gs::dtype>(5);
  message = error_of(c);
  EXPECT_TRUE(contains(message, "unknown dtype")) << message;
}

TEST(cross_entropy_arguments, refuses_bad_sizes) {
  fake_buffers b;
  for (go::cross_entropy_shape const& bad :
       {go::cross_entropy_shape{0, 7, 8}, go::cross_entropy_shape{3, -7, 8},
        go::cross_entropy_shape{3, 7, 0}}) {
    auto c = good_call(b);
    c.shape = bad;
    auto const message = error_of(c);
    EXPECT_TRUE(contains(message, "cross_entropy: sizes must be positive")) << message;
  }
  auto c = good_call(b);
  c.shape = {3, 9, 8};
  auto message = error_of(c);
  EXPECT_TRUE(contains(message, "padded_vocab=8 is less than vocab=9")) << message;
  c = good_call(b);
  c.shape = {std::int64_t{1} << 31, 7, 8};
  message = error_of(c);
  EXPECT_TRUE(contains(message, "too many for one launch")) << message;
}

TEST(cross_entropy_arguments, refuses_a_partial_overlap_of_logits_and_gradient) {
  fake_buffers b;
  auto c = good_call(b);
  c.dlogits = b.logits + 16;  // 8 elements into the 48 bytes of logits
  auto message = error_of(c);
  EXPECT_TRUE(contains(message, "dlogits overlaps logits without being logits")) << message;
  c.dlogits = b.logits + 48;  // right after the logits: apart
  c.workspace = nullptr;      // so that the call stops at the next check
  message = error_of(c);
  EXPECT_TRUE(contains(message, "workspace is a null pointer")) << message;
}

TEST(cross_entropy_arguments, refuses_too_little_workspace) {
  fake_buffers b;
  auto c = good_call(b);
  c.workspace_bytes = 11;
  auto const message = error_of(c);
  EXPECT_TRUE(contains(message, "the workspace has 11 bytes, too little for 3 rows")) << message;
  EXPECT_TRUE(contains(message, "cross_entropy_workspace_size() = 12 bytes")) << message;
}

TEST(cross_entropy_arguments, workspace_size_is_one_float_a_row) {
  EXPECT_EQ((go::cross_entropy_problem{{3, 7, 8}}).workspace_bytes(), 12U);
  EXPECT_EQ((go::cross_entropy_problem{{16384, 50257, 50304}}).workspace_bytes(), 16384U * 4U);
  auto const message = message_of([] {
    static_cast<void>(go::cross_entropy_problem{{0, 50257, 50304}}.workspace_bytes());
  });
  EXPECT_TRUE(contains(message, "cross_entropy_workspace_size: sizes must be positive")) << message;
}

// The spans must hold what {rows=3, padded_vocab=8} reads or writes: 24 logits and gradients of
// the logits' type, 3 int32 targets, one fp32 loss.
TEST(cross_entropy_arguments, refuses_spans_too_short_or_of_another_type) {
  fake_buffers b;
  auto c = good_call(b);
  c.logit_count = 23;
  auto message = error_of(c);
  EXPECT_TRUE(contains(message, "cross_entropy: dlogits is 23 bfloat16")) << message;
  EXPECT_TRUE(contains(message, "the sizes need 24 elements")) << message;
  c = good_call(b);
  c.target_count = 2;
  message = error_of(c);
  EXPECT_TRUE(contains(message, "cross_entropy: targets is 2 int32")) << message;
  c = good_call(b);
  c.target_type = gs::dtype::float32;
  message = error_of(c);
  EXPECT_TRUE(contains(message, "targets is 3 float32")) << message;
  EXPECT_TRUE(contains(message, "it must hold int32")) << message;
  c = good_call(b);
  c.type = gs::dtype::uint8;
  message = error_of(c);
  EXPECT_TRUE(contains(message, "cross_entropy: logits is uint8; it takes float32")) << message;
}

TEST(cross_entropy_arguments, valid_operands_pass_apart_or_in_place) {
  fake_buffers b;
  call apart = good_call(b);
  EXPECT_EQ(checked_type(apart), gs::dtype::bfloat16);
  call in_place = good_call(b);
  in_place.dlogits = b.logits;
  EXPECT_EQ(checked_type(in_place), gs::dtype::bfloat16);
}
