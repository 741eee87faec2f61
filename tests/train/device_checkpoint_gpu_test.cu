// Device tensors into a checkpoint and back: bytes kept exactly for each dtype through a file,
// and every refusal (a null or misaligned pointer, a capturing stream, another layout) leaves
// the device memory as it was.

#include <cstdint>
#include <cstdio>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <graphstep/parameter_layout.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/device_checkpoint.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;
namespace gt = graphstep::train;
using gs::testing::message_of;

namespace {

class device_checkpoint_test : public gs::testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
  }
  std::vector<std::uint8_t> bytes_at(void const* device, std::size_t bytes) {
    return gs::testing::copy_to_host(static_cast<std::uint8_t const*>(device), bytes, *stream_);
  }
  std::optional<gs::cuda::stream> stream_;
};

}  // namespace

TEST_F(device_checkpoint_test, tensors_of_each_dtype_come_back_bit_for_bit_through_a_file) {
  std::vector<gs::dtype> const types{gs::dtype::float32, gs::dtype::float16, gs::dtype::bfloat16};
  std::vector<std::int64_t> const shape{3, 5};
  std::size_t const elements = 15;
  gt::checkpoint saved;
  std::vector<std::vector<std::uint8_t>> written;
  std::vector<gs::cuda::device_buffer> sources;
  for (std::size_t t = 0; t < types.size(); ++t) {
    std::size_t const bytes = elements * gs::size_in_bytes(types[t]);
    std::vector<std::uint8_t> pattern(bytes);
    for (std::size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<std::uint8_t>(i * 7 + t);
    sources.emplace_back(bytes, *stream_);
    gs::testing::copy_to_device(sources.back().data(), pattern.data(), bytes);
    gt::add_device_tensor(saved, {sources.back().data(), {gs::name(types[t]), shape, types[t]}},
                          *stream_);
    written.push_back(pattern);
  }
  std::string const path = ::testing::TempDir() + "device_checkpoint_test.ckpt";
  saved.save(path);
  auto const loaded = gt::checkpoint::load(path);
  std::remove(path.c_str());
  for (std::size_t t = 0; t < types.size(); ++t) {
    gs::cuda::device_buffer target{written[t].size(), *stream_};
    gt::load_device_tensor(loaded, {target.data(), {gs::name(types[t]), shape, types[t]}},
                           *stream_);
    EXPECT_EQ(bytes_at(target.data(), written[t].size()), written[t]) << gs::name(types[t]);
  }
}

TEST_F(device_checkpoint_test, refusals_say_what_is_wrong_and_copy_nothing) {
  gs::cuda::device_buffer memory{64, *stream_};
  std::vector<std::uint8_t> const zeros(64, 0);
  gs::testing::copy_to_device(memory.data(), zeros.data(), zeros.size());
  gt::checkpoint saved;
  std::vector<std::uint8_t> ones(16 * 4, 0xFF);
  saved.add_tensor({"weights", {16}, gs::dtype::float32}, ones);

  auto const weights = [&](std::vector<std::int64_t> shape) {
    return gs::tensor_view{memory.data(), {"weights", std::move(shape), gs::dtype::float32}};
  };
  // A view made without a spec: no name, and a null pointer.
  EXPECT_NE(message_of([&] {
              gt::add_device_tensor(saved, gs::tensor_view{}, *stream_);
            }).find("has no name"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              gt::load_device_tensor(
                  saved, gs::tensor_view{memory.data(), {{16}, gs::dtype::float32}}, *stream_);
            }).find("has no name"),
            std::string::npos);
  std::string const other_shape =
      message_of([&] { gt::load_device_tensor(saved, weights({8}), *stream_); });
  EXPECT_NE(other_shape.find("float32 [16] in the checkpoint"), std::string::npos) << other_shape;
  EXPECT_NE(message_of([&] {
              gt::load_device_tensor(saved, {memory.data(), {"bias", {16}, gs::dtype::float32}},
                                     *stream_);
            }).find("no tensor \"bias\""),
            std::string::npos);

  gs::graphs::graph_exec refused;
  std::string const in_capture = message_of([&] {
    gs::graphs::capture(refused, *stream_,
                        [&] { gt::load_device_tensor(saved, weights({16}), *stream_); });
  });
  EXPECT_NE(in_capture.find("copy between replays"), std::string::npos) << in_capture;
  EXPECT_EQ(bytes_at(memory.data(), 64), zeros) << "a refused load copies nothing";
}

