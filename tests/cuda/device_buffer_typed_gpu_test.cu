// Typed device buffers of a pool: checked copies, refusal of host copies inside a capture,
// refilling between replays, and a release ordered after uses on other streams.

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/tensor.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/gpu_test.hpp"

namespace gs = graphstep;

namespace {

__global__ void double_kernel(float* y, float const* x, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0F * x[i];
}

class buffer_test : public gs::testing::gpu_test {};

// Elements of a float buffer half as large as what a new pool maps at its first growth, so that
// two such buffers fill it and a third allocation of that size must take a freed one.
std::int64_t half_a_growth(gs::cuda::stream_view stream) {
  gs::memory::memory_pool probe;
  probe.deallocate(probe.allocate(sizeof(float), stream), stream);
  return static_cast<std::int64_t>(probe.statistics().mapped_bytes / 2 / sizeof(float));
}

using gs::testing::message_of;

}  // namespace

TEST_F(buffer_test, copies_check_size_and_type) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  gs::cuda::device_buffer input{{"input", {4, 8}, gs::dtype::float32}, stream, pool};
  EXPECT_EQ(input.size(), 128U);
  ASSERT_TRUE(input.spec().has_value());
  EXPECT_EQ(*input.spec(), (gs::tensor_spec{"input", {4, 8}, gs::dtype::float32}));
  EXPECT_EQ(input.view(), (gs::device_span{input.data(), gs::dtype::float32, 32}));
  EXPECT_EQ(input.tensor().data(), input.data());
  EXPECT_EQ(input.tensor().spec(), *input.spec());
  std::vector<float> const values(32, 1.5F);
  input.copy_from_host(values, stream);
  EXPECT_EQ(input.to_host(stream), values);
  EXPECT_NE(message_of([&] {
              input.copy_from_host(std::vector<float>(31), stream);
            }).find("124 bytes for a 'input' [4, 8] float32 buffer of 128 bytes"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              input.copy_from_host(values.data(), 128, gs::dtype::float16, stream);
            }).find("float16 data for a 'input' [4, 8] float32 buffer"),
            std::string::npos);
  gs::cuda::device_buffer other{{"other", {32}, gs::dtype::float32}, stream, pool};
  other.copy_from(input, stream);
  EXPECT_EQ(other.to_host(stream), values);
  gs::cuda::device_buffer copy{{"copy", {4, 8}, gs::dtype::float32}, stream, pool};
  copy.copy_from_device(other.view(), stream);
  EXPECT_EQ(copy.to_host(stream), values);
  EXPECT_NE(message_of([&] {
              copy.copy_from_device(other.view().subspan(0, 31), stream);
            }).find("copy_from_device: 124 bytes for a 'copy' [4, 8] float32 buffer of 128 bytes"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              copy.copy_from_device({nullptr, gs::dtype::float32, 32}, stream);
            }).find("copy_from_device: the source is null"),
            std::string::npos);
  gs::cuda::device_buffer moved = std::move(other);
  EXPECT_THROW(other.copy_from(input, stream), gs::usage_error);  // NOLINT: moved-from
  EXPECT_NE(message_of([&] {
              gs::cuda::device_buffer({"empty", {0, 4}, gs::dtype::float32}, stream, pool);
            }).find("device_buffer: 'empty' [0, 4] float32 holds no element"),
            std::string::npos);
}

TEST_F(buffer_test, host_copies_inside_a_capture_are_refused_and_refills_work_between_replays) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  int const n = 1000;
  gs::cuda::device_buffer x{{"x", {n}, gs::dtype::float32}, stream, pool};
  gs::cuda::device_buffer y{{"y", {n}, gs::dtype::float32}, stream, pool};
  std::vector<float> batch(n, 1.0F);
  gs::graphs::graph_exec g;
  EXPECT_NE(message_of([&] {
              gs::graphs::capture(g, stream, [&] { x.copy_from_host(batch, stream); });
            }).find("refill static inputs between replays"),
            std::string::npos);
  gs::graphs::graph_exec step;
  gs::graphs::capture(step, stream, [&] {
    double_kernel<<<(n + 255) / 256, 256, 0, stream.get()>>>(
        static_cast<float*>(y.data()), static_cast<float const*>(x.data()), n);
  });
  for (float value : {1.0F, 2.0F, 3.0F}) {
    std::fill(batch.begin(), batch.end(), value);
    x.copy_from_host(batch, stream);
    step.replay(stream);
    EXPECT_EQ(y.to_host(stream), std::vector<float>(n, 2.0F * value));
  }
}

