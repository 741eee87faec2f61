// attention_problem::check_cudnn (ops/attention_problem.hpp): what cuDNN's fused attention needs
// of the arguments alone, which cudnn_attention::can_implement checks before it looks for
// cuDNN or a device. Contract violations throw usage_error; cuDNN's own constraints (fp32 data,
// head dimensions, 16-byte alignment) come back as a support with the reason.

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/ops/attention_problem.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <string>
#include <utility>

#include "common/error_message.hpp"

namespace gs = graphstep;
namespace go = graphstep::ops;
using gs::testing::contains;
using gs::testing::message_of;

namespace {

// `span` moved to `address`: the same type and count somewhere else.
gs::device_span at_address(gs::device_span span, void* address) {
  return {address, span.type(), span.count()};
}

// More elements than any shape below needs: these operands are never read.
constexpr std::size_t plenty = std::size_t{1} << 24;

// Host memory whose addresses stand in for device pointers: check_cudnn() reads the
// addresses and never the memory.
struct fake_operands {
  alignas(256) std::array<unsigned char, 1024> storage{};

  [[nodiscard]] void* at(std::size_t offset) { return storage.data() + offset; }
  [[nodiscard]] go::cudnn_attention_operands operands(gs::dtype type = gs::dtype::bfloat16) {
    go::cudnn_attention_operands o;
    o.qkv = {at(0), type, plenty};
    o.out = {at(256), type, plenty};
    o.logsumexp = {at(512), gs::dtype::float32, plenty};
    o.dout = {at(768), type, plenty};
    o.dqkv = {at(896), type, plenty};
    return o;
  }
};

constexpr go::attention_shape small_shape{2, 16, 2, 64};

TEST(cudnn_attention_arguments, float32_data_is_refused_with_the_plain_path_named) {
  fake_operands fake;
  go::support const s =
      go::attention_problem{small_shape}.check_cudnn(fake.operands(gs::dtype::float32));
  EXPECT_FALSE(s.fused);
  EXPECT_TRUE(contains(s.reason, "bfloat16 or float16")) << s.reason;
  EXPECT_TRUE(contains(s.reason, "float32")) << s.reason;
  EXPECT_TRUE(contains(s.reason, "ops/attention.hpp")) << s.reason;
}

TEST(cudnn_attention_arguments, head_dims_off_multiples_of_8_or_above_256_are_refused) {
  fake_operands fake;
  for (std::int64_t const head_dim : {12, 4, 100, 264}) {
    go::attention_shape shape = small_shape;
    shape.head_dim = head_dim;
    go::support const s = go::attention_problem{shape}.check_cudnn(fake.operands());
    EXPECT_FALSE(s.fused) << head_dim;
    EXPECT_TRUE(contains(s.reason, "head_dim " + std::to_string(head_dim))) << s.reason;
    EXPECT_TRUE(contains(s.reason, "multiple of 8, at most 256")) << s.reason;
  }
}

TEST(cudnn_attention_arguments, each_operand_off_16_bytes_is_refused_by_name) {
  // The element alignment of each operand, short of 16 bytes.
  using member = std::pair<char const*, void (*)(go::cudnn_attention_operands&, void*)>;
  std::array<member, 5> const members{{
      {"qkv", [](go::cudnn_attention_operands& o, void* p) { o.qkv = at_address(o.qkv, p); }},
      {"out", [](go::cudnn_attention_operands& o, void* p) { o.out = at_address(o.out, p); }},
      {"logsumexp",
       [](go::cudnn_attention_operands& o, void* p) { o.logsumexp = at_address(o.logsumexp, p); }},
      {"dout", [](go::cudnn_attention_operands& o, void* p) { o.dout = at_address(o.dout, p); }},
      {"dqkv", [](go::cudnn_attention_operands& o, void* p) { o.dqkv = at_address(o.dqkv, p); }},
  }};
  fake_operands fake;
  for (auto const& [operand, set] : members) {
    for (std::size_t const offset : {std::size_t{2}, std::size_t{4}, std::size_t{8}}) {
      bool const statistics = std::string{operand} == "logsumexp";
      if (statistics && offset == 2) continue;  // not even an fp32 element: thrown, below
      go::cudnn_attention_operands o = fake.operands(gs::dtype::float16);
      set(o, fake.at(128 + offset));
      go::support const s = go::attention_problem{small_shape}.check_cudnn(o);
      EXPECT_FALSE(s.fused) << operand << " + " << offset;
      EXPECT_TRUE(contains(s.reason, std::string{": "} + operand + " at ")) << s.reason;
      EXPECT_TRUE(contains(s.reason, "16-byte aligned")) << s.reason;
    }
  }
  // A span off its own element is a contract violation, thrown before cuDNN's constraints.
  go::cudnn_attention_operands o = fake.operands(gs::dtype::float16);
  o.logsumexp = at_address(o.logsumexp, fake.at(130));
  std::string const what =
      message_of([&] { static_cast<void>(go::attention_problem{small_shape}.check_cudnn(o)); });
  EXPECT_TRUE(contains(what, "logsumexp is not aligned to the 4 bytes of its dtype float32"))
      << what;
}

TEST(cudnn_attention_arguments, contract_violations_throw_usage_error) {
  fake_operands fake;
  for (int size = 0; size < 4; ++size) {
    go::attention_shape shape = small_shape;
    std::array<std::int64_t*, 4> const sizes{&shape.batch, &shape.sequence, &shape.heads,
                                             &shape.head_dim};
    *sizes.at(static_cast<std::size_t>(size)) = size % 2 == 0 ? 0 : -3;
    std::string const what = message_of(
        [&] { static_cast<void>(go::attention_problem{shape}.check_cudnn(fake.operands())); });
    EXPECT_TRUE(contains(what, "must be positive")) << what;
  }
  go::cudnn_attention_operands no_out = fake.operands();
  no_out.out = {};
  std::string const missing = message_of(
      [&] { static_cast<void>(go::attention_problem{small_shape}.check_cudnn(no_out)); });
  EXPECT_TRUE(contains(missing, "out holds no element")) << missing;
  go::cudnn_attention_operands short_qkv = fake.operands();
  short_qkv.qkv = {fake.at(0), gs::dtype::bfloat16, 12287};  // [32, 3·2·64] holds 12288
  std::string const too_short = message_of(
      [&] { static_cast<void>(go::attention_problem{small_shape}.check_cudnn(short_qkv)); });
  EXPECT_TRUE(contains(too_short, "qkv is 12287 bfloat16")) << too_short;
  EXPECT_TRUE(contains(too_short, "the sizes need 12288 elements")) << too_short;
  go::cudnn_attention_operands half_backward = fake.operands();
  half_backward.dqkv = {};
  std::string const together = message_of(
      [&] { static_cast<void>(go::attention_problem{small_shape}.check_cudnn(half_backward)); });
  EXPECT_TRUE(contains(together, "dout and dqkv together")) << together;
}

TEST(cudnn_attention_arguments, outputs_sharing_memory_with_other_operands_throw_usage_error) {
  // B=1, T=4, H=1, D=8 in 16-bit: qkv and dqkv 192 bytes, out and dout 64, logsumexp 16; laid
  // out apart at 256-byte steps, then one output moved onto another operand.
  constexpr go::attention_shape tiny{1, 4, 1, 8};
  alignas(256) static std::array<unsigned char, 2048> storage{};
  auto const at = [](std::size_t offset) { return storage.data() + offset; };
  auto const apart = [&] {
    auto const bf16 = gs::dtype::bfloat16;
    go::cudnn_attention_operands o;
    o.qkv = {at(0), bf16, 96};
    o.out = {at(256), bf16, 32};
    o.logsumexp = {at(512), gs::dtype::float32, 4};
    o.dout = {at(768), bf16, 32};
    o.dqkv = {at(1024), bf16, 96};
    return o;
  };
  struct overlap {
    char const* expected;
    void (*move)(go::cudnn_attention_operands&);
  };
  std::array<overlap, 5> const cases{{
      {"out overlaps qkv",
       [](go::cudnn_attention_operands& o) {
         o.out = at_address(o.out, static_cast<unsigned char*>(o.qkv.data()) + 176);
       }},
      {"logsumexp overlaps out",
       [](go::cudnn_attention_operands& o) {
         o.logsumexp = at_address(o.logsumexp, static_cast<unsigned char*>(o.out.data()) + 48);
       }},
      {"dqkv overlaps dout",
       [](go::cudnn_attention_operands& o) { o.dqkv = at_address(o.dqkv, o.dout.data()); }},
      {"dqkv overlaps qkv",
       [](go::cudnn_attention_operands& o) { o.dqkv = at_address(o.dqkv, o.qkv.data()); }},
      {"dqkv overlaps logsumexp",
       [](go::cudnn_attention_operands& o) {
         o.dqkv = at_address(o.dqkv, static_cast<unsigned char*>(o.logsumexp.data()) - 176);
       }},
  }};
  for (auto const& [expected, move] : cases) {
    go::cudnn_attention_operands o = apart();
    move(o);
    std::string const what =
        message_of([&] { static_cast<void>(go::attention_problem{tiny}.check_cudnn(o)); });
    EXPECT_TRUE(contains(what, expected)) << what;
  }
}

TEST(cudnn_attention_arguments, a_valid_16_bit_layer_passes_and_is_described) {
  // B=1, T=4, H=1, D=8: qkv and dqkv 192 bytes, out and dout 64, logsumexp 16, 256 bytes apart.
  go::attention_problem const problem{{1, 4, 1, 8}};
  alignas(256) static std::array<unsigned char, 2048> storage{};
  for (auto type : {gs::dtype::float16, gs::dtype::bfloat16}) {
    go::cudnn_attention_operands o;
    o.qkv = {storage.data(), type, 96};
    o.out = {storage.data() + 256, type, 32};
    o.logsumexp = {storage.data() + 512, gs::dtype::float32, 4};
    o.dout = {storage.data() + 768, type, 32};
    o.dqkv = {storage.data() + 1024, type, 96};
    go::support const s = problem.check_cudnn(o);
    EXPECT_TRUE(s.fused) << s.reason;
    o.dout = {};
    o.dqkv = {};
    EXPECT_TRUE(problem.check_cudnn(o).fused);  // a forward-only layer
  }
  EXPECT_EQ(problem.cudnn_description(gs::dtype::bfloat16),
            "cuDNN attention (bfloat16, B=1 T=4 H=1 D=8)");
}

TEST(cudnn_attention_arguments, a_layer_too_large_to_index_is_refused) {
  fake_operands fake;
  go::attention_problem const huge{{std::int64_t{1} << 32, std::int64_t{1} << 16, 64, 256}};
  std::string const what =
      message_of([&] { static_cast<void>(huge.check_cudnn(fake.operands())); });
  EXPECT_TRUE(contains(what, "too large to index")) << what;
}

}  // namespace
