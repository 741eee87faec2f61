// The simulated device's stream-race checker: unordered conflicting accesses from two streams
// are reported with both operations; every way CUDA orders work (stream order, events, host
// synchronization, the legacy stream) makes them ordered.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/sim/sim.hpp>
#include <string>
#include <vector>

#include "common/test_kernels.cuh"

namespace gs = graphstep;

namespace {

__global__ void write_kernel(float* x, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = 1.0F;
}

class race_checker : public ::testing::Test {
 protected:
  void SetUp() override {
    mode_before_ = gs::sim::current_race_mode();
    gs::sim::set_race_mode(gs::sim::race_mode::report);
    already_ = gs::sim::races().size();
    GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking));
    GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking));
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&x_, bytes));
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&y_, bytes));
  }
  void TearDown() override {
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaDeviceSynchronize());
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(x_));
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(y_));
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaStreamDestroy(a_));
    GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaStreamDestroy(b_));
    gs::sim::set_race_mode(mode_before_);  // later tests stop at their first race again
  }
  // Races are found when work runs: queued work (deferred execution) runs first, with no host
  // synchronization that would order it.
  [[nodiscard]] std::vector<std::string> new_races() const {
    gs::sim::advance(gs::sim::queued_operations());
    auto all = gs::sim::races();
    return {all.begin() + static_cast<std::ptrdiff_t>(already_), all.end()};
  }

  static constexpr int n = 1024;
  static constexpr std::size_t bytes = sizeof(float) * n;
  cudaStream_t a_{};
  cudaStream_t b_{};
  float* x_{};
  float* y_{};
  std::size_t already_{};
  gs::sim::race_mode mode_before_{};
};

TEST_F(race_checker, two_streams_writing_the_same_bytes_unordered_race) {
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 0, bytes, a_));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 1, bytes, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("memset of 4096 bytes"), std::string::npos) << found[0];
  EXPECT_NE(found[0].find("not ordered before"), std::string::npos) << found[0];
}

TEST_F(race_checker, an_event_wait_orders_the_second_stream_after_the_first) {
  cudaEvent_t done{};
  GRAPHSTEP_CUDA_TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 0, bytes, a_));
  GRAPHSTEP_CUDA_TRY(cudaEventRecord(done, a_));
  GRAPHSTEP_CUDA_TRY(cudaStreamWaitEvent(b_, done, 0));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 1, bytes, b_));
  EXPECT_TRUE(new_races().empty());
  GRAPHSTEP_CUDA_TRY(cudaEventDestroy(done));
}

TEST_F(race_checker, an_event_recorded_before_the_write_does_not_order_it) {
  cudaEvent_t early{};
  GRAPHSTEP_CUDA_TRY(cudaEventCreateWithFlags(&early, cudaEventDisableTiming));
  GRAPHSTEP_CUDA_TRY(cudaEventRecord(early, a_));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 0, bytes, a_));
  GRAPHSTEP_CUDA_TRY(cudaStreamWaitEvent(b_, early, 0));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 1, bytes, b_));
  EXPECT_EQ(new_races().size(), 1U);
  GRAPHSTEP_CUDA_TRY(cudaEventDestroy(early));
}

TEST_F(race_checker, host_synchronization_orders_later_work) {
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 0, bytes, a_));
  GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(a_));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 1, bytes, b_));
  EXPECT_TRUE(new_races().empty());
}

TEST_F(race_checker, disjoint_ranges_and_concurrent_reads_do_not_race) {
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 0, bytes / 2, a_));
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_ + n / 2, 1, bytes / 2, b_));
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  std::vector<float> host(n);
  gs::testing::copy_kernel<<<n / 256, 256, 0, a_>>>(x_, y_, n);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), x_, bytes, cudaMemcpyDeviceToHost, b_));
  EXPECT_TRUE(new_races().empty());
}

TEST_F(race_checker, a_kernel_and_a_copy_of_its_output_on_another_stream_race) {
  write_kernel<<<n / 256, 256, 0, a_>>>(x_, n);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(y_, x_, bytes, cudaMemcpyDeviceToDevice, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("write_kernel"), std::string::npos) << found[0];
  EXPECT_NE(found[0].find("memcpy"), std::string::npos) << found[0];
}

TEST_F(race_checker, the_legacy_stream_orders_blocking_streams_but_not_non_blocking_ones) {
  cudaStream_t blocking{};
  GRAPHSTEP_CUDA_TRY(cudaStreamCreate(&blocking));
  write_kernel<<<n / 256, 256, 0, blocking>>>(x_, n);
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 0, bytes, cudaStreamLegacy));
  EXPECT_TRUE(new_races().empty()) << "the legacy stream waits for blocking streams";
  GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  write_kernel<<<n / 256, 256, 0, a_>>>(x_, n);  // a_ is non-blocking
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(x_, 0, bytes, cudaStreamLegacy));
  EXPECT_EQ(new_races().size(), 1U) << "a non-blocking stream does not wait for the legacy one";
  GRAPHSTEP_CUDA_TRY(cudaStreamDestroy(blocking));
}

// A stream-ordered allocator's one rule: a block freed on stream A may serve stream B only once
// A's work up to the free is known to be done. A free list that skips that wait is caught.
class free_list {
 public:
  explicit free_list(bool wait_for_the_freeing_stream) : wait_{wait_for_the_freeing_stream} {
    GRAPHSTEP_CUDA_TRY(cudaEventCreateWithFlags(&freed_, cudaEventDisableTiming));
  }
  free_list(free_list const&) = delete;
  free_list& operator=(free_list const&) = delete;
  ~free_list() { GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaEventDestroy(freed_)); }
  void release(float* block, cudaStream_t stream) {
    block_ = block;
    GRAPHSTEP_CUDA_TRY(cudaEventRecord(freed_, stream));
  }
  float* acquire(cudaStream_t stream) {
    if (wait_) GRAPHSTEP_CUDA_TRY(cudaStreamWaitEvent(stream, freed_, 0));
    return block_;
  }

 private:
  bool wait_;
  cudaEvent_t freed_{};
  float* block_{};
};

TEST_F(race_checker, a_free_list_that_skips_the_event_wait_is_caught) {
  free_list planted{false};
  write_kernel<<<n / 256, 256, 0, a_>>>(x_, n);
  planted.release(x_, a_);
  float* reused = planted.acquire(b_);
  write_kernel<<<n / 256, 256, 0, b_>>>(reused, n);
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("write_kernel"), std::string::npos) << found[0];
}

TEST_F(race_checker, the_same_free_list_with_the_event_wait_is_ordered) {
  free_list ordered{true};
  write_kernel<<<n / 256, 256, 0, a_>>>(x_, n);
  ordered.release(x_, a_);
  float* reused = ordered.acquire(b_);
  write_kernel<<<n / 256, 256, 0, b_>>>(reused, n);
  EXPECT_TRUE(new_races().empty());
}

TEST_F(race_checker, the_memory_pool_reuses_a_block_across_streams_without_a_race) {
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

TEST(race_checker_abort, the_default_mode_ends_the_process_at_the_first_race) {
  EXPECT_DEATH(
      {
        gs::sim::set_race_mode(gs::sim::race_mode::abort);
        cudaStream_t a{};
        cudaStream_t b{};
        float* x{};
        static_cast<void>(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
        static_cast<void>(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
        static_cast<void>(cudaMalloc(&x, 64));
        static_cast<void>(cudaMemsetAsync(x, 0, 64, a));
        static_cast<void>(cudaMemsetAsync(x, 0, 64, b));
        gs::sim::advance(gs::sim::queued_operations());
      },
      "stream race on device memory");
}

}  // namespace
