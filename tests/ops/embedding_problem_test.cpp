// embedding_problem (ops/embedding_problem.hpp): the checks the embedding launchers call before
// any CUDA call. The pointers are host addresses that no kernel ever sees.

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/embedding_problem.hpp>
#include <string>

#include "common/error_message.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
using gs::testing::contains;
using gs::testing::message_of;

namespace {

struct fake_buffers {
  alignas(16) std::array<unsigned char, 64> out_bytes{};
  alignas(16) std::array<unsigned char, 64> table_bytes{};
  alignas(16) std::array<unsigned char, 64> position_bytes{};
  alignas(16) std::array<std::int32_t, 4> token_ids{};
  unsigned char* out{out_bytes.data()};
  unsigned char* table{table_bytes.data()};
  unsigned char* positions{position_bytes.data()};
  std::int32_t* tokens{token_ids.data()};
};

go::embedding_shape const good{2, 3, 11, 8};

// More elements than any shape below needs: these tests are about the pointers and sizes.
constexpr std::size_t plenty = std::size_t{1} << 24;

// A span of `plenty` elements at a fake address (never touched: every call is refused).
gs::device_span span_at(void const* data, gs::dtype type) {
  return {const_cast<void*>(data), type, plenty};  // NOLINT(cppcoreguidelines-pro-type-const-cast)
}

std::string forward_error(void* out, std::int32_t const* tokens, void const* table,
                          void const* positions, go::embedding_shape const& shape,
                          gs::dtype type = gs::dtype::bfloat16) {
  return message_of([&] {
    static_cast<void>(go::embedding_problem{shape}.check_forward(
        span_at(out, type), span_at(tokens, gs::dtype::int32), span_at(table, type),
        span_at(positions, type)));
  });
}

std::string backward_error(void* token_gradient, void* position_gradient, void const* dout,
                           std::int32_t const* tokens, go::embedding_shape const& shape,
                           gs::dtype type = gs::dtype::bfloat16) {
  return message_of([&] {
    static_cast<void>(go::embedding_problem{shape}.check_backward(
        span_at(token_gradient, type), span_at(position_gradient, type), span_at(dout, type),
        span_at(tokens, gs::dtype::int32)));
  });
}

}  // namespace

TEST(embedding_arguments, forward_refuses_null_pointers) {
  fake_buffers b;
  auto message = forward_error(nullptr, b.tokens, b.table, b.positions, good);
  EXPECT_TRUE(contains(message, "embedding_forward: out is a null pointer")) << message;
  message = forward_error(b.out, nullptr, b.table, b.positions, good);
  EXPECT_TRUE(contains(message, "embedding_forward: tokens is a null pointer")) << message;
  message = forward_error(b.out, b.tokens, nullptr, b.positions, good);
  EXPECT_TRUE(contains(message, "embedding_forward: token_table is a null pointer")) << message;
  message = forward_error(b.out, b.tokens, b.table, nullptr, good);
  EXPECT_TRUE(contains(message, "embedding_forward: position_table is a null pointer")) << message;
}

TEST(embedding_arguments, forward_refuses_misaligned_pointers_and_unknown_types) {
  fake_buffers b;
  auto message = forward_error(b.out + 1, b.tokens, b.table, b.positions, good);
  EXPECT_TRUE(contains(message, "out is not aligned to the 2 bytes")) << message;
  message = forward_error(b.out, b.tokens, b.table + 2, b.positions, good, gs::dtype::float32);
  EXPECT_TRUE(contains(message, "token_table is not aligned to the 4 bytes")) << message;
  auto const* const odd_tokens =
      reinterpret_cast<std::int32_t const*>(reinterpret_cast<unsigned char const*>(b.tokens) + 2);
  message = forward_error(b.out, odd_tokens, b.table, b.positions, good);
  EXPECT_TRUE(contains(message, "tokens is not aligned to the 4 bytes")) << message;
  message = forward_error(b.out, b.tokens, b.table, b.positions, good, static_cast<gs::dtype>(9));
  EXPECT_TRUE(contains(message, "unknown dtype")) << message;
}

