// The memory pool under the simulated device's stream-race checker, which sees every byte each
// kernel writes: a block given back on one stream and asked for on another is never written by
// the second stream while the first may still be writing it.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/sim/race_report.hpp>

namespace gs = graphstep;

namespace {

__global__ void write_kernel(float* x, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = 1.0F;
}

class pool_races : public ::testing::Test {
 protected:
  static constexpr int n = 1024;
  static constexpr std::size_t bytes = sizeof(float) * n;
  gs::sim::race_report races_;
};

TEST_F(pool_races, the_memory_pool_reuses_a_block_across_streams_without_a_race) {
  gs::cuda::stream first;
  gs::cuda::stream second;
  gs::memory::memory_pool pool;
  auto* block = static_cast<float*>(pool.allocate(bytes, first));
  write_kernel<<<n / 256, 256, 0, first.get()>>>(block, n);
  pool.deallocate(block, first);
  auto* again = static_cast<float*>(pool.allocate(bytes, second));
  write_kernel<<<n / 256, 256, 0, second.get()>>>(again, n);
  EXPECT_TRUE(races_.found().empty());
  pool.deallocate(again, second);
  second.synchronize();
}

}  // namespace
