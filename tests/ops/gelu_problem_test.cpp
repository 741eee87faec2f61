// gelu_problem and bias_gradient_problem (ops/gelu_problem.hpp): the checks that the unfused
// bias + GELU, GELU backward and bias gradient launchers of ops/gelu.hpp make before any CUDA
// call, and the bias gradient's workspace for a given SM count. The pointers are fake addresses,
// never touched.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/gelu_problem.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/error_message.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
using gs::testing::contains;
using gs::testing::message_of;

namespace {

// A fake device address `offset` bytes past a 256-byte boundary.
void* fake(std::uintptr_t slot, std::uintptr_t offset = 0) {
  return reinterpret_cast<void*>(0x100000 + slot * 0x1000 +
                                 offset);  // NOLINT(performance-no-int-to-ptr)
}

constexpr std::int64_t m = 4;
constexpr std::int64_t n = 96;
auto const bf16 = gs::dtype::bfloat16;

gs::device_span matrix(std::uintptr_t slot, gs::dtype type = gs::dtype::bfloat16,
                       std::size_t count = m * n) {
  return {fake(slot), type, count};
}

template <typename Call>
void expect_refused(Call const& call, std::vector<std::string> const& words) {
  std::string const message = message_of([&] { call(); });
  for (auto const& word : words) {
    EXPECT_TRUE(contains(message, word)) << "\"" << word << "\" not in: " << message;
  }
}

}  // namespace

TEST(bias_gelu_arguments, valid_operands_pass_with_or_without_bias_and_saved_input) {
  go::gelu_problem const problem{m, n};
  for (auto type : {gs::dtype::float32, gs::dtype::float16, gs::dtype::bfloat16}) {
    EXPECT_EQ(problem.check_forward(matrix(1, type), matrix(2, type), {fake(3), type, n}), type);
    EXPECT_EQ(problem.check_forward(matrix(1, type), {}, {}), type);
  }
}

TEST(bias_gelu_arguments, each_operand_is_checked_by_name) {
  go::gelu_problem const problem{m, n};
  auto const forward = [&](gs::device_span y, gs::device_span pre, gs::device_span bias) {
    return [=] { static_cast<void>(problem.check_forward(y, pre, bias)); };
  };
  expect_refused(forward({}, {}, {}), {"bias_gelu: y holds no element"});
  expect_refused(forward(matrix(1, bf16, m * n - 1), {}, {}),
                 {"bias_gelu: y is 383 bfloat16", "the sizes need 384 elements"});
  expect_refused(forward(matrix(1), {nullptr, bf16, m * n}, {}),
                 {"bias_gelu: pre_activation is a null pointer"});
  expect_refused(forward(matrix(1), matrix(2, gs::dtype::float16), {}),
                 {"bias_gelu: pre_activation", "it must hold bfloat16"});
  expect_refused(forward(matrix(1), {}, {fake(3), bf16, n - 1}),
                 {"bias_gelu: bias is 95 bfloat16", "need 96"});
  expect_refused(forward(matrix(1), {}, {fake(3, 1), bf16, n}), {"bias_gelu: bias", "not aligned"});
  expect_refused(forward(matrix(1, gs::dtype::int32), {}, {}),
                 {"bias_gelu: y is int32; it takes float32"});
  for (auto const& [rows, columns] : {std::pair<std::int64_t, std::int64_t>{0, n}, {m, -1}}) {
    expect_refused(
        [&] {
          static_cast<void>(go::gelu_problem{rows, columns}.check_forward(matrix(1), {}, {}));
        },
        {"bias_gelu", "sizes must be positive"});
  }
}