TEST(embedding_arguments, both_refuse_non_positive_and_too_large_sizes) {
  fake_buffers b;
  for (go::embedding_shape const& bad :
       {go::embedding_shape{0, 3, 11, 8}, go::embedding_shape{2, -1, 11, 8},
        go::embedding_shape{2, 3, 0, 8}, go::embedding_shape{2, 3, 11, 0}}) {
    auto message = forward_error(b.out, b.tokens, b.table, b.positions, bad);
    EXPECT_TRUE(contains(message, "embedding_forward: sizes must be positive")) << message;
    message = backward_error(b.table, b.positions, b.out, b.tokens, bad);
    EXPECT_TRUE(contains(message, "embedding_backward: sizes must be positive")) << message;
  }
  go::embedding_shape const too_many{std::int64_t{1} << 20, std::int64_t{1} << 11, 11, 8};
  auto message = forward_error(b.out, b.tokens, b.table, b.positions, too_many);
  EXPECT_TRUE(contains(message, "positions are too many")) << message;
  // Both factors large enough that their product would overflow 64 bits.
  go::embedding_shape const overflowing{std::int64_t{1} << 40, std::int64_t{1} << 40, 11, 8};
  message = backward_error(b.table, b.positions, b.out, b.tokens, overflowing);
  EXPECT_TRUE(contains(message, "positions are too many")) << message;
  go::embedding_shape const too_wide{2, 3, 11, std::int64_t{65535} * 256 + 1};
  message = backward_error(b.table, b.positions, b.out, b.tokens, too_wide);
  EXPECT_TRUE(contains(message, "channels=16776961 is too wide")) << message;
}

TEST(embedding_arguments, backward_refuses_null_and_misaligned_pointers) {
  fake_buffers b;
  auto message = backward_error(nullptr, b.positions, b.out, b.tokens, good);
  EXPECT_TRUE(contains(message, "embedding_backward: token_gradient is a null pointer")) << message;
  message = backward_error(b.table, nullptr, b.out, b.tokens, good);
  EXPECT_TRUE(contains(message, "embedding_backward: position_gradient is a null pointer"))
      << message;
  message = backward_error(b.table, b.positions, nullptr, b.tokens, good);
  EXPECT_TRUE(contains(message, "embedding_backward: dout is a null pointer")) << message;
  message = backward_error(b.table, b.positions, b.out, nullptr, good);
  EXPECT_TRUE(contains(message, "embedding_backward: tokens is a null pointer")) << message;
  message = backward_error(b.table, b.positions + 1, b.out, b.tokens, good, gs::dtype::float16);
  EXPECT_TRUE(contains(message, "position_gradient is not aligned to the 2 bytes")) << message;
  message = backward_error(b.table, b.positions, b.out + 2, b.tokens, good, gs::dtype::float32);
  EXPECT_TRUE(contains(message, "dout is not aligned to the 4 bytes")) << message;
}

// Each span must hold what the shape {B=2, T=3, vocab=11, C=8} reads or writes, in the table's
// type (ids in int32): out 48, tokens 6, token_table 88, position_table 24 elements.
TEST(embedding_arguments, spans_too_short_or_of_another_type_are_refused) {
  fake_buffers b;
  auto const bf16 = gs::dtype::bfloat16;
  auto const forward = [&](std::size_t out, std::size_t tokens, std::size_t table,
                           std::size_t positions, gs::dtype ids = gs::dtype::int32) {
    return message_of([&] {
      static_cast<void>(go::embedding_problem{good}.check_forward(
          {b.out, bf16, out}, {b.tokens, ids, tokens}, {b.table, bf16, table},
          {b.positions, bf16, positions}));
    });
  };
  auto message = forward(47, 6, 88, 24);
  EXPECT_TRUE(contains(message, "embedding_forward: out is 47 bfloat16")) << message;
  EXPECT_TRUE(contains(message, "the sizes need 48 elements")) << message;
  message = forward(48, 5, 88, 24);
  EXPECT_TRUE(contains(message, "tokens is 5 int32")) << message;
  message = forward(48, 6, 87, 24);
  EXPECT_TRUE(contains(message, "token_table is 87 bfloat16")) << message;
  message = forward(48, 6, 88, 23);
  EXPECT_TRUE(contains(message, "position_table is 23 bfloat16")) << message;
  message = forward(48, 6, 88, 24, gs::dtype::float32);
  EXPECT_TRUE(contains(message, "tokens is 6 float32")) << message;
  EXPECT_TRUE(contains(message, "it must hold int32")) << message;
  message = message_of([&] {
    static_cast<void>(go::embedding_problem{good}.check_backward(
        {b.table, bf16, 88}, {b.positions, gs::dtype::float16, 24}, {b.out, bf16, 48},
        {b.tokens, gs::dtype::int32, 6}));
  });
  EXPECT_TRUE(contains(message, "embedding_backward: position_gradient is 24 float16")) << message;
  EXPECT_TRUE(contains(message, "it must hold bfloat16")) << message;
}

TEST(embedding_arguments, valid_operands_pass_and_name_their_type) {
  fake_buffers b;
  go::embedding_problem const problem{good};
  auto const fp16 = gs::dtype::float16;
  EXPECT_EQ(problem.check_forward({b.out, fp16, 48}, {b.tokens, gs::dtype::int32, 6},
                                  {b.table, fp16, 88}, {b.positions, fp16, 24}),
            fp16);
  EXPECT_EQ(problem.check_backward({b.table, fp16, 88}, {b.positions, fp16, 24}, {b.out, fp16, 48},
                                   {b.tokens, gs::dtype::int32, 6}),
            fp16);
}
