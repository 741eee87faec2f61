// The simulated device's stream-race checker: unordered conflicting accesses from two streams
// are reported with both operations; every way CUDA orders work (stream order, events, host
// synchronization, the legacy stream) makes them ordered.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "sim_test.hpp"
#include <graphstep/sim/race_report.hpp>
#include <graphstep/sim/sim.hpp>
#include <string>
#include <vector>

#include "sim_test_kernels.cuh"

namespace gs = graphstep;

namespace {

__global__ void write_kernel(float* x, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = 1.0F;
}

class race_checker : public ::testing::Test {
 protected:
  void SetUp() override {
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaMalloc(&x_, bytes));
    SIM_TEST_TRY(cudaMalloc(&y_, bytes));
  }
  void TearDown() override {
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    SIM_TEST_EXPECT_SUCCESS(cudaFree(x_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(y_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(a_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(b_));
  }
  [[nodiscard]] std::vector<std::string> new_races() const { return races_.found(); }

  static constexpr int n = 1024;
  static constexpr std::size_t bytes = sizeof(float) * n;
  cudaStream_t a_{};
  cudaStream_t b_{};
  float* x_{};
  float* y_{};
  gs::sim::race_report races_;  // later tests stop at their first race again
};

TEST_F(race_checker, two_streams_writing_the_same_bytes_unordered_race) {
  SIM_TEST_TRY(cudaMemsetAsync(x_, 0, bytes, a_));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("memset of 4096 bytes"), std::string::npos) << found[0];
  EXPECT_NE(found[0].find("not ordered before"), std::string::npos) << found[0];
}

TEST_F(race_checker, an_event_wait_orders_the_second_stream_after_the_first) {
  cudaEvent_t done{};
  SIM_TEST_TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 0, bytes, a_));
  SIM_TEST_TRY(cudaEventRecord(done, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, done, 0));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, b_));
  EXPECT_TRUE(new_races().empty());
  SIM_TEST_TRY(cudaEventDestroy(done));
}

TEST_F(race_checker, an_event_recorded_before_the_write_does_not_order_it) {
  cudaEvent_t early{};
  SIM_TEST_TRY(cudaEventCreateWithFlags(&early, cudaEventDisableTiming));
  SIM_TEST_TRY(cudaEventRecord(early, a_));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 0, bytes, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, early, 0));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, b_));
  EXPECT_EQ(new_races().size(), 1U);
  SIM_TEST_TRY(cudaEventDestroy(early));
}

TEST_F(race_checker, host_synchronization_orders_later_work) {
  SIM_TEST_TRY(cudaMemsetAsync(x_, 0, bytes, a_));
  SIM_TEST_TRY(cudaStreamSynchronize(a_));
  SIM_TEST_TRY(cudaMemsetAsync(x_, 1, bytes, b_));
  EXPECT_TRUE(new_races().empty());
}

TEST_F(race_checker, disjoint_ranges_and_concurrent_reads_do_not_race) {
  SIM_TEST_TRY(cudaMemsetAsync(x_, 0, bytes / 2, a_));
  SIM_TEST_TRY(cudaMemsetAsync(x_ + n / 2, 1, bytes / 2, b_));
  SIM_TEST_TRY(cudaDeviceSynchronize());
  std::vector<float> host(n);
  sim_testing::copy_kernel<<<n / 256, 256, 0, a_>>>(x_, y_, n);
  SIM_TEST_TRY(cudaMemcpyAsync(host.data(), x_, bytes, cudaMemcpyDeviceToHost, b_));
  EXPECT_TRUE(new_races().empty());
}

TEST_F(race_checker, a_kernel_and_a_copy_of_its_output_on_another_stream_race) {
  write_kernel<<<n / 256, 256, 0, a_>>>(x_, n);
  SIM_TEST_TRY(cudaMemcpyAsync(y_, x_, bytes, cudaMemcpyDeviceToDevice, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("write_kernel"), std::string::npos) << found[0];
  EXPECT_NE(found[0].find("memcpy"), std::string::npos) << found[0];
}

TEST_F(race_checker, the_legacy_stream_orders_blocking_streams_but_not_non_blocking_ones) {
  cudaStream_t blocking{};
  SIM_TEST_TRY(cudaStreamCreate(&blocking));
  write_kernel<<<n / 256, 256, 0, blocking>>>(x_, n);
  SIM_TEST_TRY(cudaMemsetAsync(x_, 0, bytes, cudaStreamLegacy));
  EXPECT_TRUE(new_races().empty()) << "the legacy stream waits for blocking streams";
  SIM_TEST_TRY(cudaDeviceSynchronize());
  write_kernel<<<n / 256, 256, 0, a_>>>(x_, n);  // a_ is non-blocking
  SIM_TEST_TRY(cudaMemsetAsync(x_, 0, bytes, cudaStreamLegacy));
  EXPECT_EQ(new_races().size(), 1U) << "a non-blocking stream does not wait for the legacy one";
  SIM_TEST_TRY(cudaStreamDestroy(blocking));
}

// A stream-ordered allocator's one rule: a block freed on stream A may serve stream B only once
// A's work up to the free is known to be done. A free list that skips that wait is caught.
class free_list {
 public:
  explicit free_list(bool wait_for_the_freeing_stream) : wait_{wait_for_the_freeing_stream} {
    SIM_TEST_TRY(cudaEventCreateWithFlags(&freed_, cudaEventDisableTiming));
  }
  free_list(free_list const&) = delete;
  free_list& operator=(free_list const&) = delete;
  ~free_list() { SIM_TEST_EXPECT_SUCCESS(cudaEventDestroy(freed_)); }
  void release(float* block, cudaStream_t stream) {
    block_ = block;
    SIM_TEST_TRY(cudaEventRecord(freed_, stream));
  }
  float* acquire(cudaStream_t stream) {
    if (wait_) SIM_TEST_TRY(cudaStreamWaitEvent(stream, freed_, 0));
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
