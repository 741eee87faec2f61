// attention_problem's checks for the plain attention kernels (ops/attention_problem.hpp), which
// the launchers of ops/attention.hpp call before any CUDA call: the pointers here are addresses
// that are never dereferenced, far apart so that only the tests about overlap make buffers
// overlap.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/attention_problem.hpp>
#include <string>

#include "common/error_message.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
using gs::testing::contains;
using gs::testing::message_of;

namespace {

// An address that is never dereferenced: the checks only compare and align it.
void* fake(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr)
}
float* fake_floats(std::uintptr_t address) {
  return static_cast<float*>(fake(address));
}

constexpr std::uintptr_t gigabyte = std::uintptr_t{1} << 30;

struct fake_buffers {
  void* qkv = fake(1 * gigabyte);
  void* out = fake(2 * gigabyte);
  float* logsumexp = fake_floats(3 * gigabyte);
  void* dout = fake(4 * gigabyte);
  void* dqkv = fake(5 * gigabyte);
  void* workspace = fake(6 * gigabyte);
};

go::attention_shape const small{2, 16, 3, 64};

// More elements than any shape below needs (a fake address is never read): these tests are
// about the pointers and sizes; `spans_too_short_*` about the counts.
constexpr std::size_t plenty = std::size_t{1} << 24;

std::string forward_error(fake_buffers const& f, go::attention_shape const& shape,
                          gs::dtype type = gs::dtype::bfloat16) {
  return message_of([&] {
    static_cast<void>(go::attention_problem{shape}.check_forward(
        {f.out, type, plenty}, {f.logsumexp, gs::dtype::float32, plenty}, {f.qkv, type, plenty}));
  });
}

std::string backward_error(fake_buffers const& f, go::attention_shape const& shape,
                           std::size_t workspace_bytes, gs::dtype type = gs::dtype::bfloat16) {
  return message_of([&] {
    static_cast<void>(go::attention_problem{shape}.check_backward(
        {f.dqkv, type, plenty}, {f.dout, type, plenty}, {f.qkv, type, plenty},
        {f.out, type, plenty}, {f.logsumexp, gs::dtype::float32, plenty}, f.workspace,
        workspace_bytes));
  });
}

std::size_t enough(go::attention_shape const& shape) {
  return go::attention_problem{shape}.backward_workspace_bytes();
}

}  // namespace

TEST(attention_arguments, workspace_size_is_one_float_per_batch_head_and_position) {
  EXPECT_EQ((go::attention_problem{{2, 16, 3, 64}}).backward_workspace_bytes(), 2U * 3U * 16U * 4U);
  EXPECT_EQ((go::attention_problem{{16, 1024, 12, 64}}).backward_workspace_bytes(),
            16U * 12U * 1024U * 4U);
  for (auto const& bad : {go::attention_shape{0, 16, 3, 64}, go::attention_shape{2, -1, 3, 64},
                          go::attention_shape{2, 16, 0, 64}}) {
    EXPECT_TRUE(contains(message_of([&] {
                           static_cast<void>(go::attention_problem{bad}.backward_workspace_bytes());
                         }),
                         "sizes must be positive"));
  }
}

TEST(attention_arguments, non_positive_sizes_are_refused) {
  fake_buffers const f;
  for (auto const& bad : {go::attention_shape{0, 16, 3, 64}, go::attention_shape{2, 0, 3, 64},
                          go::attention_shape{2, 16, -3, 64}, go::attention_shape{2, 16, 3, 0},
                          go::attention_shape{-1, 16, 3, 64}}) {
    EXPECT_TRUE(contains(forward_error(f, bad), "sizes must be positive"));
    EXPECT_TRUE(contains(backward_error(f, bad, 1 << 20), "sizes must be positive"));
  }
}

TEST(attention_arguments, head_dimensions_the_kernels_do_not_take_are_refused) {
  fake_buffers const f;
  for (std::int64_t d : {4, 12, 60, 100, 264, 512}) {
    go::attention_shape const shape{1, 8, 2, d};
    auto const forward = forward_error(f, shape);
    EXPECT_TRUE(contains(forward, "head_dim " + std::to_string(d))) << forward;
    EXPECT_TRUE(contains(forward, "multiple of 8, at most 256")) << forward;
    EXPECT_TRUE(contains(backward_error(f, shape, 1 << 20), "multiple of 8, at most 256"));
  }
}

