// 2-D copies and memsets and peer copies on the simulated device beyond what a GPU shows: the
// race checker sees each row they touch (and not the padding between rows), and memory a GPU
// would not check (a span past its allocation, memory of another device) is refused.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "sim_test.hpp"
#include <graphstep/sim/sim.hpp>
#include <string>
#include <vector>

namespace gs = graphstep;

namespace {

class pitched_copies_sim : public ::testing::Test {
 protected:
  void SetUp() override {
    mode_before_ = gs::sim::current_race_mode();
    gs::sim::set_race_mode(gs::sim::race_mode::report);
    already_ = gs::sim::races().size();
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaMalloc(reinterpret_cast<void**>(&x_), bytes));
    SIM_TEST_TRY(cudaMalloc(reinterpret_cast<void**>(&y_), bytes));
  }
  void TearDown() override {
    SIM_TEST_EXPECT_SUCCESS(cudaDeviceSynchronize());
    SIM_TEST_EXPECT_SUCCESS(cudaFree(x_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(y_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(a_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(b_));
    gs::sim::set_race_mode(mode_before_);
  }
  // Races are found when work runs: queued work (deferred execution) runs first.
  [[nodiscard]] std::vector<std::string> new_races() const {
    gs::sim::advance(gs::sim::queued_operations());
    auto all = gs::sim::races();
    return {all.begin() + static_cast<std::ptrdiff_t>(already_), all.end()};
  }

  // Four rows of 64 bytes, 256 bytes apart.
  static constexpr std::size_t bytes = 1024;
  static constexpr std::size_t pitch = 256;
  static constexpr std::size_t width = 64;
  static constexpr std::size_t height = 4;
  cudaStream_t a_{};
  cudaStream_t b_{};
  unsigned char* x_{};
  unsigned char* y_{};
  std::size_t already_{};
  gs::sim::race_mode mode_before_{};
};

}  // namespace

// A planted race: a 2-D copy into x on one stream, a memset of a byte in its last row on another,
// unordered. The report names the 2-D copy.
TEST_F(pitched_copies_sim, a_2d_copy_races_with_an_unordered_write_to_one_of_its_rows) {
  SIM_TEST_TRY(
      cudaMemcpy2DAsync(x_, pitch, y_, pitch, width, height, cudaMemcpyDeviceToDevice, a_));
  SIM_TEST_TRY(cudaMemsetAsync(x_ + 3 * pitch + width - 1, 0, 1, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("2-D memcpy of 4 rows of 64 bytes"), std::string::npos) << found[0];
}

// The same copy and a write to the padding between its rows, or a read of its source, do not
// race: the copy touches only its rows, and reads its source.
TEST_F(pitched_copies_sim, the_padding_between_rows_and_a_concurrent_read_do_not_race) {
  SIM_TEST_TRY(
      cudaMemcpy2DAsync(x_, pitch, y_, pitch, width, height, cudaMemcpyDeviceToDevice, a_));
  SIM_TEST_TRY(cudaMemsetAsync(x_ + width, 0, pitch - width, b_));
  std::vector<unsigned char> host(width);
  SIM_TEST_TRY(cudaMemcpyAsync(host.data(), y_, width, cudaMemcpyDeviceToHost, b_));
  EXPECT_TRUE(new_races().empty());
}

// A 2-D memset's rows race with an unordered 2-D copy reading them: one report a row, each
// naming both operations.
TEST_F(pitched_copies_sim, a_2d_memset_races_with_an_unordered_2d_copy_of_its_rows) {
  SIM_TEST_TRY(cudaMemset2DAsync(y_, pitch, 1, width, height, a_));
  SIM_TEST_TRY(
      cudaMemcpy2DAsync(x_, pitch, y_, pitch, width, height, cudaMemcpyDeviceToDevice, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), height);
  for (std::string const& race : found) {
    EXPECT_NE(race.find("memset of 64 bytes"), std::string::npos) << race;
    EXPECT_NE(race.find("2-D memcpy of 4 rows of 64 bytes"), std::string::npos) << race;
  }
}

// A span that leaves its allocation is refused (cudaErrorInvalidValue), on either side of a copy
// and for a memset; a GPU may not notice when the memory past it is mapped.
TEST_F(pitched_copies_sim, a_span_past_its_allocation_is_refused) {
  EXPECT_EQ(
      cudaMemcpy2DAsync(x_, pitch, y_, pitch, width, height + 1, cudaMemcpyDeviceToDevice, a_),
      cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaMemcpy2DAsync(x_ + pitch, pitch, y_, pitch, width, height, cudaMemcpyDeviceToDevice, a_),
      cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2DAsync(x_ + 1, pitch, 0, pitch, height, a_), cudaErrorInvalidValue);
  // A pitch so large that the span overflows.
  EXPECT_EQ(cudaMemset2DAsync(x_, SIZE_MAX / 2, 0, width, height, a_), cudaErrorInvalidValue);
  // Past the device's largest pitch (cudaDeviceProp::memPitch).
  cudaDeviceProp properties{};
  SIM_TEST_TRY(cudaGetDeviceProperties(&properties, 0));
  EXPECT_EQ(cudaMemcpy2DAsync(x_, properties.memPitch + 1, y_, pitch, width, 1,
                              cudaMemcpyDeviceToDevice, a_),
            cudaErrorInvalidPitchValue);
  static_cast<void>(cudaGetLastError());
}

// Peer copies name each pointer's device: memory of another device than the one named, or
// host memory, is cudaErrorInvalidValue; a range past the allocation too.
TEST_F(pitched_copies_sim, a_peer_copy_refuses_memory_not_on_the_named_device) {
  int current = 0;
  SIM_TEST_TRY(cudaGetDevice(&current));
  int count = 0;
  SIM_TEST_TRY(cudaGetDeviceCount(&count));
  std::vector<unsigned char> host(64);
  EXPECT_EQ(cudaMemcpyPeer(x_, current, host.data(), current, 64), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyPeerAsync(x_, current, y_, current, bytes + 1, a_), cudaErrorInvalidValue);
  if (count > 1) {
    int const peer = current == 0 ? 1 : 0;
    EXPECT_EQ(cudaMemcpyPeer(x_, peer, y_, current, 64), cudaErrorInvalidValue);
    EXPECT_EQ(cudaMemcpyPeerAsync(x_, current, y_, peer, 64, a_), cudaErrorInvalidValue);
  }
  static_cast<void>(cudaGetLastError());
}

// cudaMemcpyPeer is "serialized with respect all pending and future asynchronous work" of the
// devices: refused while one of them is capturing, as a device synchronization is.
TEST_F(pitched_copies_sim, a_synchronous_peer_copy_is_refused_beside_a_capture) {
  int current = 0;
  SIM_TEST_TRY(cudaGetDevice(&current));
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(a_, cudaStreamCaptureModeRelaxed));
  EXPECT_NE(cudaMemcpyPeer(x_, current, y_, current, 64), cudaSuccess);
  EXPECT_NE(cudaStreamEndCapture(a_, &graph), cudaSuccess);
  static_cast<void>(cudaGetLastError());
}
