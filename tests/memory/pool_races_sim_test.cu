// The memory pool under the simulated device's stream-race checker, which sees every byte each
// kernel writes: a block given back on one stream and asked for on another is never written by
// the second stream while the first may still be writing it.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/sim/sim.hpp>
#include <string>
#include <vector>

namespace gs = graphstep;

namespace {

__global__ void write_kernel(float* x, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = 1.0F;
}

class pool_races : public ::testing::Test {
 protected:
  void SetUp() override {
    mode_before_ = gs::sim::current_race_mode();
    gs::sim::set_race_mode(gs::sim::race_mode::report);
    already_ = gs::sim::races().size();
  }
  void TearDown() override { gs::sim::set_race_mode(mode_before_); }
  // Races are found when work runs: queued work (deferred execution) runs first.
  [[nodiscard]] std::vector<std::string> new_races() const {
    gs::sim::advance(gs::sim::queued_operations());
    auto all = gs::sim::races();
    return {all.begin() + static_cast<std::ptrdiff_t>(already_), all.end()};
  }

  static constexpr int n = 1024;
  static constexpr std::size_t bytes = sizeof(float) * n;
  std::size_t already_{};
  gs::sim::race_mode mode_before_{};
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
  EXPECT_TRUE(new_races().empty());
  pool.deallocate(again, second);
  second.synchronize();
}

}  // namespace