TEST(attention_arguments, shapes_beyond_one_launch_are_refused) {
  fake_buffers const f;
  auto const long_sequence = forward_error(f, {1, 524281, 1, 64});
  EXPECT_TRUE(contains(long_sequence, "longer than one launch holds")) << long_sequence;
  auto const many_heads = forward_error(f, {std::int64_t{1} << 20, 8, std::int64_t{1} << 12, 64});
  EXPECT_TRUE(contains(many_heads, "batch·heads")) << many_heads;
}

TEST(attention_arguments, an_unknown_dtype_is_refused) {
  fake_buffers const f;
  auto const bad = static_cast<gs::dtype>(7);
  EXPECT_TRUE(contains(forward_error(f, small, bad), "unknown dtype (7)"));
  EXPECT_TRUE(contains(backward_error(f, small, enough(small), bad), "unknown dtype (7)"));
  EXPECT_TRUE(contains(forward_error(f, small, gs::dtype::int32),
                       "causal_attention_forward: qkv is int32; it takes float32, float16 or "
                       "bfloat16"));
}

TEST(attention_arguments, null_pointers_are_named) {
  fake_buffers const base;
  auto forward_without = [&](auto change, char const* name) {
    fake_buffers f = base;
    change(f);
    auto const message = forward_error(f, small);
    EXPECT_TRUE(contains(message, std::string{name} + " is a null pointer")) << message;
  };
  forward_without([](fake_buffers& f) { f.qkv = nullptr; }, "qkv");
  forward_without([](fake_buffers& f) { f.out = nullptr; }, "out");
  forward_without([](fake_buffers& f) { f.logsumexp = nullptr; }, "logsumexp");

  auto backward_without = [&](auto change, char const* name) {
    fake_buffers f = base;
    change(f);
    auto const message = backward_error(f, small, enough(small));
    EXPECT_TRUE(contains(message, std::string{name} + " is a null pointer")) << message;
  };
  backward_without([](fake_buffers& f) { f.dqkv = nullptr; }, "dqkv");
  backward_without([](fake_buffers& f) { f.dout = nullptr; }, "dout");
  backward_without([](fake_buffers& f) { f.qkv = nullptr; }, "qkv");
  backward_without([](fake_buffers& f) { f.out = nullptr; }, "out");
  backward_without([](fake_buffers& f) { f.logsumexp = nullptr; }, "logsumexp");
  backward_without([](fake_buffers& f) { f.workspace = nullptr; }, "workspace");
}

TEST(attention_arguments, misaligned_pointers_are_refused) {
  fake_buffers const base;
  // Element-aligned but not 16-byte aligned matrices: the kernels move 16 bytes at a time.
  auto shifted = [](void* p, std::uintptr_t bytes) {
    return fake(reinterpret_cast<std::uintptr_t>(p) + bytes);
  };
  {
    fake_buffers f = base;
    f.qkv = shifted(f.qkv, 2);
    EXPECT_TRUE(contains(forward_error(f, small), "qkv is not 16-byte aligned"));
  }
  {
    fake_buffers f = base;
    f.out = shifted(f.out, 8);
    EXPECT_TRUE(
        contains(forward_error(f, small, gs::dtype::float32), "out is not 16-byte aligned"));
  }
  {
    fake_buffers f = base;
    f.logsumexp = fake_floats(3 * gigabyte + 2);
    EXPECT_TRUE(contains(forward_error(f, small), "logsumexp is not aligned to the 4 bytes"));
    EXPECT_TRUE(
        contains(backward_error(f, small, enough(small)), "logsumexp is not aligned to the 4"));
  }
  {
    fake_buffers f = base;
    f.dout = shifted(f.dout, 4);
    EXPECT_TRUE(contains(backward_error(f, small, enough(small)), "dout is not 16-byte aligned"));
  }
  {
    fake_buffers f = base;
    f.dqkv = shifted(f.dqkv, 2);
    EXPECT_TRUE(contains(backward_error(f, small, enough(small)), "dqkv is not 16-byte aligned"));
  }
  {
    fake_buffers f = base;
    f.workspace = shifted(f.workspace, 2);
    EXPECT_TRUE(
        contains(backward_error(f, small, enough(small)), "workspace is not 4-byte aligned"));
  }
}

