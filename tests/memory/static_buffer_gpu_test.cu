// Static buffers: checked copies, refusal of host copies inside a capture, and refilling
// between replays.

#include <graphstep/graphstep.hpp>
#include <graphstep/memory/static_buffer.hpp>
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

using gs::testing::message_of;

}  // namespace

TEST_F(buffer_test, copies_check_size_and_type) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  gs::memory::static_buffer input{pool, {4, 8}, gs::dtype::float32, stream};
  EXPECT_EQ(input.size(), 32U);
  EXPECT_EQ(input.bytes(), 128U);
  std::vector<float> const values(32, 1.5F);
  input.copy_from_host(values, stream);
  EXPECT_EQ(input.to_host(stream), values);
  EXPECT_NE(message_of([&] {
              input.copy_from_host(std::vector<float>(31), stream);
            }).find("124 bytes for a [4, 8] float32 buffer of 128 bytes"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              input.copy_from_host(values.data(), 128, gs::dtype::float16, stream);
            }).find("float16 data for a [4, 8] float32 buffer"),
            std::string::npos);
  gs::memory::static_buffer other{pool, {32}, gs::dtype::float32, stream};
  other.copy_from(input, stream);
  EXPECT_EQ(other.to_host(stream), values);
  gs::memory::static_buffer moved = std::move(other);
  EXPECT_THROW(other.copy_from(input, stream), gs::usage_error);  // NOLINT: moved-from
  EXPECT_THROW(gs::memory::static_buffer(pool, {0, 4}, gs::dtype::float32, stream),
               gs::usage_error);
}

TEST_F(buffer_test, host_copies_inside_a_capture_are_refused_and_refills_work_between_replays) {
  gs::cuda::stream stream;
  gs::memory::memory_pool pool;
  int const n = 1000;
  gs::memory::static_buffer x{pool, {n}, gs::dtype::float32, stream};
  gs::memory::static_buffer y{pool, {n}, gs::dtype::float32, stream};
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

TEST_F(buffer_test, a_buffer_keeps_the_pool_memory_alive) {
  gs::cuda::stream stream;
  auto pool = std::make_unique<gs::memory::memory_pool>();
  gs::memory::static_buffer kept{*pool, {256}, gs::dtype::float32, stream};
  pool.reset();
  kept.copy_from_host(std::vector<float>(256, 4.0F), stream);
  EXPECT_EQ(kept.to_host(stream), std::vector<float>(256, 4.0F));
}
