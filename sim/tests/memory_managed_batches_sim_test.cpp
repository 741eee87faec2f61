// Discarded managed memory on the simulated device: its contents become indeterminate as the
// header says, visibly (0xFF bytes, a NaN in every floating-point format, as fresh memory), and
// the discard is a write to the race checker, which reports an unordered access beside it.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <graphstep/sim/race_report.hpp>
#include <graphstep/sim/sim.hpp>
#include <string>
#include <vector>

#include "sim_test.hpp"

namespace gs = graphstep;

namespace {

class managed_batches_sim : public ::testing::Test {
 protected:
  void SetUp() override {
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaMallocManaged(reinterpret_cast<void**>(&memory_), bytes));
    SIM_TEST_TRY(cudaMalloc(reinterpret_cast<void**>(&device_), bytes));
  }
  void TearDown() override {
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    SIM_TEST_EXPECT_SUCCESS(cudaFree(memory_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(device_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(a_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(b_));
  }
  [[nodiscard]] std::vector<std::string> new_races() const { return races_.found(); }
  static constexpr std::size_t bytes = 4096;
  cudaStream_t a_{};
  cudaStream_t b_{};
  unsigned char* memory_{};
  unsigned char* device_{};
  gs::sim::race_report races_;  // later tests stop at their first race again
};

}  // namespace

TEST_F(managed_batches_sim, a_discarded_range_reads_as_fresh_memory) {
  for (std::size_t i = 0; i < bytes; ++i) memory_[i] = 1;
  void* pointers[] = {memory_ + 1024};
  std::size_t sizes[] = {1024};
  SIM_TEST_TRY(cudaMemDiscardBatchAsync(pointers, sizes, 1, 0, a_));
  SIM_TEST_TRY(cudaStreamSynchronize(a_));
  EXPECT_EQ(memory_[1023], 1);
  EXPECT_EQ(memory_[1024], 0xFF);
  EXPECT_EQ(memory_[2047], 0xFF);
  EXPECT_EQ(memory_[2048], 1);
}

// A planted race: a discard on one stream and a copy of the range on another, unordered; its
// ordered twin (an event between them) is not reported.
TEST_F(managed_batches_sim, a_discard_races_with_an_unordered_read) {
  void* pointers[] = {memory_};
  std::size_t sizes[] = {bytes};
  SIM_TEST_TRY(cudaMemDiscardBatchAsync(pointers, sizes, 1, 0, a_));
  SIM_TEST_TRY(cudaMemcpyAsync(device_, memory_, bytes, cudaMemcpyDefault, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("cudaMemDiscardBatchAsync"), std::string::npos) << found[0];
  SIM_TEST_TRY(cudaDeviceSynchronize());
  gs::sim::race_report const twin;  // the races found from here on
  cudaEvent_t discarded = nullptr;
  SIM_TEST_TRY(cudaEventCreateWithFlags(&discarded, cudaEventDisableTiming));
  SIM_TEST_TRY(cudaMemDiscardBatchAsync(pointers, sizes, 1, 0, a_));
  SIM_TEST_TRY(cudaEventRecord(discarded, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, discarded, 0));
  SIM_TEST_TRY(cudaMemcpyAsync(device_, memory_, bytes, cudaMemcpyDefault, b_));
  EXPECT_TRUE(twin.found().empty());
  SIM_TEST_TRY(cudaEventDestroy(discarded));
}