TEST(attention_arguments, too_little_workspace_is_refused) {
  fake_buffers const f;
  auto const message = backward_error(f, small, enough(small) - 4);
  EXPECT_TRUE(contains(message, "too small")) << message;
  EXPECT_TRUE(contains(message, "needs " + std::to_string(enough(small)))) << message;
  EXPECT_TRUE(contains(backward_error(f, small, 0), "too small"));
}

TEST(attention_arguments, overlapping_buffers_are_refused) {
  fake_buffers const base;
  {
    fake_buffers f = base;
    f.out = f.qkv;  // the forward would overwrite its own input
    EXPECT_TRUE(contains(forward_error(f, small), "must not overlap"));
  }
  {
    fake_buffers f = base;  // logsumexp inside the last rows of qkv
    f.logsumexp = fake_floats(1 * gigabyte + 1024);
    EXPECT_TRUE(contains(forward_error(f, small), "must not overlap"));
  }
  {
    fake_buffers f = base;
    f.dqkv = f.qkv;  // dq is written while other blocks still read q, k and v
    EXPECT_TRUE(contains(backward_error(f, small, enough(small)), "dqkv must not overlap"));
  }
  {
    fake_buffers f = base;
    f.dqkv = f.dout;
    EXPECT_TRUE(contains(backward_error(f, small, enough(small)), "dqkv must not overlap"));
  }
  {
    fake_buffers f = base;
    f.workspace = f.out;
    EXPECT_TRUE(contains(backward_error(f, small, enough(small)), "workspace must not overlap"));
  }
}

// {B=2, T=16, H=3, D=64}: qkv and dqkv hold 32·576 = 18432 elements, out and dout 32·192 = 6144,
// logsumexp 2·3·16 = 96 fp32; a span short of that, or of another type, is refused by name.
TEST(attention_arguments, spans_too_short_or_of_another_type_are_refused) {
  fake_buffers const f;
  auto const bf16 = gs::dtype::bfloat16;
  auto const forward = [&](std::size_t out, std::size_t lse, std::size_t qkv,
                           gs::dtype lse_type = gs::dtype::float32) {
    return message_of([&] {
      static_cast<void>(go::attention_problem{small}.check_forward(
          {f.out, bf16, out}, {f.logsumexp, lse_type, lse}, {f.qkv, bf16, qkv}));
    });
  };
  auto message = forward(6144, 96, 18431);
  EXPECT_TRUE(contains(message, "causal_attention_forward: qkv is 18431 bfloat16")) << message;
  EXPECT_TRUE(contains(message, "the sizes need 18432 elements")) << message;
  message = forward(6143, 96, 18432);
  EXPECT_TRUE(contains(message, "out is 6143 bfloat16")) << message;
  message = forward(6144, 95, 18432);
  EXPECT_TRUE(contains(message, "logsumexp is 95 float32")) << message;
  message = forward(6144, 96, 18432, bf16);
  EXPECT_TRUE(contains(message, "logsumexp is 96 bfloat16")) << message;
  EXPECT_TRUE(contains(message, "it must hold float32")) << message;
  message = message_of([&] {
    static_cast<void>(go::attention_problem{small}.check_backward(
        {f.dqkv, bf16, 18432}, {f.dout, gs::dtype::float16, 6144}, {f.qkv, bf16, 18432},
        {f.out, bf16, 6144}, {f.logsumexp, gs::dtype::float32, 96}, f.workspace, enough(small)));
  });
  EXPECT_TRUE(contains(message, "causal_attention_backward: dout is 6144 float16")) << message;
}

TEST(attention_arguments, valid_operands_pass_and_name_their_type) {
  fake_buffers const f;
  for (auto type : {gs::dtype::float32, gs::dtype::float16, gs::dtype::bfloat16}) {
    go::attention_problem const problem{small};
    EXPECT_EQ(
        problem.check_forward({f.out, type, plenty}, {f.logsumexp, gs::dtype::float32, plenty},
                              {f.qkv, type, plenty}),
        type);
    EXPECT_EQ(problem.check_backward({f.dqkv, type, plenty}, {f.dout, type, plenty},
                                     {f.qkv, type, plenty}, {f.out, type, plenty},
                                     {f.logsumexp, gs::dtype::float32, plenty}, f.workspace,
                                     enough(small)),
              type);
  }
}