// A buffer made from bytes has no type: its copies check the bytes alone, and it has no view.
TEST_F(buffer_test, an_untyped_buffer_checks_bytes_and_has_no_view) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  gs::cuda::device_buffer bytes{64, stream, pool};
  EXPECT_FALSE(bytes.spec().has_value());
  std::vector<std::uint16_t> const halves(32, 0x3C00);
  bytes.copy_from_host(halves.data(), 64, gs::dtype::bfloat16, stream);
  std::vector<std::uint16_t> back(32);
  bytes.copy_to_host(back.data(), 64, gs::dtype::float16, stream);
  stream.synchronize();
  EXPECT_EQ(back, halves);
  EXPECT_NE(message_of([&] {
              bytes.copy_from_host(halves.data(), 62, gs::dtype::bfloat16, stream);
            }).find("62 bytes for an untyped buffer of 64 bytes"),
            std::string::npos);
  EXPECT_NE(message_of([&] { (void)bytes.view(); }).find("has no element type"), std::string::npos);
  EXPECT_NE(message_of([&] { (void)bytes.tensor(); }).find("is no tensor"), std::string::npos);
}

// The block goes back in stream order on the buffer's stream, after the buffer's own copies on
// other streams: whoever takes it next on a third stream is ordered after both. The race
// checker of the simulated device reports the third stream's write otherwise.
TEST_F(buffer_test, the_release_waits_for_copies_on_other_streams) {
  gs::testing::queued_work const queued;
  gs::cuda::stream stream;
  gs::cuda::stream copier;
  gs::cuda::stream third;
  gs::memory::memory_pool pool;
  std::int64_t const n = half_a_growth(stream);
  gs::cuda::device_buffer source{{"source", {n}, gs::dtype::float32}, stream, pool};
  source.copy_from_host(std::vector<float>(static_cast<std::size_t>(n), 3.0F), stream);
  stream.synchronize();
  auto buffer = std::make_unique<gs::cuda::device_buffer>(gs::tensor_spec{{n}, gs::dtype::float32},
                                                          stream, pool);
  void* const address = buffer->data();
  buffer->copy_from(source, copier);
  buffer.reset();
  void* taken = pool.allocate(sizeof(float) * static_cast<std::size_t>(n), third);
  ASSERT_EQ(taken, address);  // the same block, or the test shows nothing
  GRAPHSTEP_CUDA_TRY(
      cudaMemsetAsync(taken, 0, sizeof(float) * static_cast<std::size_t>(n), third.get()));
  third.synchronize();
  pool.deallocate(taken, third);
}

// Work the buffer cannot see — a kernel on another stream — is ordered before the release by
// naming its stream after it.
TEST_F(buffer_test, a_recorded_use_on_another_stream_orders_the_release) {
  gs::testing::queued_work const queued;
  gs::cuda::stream stream;
  gs::cuda::stream worker;
  gs::cuda::stream third;
  gs::memory::memory_pool pool;
  std::int64_t const n = half_a_growth(stream);
  gs::cuda::device_buffer x{{"x", {n}, gs::dtype::float32}, stream, pool};
  x.copy_from_host(std::vector<float>(static_cast<std::size_t>(n), 1.0F), stream);
  stream.synchronize();
  auto y = std::make_unique<gs::cuda::device_buffer>(gs::tensor_spec{{n}, gs::dtype::float32},
                                                     stream, pool);
  void* const address = y->data();
  auto const count = static_cast<int>(n);
  double_kernel<<<(count + 255) / 256, 256, 0, worker.get()>>>(
      static_cast<float*>(y->data()), static_cast<float const*>(x.data()), count);
  y->record_use(worker);
  y.reset();
  void* taken = pool.allocate(sizeof(float) * static_cast<std::size_t>(n), third);
  ASSERT_EQ(taken, address);
  GRAPHSTEP_CUDA_TRY(
      cudaMemsetAsync(taken, 0, sizeof(float) * static_cast<std::size_t>(n), third.get()));
  third.synchronize();
  pool.deallocate(taken, third);
  worker.synchronize();
}

// The release moves to another stream before the buffer's own stream is destroyed.
TEST_F(buffer_test, the_release_moves_to_another_stream) {
  gs::memory::memory_pool pool;
  gs::cuda::stream lasting;
  std::unique_ptr<gs::cuda::device_buffer> buffer;
  {
    gs::cuda::stream brief;
    buffer = std::make_unique<gs::cuda::device_buffer>(gs::tensor_spec{{256}, gs::dtype::float32},
                                                       brief, pool);
    buffer->copy_from_host(std::vector<float>(256, 2.0F), brief);
    brief.synchronize();
    buffer->set_stream(lasting);
  }
  EXPECT_EQ(buffer->stream(), gs::cuda::stream_view{lasting});
  EXPECT_EQ(buffer->to_host(lasting), std::vector<float>(256, 2.0F));
  auto const in_use = pool.statistics().bytes_in_use;
  buffer.reset();
  EXPECT_LT(pool.statistics().bytes_in_use, in_use);
  gs::cuda::device_buffer moved{{"moved", {4}, gs::dtype::float32}, lasting, pool};
  gs::cuda::device_buffer into = std::move(moved);
  EXPECT_NE(message_of([&] { moved.record_use(lasting); }).find("moved from"),  // NOLINT
            std::string::npos);
}