TEST(gelu_backward_arguments, each_operand_is_checked_by_name) {
  go::gelu_problem const problem{m, n};
  EXPECT_EQ(problem.check_backward(matrix(1), matrix(1), matrix(2)), bf16);  // dz may be dy
  auto const backward = [&](gs::device_span dz, gs::device_span dy, gs::device_span pre) {
    return [=] { static_cast<void>(problem.check_backward(dz, dy, pre)); };
  };
  expect_refused(backward(matrix(1), matrix(2), {}),
                 {"gelu_backward: pre_activation holds no element"});
  expect_refused(backward({nullptr, bf16, m * n}, matrix(2), matrix(3)),
                 {"gelu_backward: dz is a null pointer"});
  expect_refused(backward(matrix(1), matrix(2, gs::dtype::float32), matrix(3)),
                 {"gelu_backward: dz", "it must hold float32"});
  expect_refused(backward(matrix(1), matrix(2), matrix(3, bf16, 10)),
                 {"gelu_backward: pre_activation is 10 bfloat16", "need 384"});
  expect_refused(
      [] {
        static_cast<void>(go::gelu_problem{m, 0}.check_backward(matrix(1), matrix(2), matrix(3)));
      },
      {"gelu_backward", "sizes must be positive"});
}

TEST(bias_gradient_arguments, operands_and_workspace_are_checked) {
  go::bias_gradient_problem const problem{m, n};
  gs::device_span const db{fake(1), bf16, n};
  EXPECT_EQ(problem.check(db, matrix(2), nullptr, 0), bf16);
  EXPECT_EQ(problem.check(db, matrix(2), fake(3), 4096), bf16);
  auto const check = [&](gs::device_span bias, gs::device_span dz, void* workspace,
                         std::size_t bytes) {
    return [=] { static_cast<void>(problem.check(bias, dz, workspace, bytes)); };
  };
  expect_refused(check({}, matrix(2), nullptr, 0), {"bias_gradient: db holds no element"});
  expect_refused(check(db, matrix(2, bf16, 100), nullptr, 0),
                 {"bias_gradient: dz is 100 bfloat16", "need 384"});
  expect_refused(check({fake(1), gs::dtype::float16, n}, matrix(2), nullptr, 0),
                 {"bias_gradient: db", "it must hold bfloat16"});
  expect_refused(check(db, matrix(2), nullptr, 64),
                 {"bias_gradient", "workspace size was given without a workspace pointer"});
  expect_refused(check(db, matrix(2), fake(3, 2), 64),
                 {"bias_gradient", "workspace must be 4-byte aligned"});
  expect_refused(
      [&] {
        static_cast<void>(go::bias_gradient_problem{-1, n}.check(db, matrix(2), nullptr, 0));
      },
      {"bias_gradient", "sizes must be positive"});
  // Grid x holds 2^31 - 1 tiles of at least 32 columns.
  std::int64_t const wide = std::int64_t{1} << 37;
  auto const columns = static_cast<std::size_t>(wide);
  expect_refused(
      [&] {
        static_cast<void>(go::bias_gradient_problem{1, wide}.check(
            {fake(1), bf16, columns}, {fake(2), bf16, columns}, nullptr, 0));
      },
      {"bias_gradient: N=137438953472 is too wide for one launch"});
}

// (2 × SMs × 64 + N) fp32 values: what the sliced pass needs for any M.
TEST(bias_gradient_arguments, workspace_grows_with_the_sm_count_and_n) {
  EXPECT_EQ((go::bias_gradient_problem{0, 1024}).workspace_bytes(132),
            (2U * 132U * 64U + 1024U) * 4U);
  EXPECT_EQ((go::bias_gradient_problem{0, 1}).workspace_bytes(1), (2U * 64U + 1U) * 4U);
  EXPECT_EQ((go::bias_gradient_problem{0, 1}).workspace_bytes(0),
            (2U * 64U + 1U) * 4U);  // at least one SM
  for (std::int64_t const bad : {0, -4}) {
    std::string const message = message_of([&] {
      static_cast<void>(go::bias_gradient_problem{8, bad}.workspace_bytes(132));
    });
    EXPECT_TRUE(contains(message, "bias_gradient_workspace_size: N must be positive")) << message;
  }
}