// A model's weights by its parameter layout: one file entry per tensor, of its dtype and shape,
// and back into the slots, the gaps between them untouched.
TEST_F(device_checkpoint_test, a_parameter_layout_saves_every_tensor_and_loads_it_into_its_slot) {
  gs::parameter_layout layout{128};
  layout.add({"fc weight", {3, 7}, gs::dtype::bfloat16});
  layout.add({"fc bias", {7}, gs::dtype::float16}, 1);
  layout.add({"scale", {1}, gs::dtype::float32}, 1);
  std::size_t const bytes = layout.buffer_bytes();
  std::vector<std::uint8_t> pattern(bytes);
  for (std::size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<std::uint8_t>(i * 13 + 1);
  gs::memory::parameter_buffer const weights{layout, *stream_};
  gs::testing::copy_to_device(weights.data(), pattern.data(), bytes);
  gt::checkpoint saved;
  gt::add_device_tensors(saved, "model", weights, *stream_);
  gt::checkpoint_entry const& bias = saved.tensor({"model/fc bias", {7}, gs::dtype::float16});
  std::size_t const bias_offset = layout.at("fc bias").byte_offset();
  EXPECT_EQ(bias.bytes, std::vector<std::uint8_t>(pattern.begin() + bias_offset,
                                                  pattern.begin() + bias_offset + 14));
  EXPECT_NE(message_of([&] {
              gt::add_device_tensors(saved, "model", weights, *stream_);
            }).find("already"),
            std::string::npos);

  std::vector<std::uint8_t> const fill(bytes, 0xAB);
  gs::memory::parameter_buffer const target{layout, *stream_};
  gs::testing::copy_to_device(target.data(), fill.data(), bytes);
  gt::load_device_tensors(saved, "model", target, *stream_);
  std::vector<std::uint8_t> const loaded = bytes_at(target.data(), bytes);
  for (std::size_t t = 0; t < layout.size(); ++t) {
    gs::parameter_slot const& slot = layout.at(t);
    std::size_t const first = slot.byte_offset();
    for (std::size_t i = first; i < layout.bytes_through(t); ++i) {
      ASSERT_EQ(loaded[i], i < first + slot.spec.bytes() ? pattern[i] : 0xAB)
          << slot.spec.name() << ", byte " << i - first;
    }
  }
}

TEST_F(device_checkpoint_test, a_checkpoint_of_another_layout_is_refused_naming_the_tensor) {
  gs::parameter_layout saved_layout{128};
  saved_layout.add({"weight", {4, 4}, gs::dtype::float32});
  saved_layout.add({"bias", {4}, gs::dtype::float32});
  gs::memory::parameter_buffer const weights{saved_layout, *stream_};
  std::vector<std::uint8_t> const ones(saved_layout.buffer_bytes(), 1);
  gs::testing::copy_to_device(weights.data(), ones.data(), ones.size());
  gt::checkpoint saved;
  gt::add_device_tensors(saved, "model", weights, *stream_);

  gs::parameter_layout wider{128};
  wider.add({"weight", {4, 4}, gs::dtype::float32});
  wider.add({"bias", {8}, gs::dtype::float32});
  gs::memory::parameter_buffer target{wider, *stream_};
  std::vector<std::uint8_t> const zeros(wider.buffer_bytes(), 0);
  gs::testing::copy_to_device(target.data(), zeros.data(), zeros.size());
  std::string const message =
      message_of([&] { gt::load_device_tensors(saved, "model", target, *stream_); });
  EXPECT_NE(message.find("model/bias"), std::string::npos) << message;
  EXPECT_NE(message.find("float32 [4] in the checkpoint"), std::string::npos) << message;
  EXPECT_EQ(bytes_at(target.data(), zeros.size()), zeros)
      << "the weight matched, but nothing may be copied before every tensor is checked";
  gs::memory::parameter_buffer const moved{std::move(target)};
  EXPECT_NE(message_of([&] {
              // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
              gt::load_device_tensors(saved, "model", target, *stream_);
            }).find("moved from"),
            std::string::npos);
}
