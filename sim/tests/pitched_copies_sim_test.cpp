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

namespace {

// cudaPitchedPtr, cudaExtent and cudaPos by their fields (driver_functions.h's make_* functions
// are for nvcc's headers).
cudaPitchedPtr pitched(void* ptr, std::size_t pitch, std::size_t xsize, std::size_t ysize) {
  return cudaPitchedPtr{ptr, pitch, xsize, ysize};
}
cudaExtent extent_of(std::size_t width, std::size_t height, std::size_t depth) {
  return cudaExtent{width, height, depth};
}

// The fixture's memory as two slices of two rows: x_ and y_ seen as 3-D objects.
cudaMemcpy3DParms device_to_device_3d(void* destination, void* source, std::size_t pitch,
                                      std::size_t width) {
  cudaMemcpy3DParms p{};
  p.srcPtr = pitched(source, pitch, width, 2);
  p.dstPtr = pitched(destination, pitch, width, 2);
  p.extent = extent_of(width, 2, 2);
  p.kind = cudaMemcpyDeviceToDevice;
  return p;
}

}  // namespace

// A planted race: a 3-D copy into x on one stream, a write to a byte of its last slice's last
// row on another, unordered; the report names the 3-D copy. Its ordered twin (the same write
// after an event on the copy's stream) is not reported.
TEST_F(pitched_copies_sim, a_3d_copy_races_with_an_unordered_write_to_its_last_slice) {
  cudaMemcpy3DParms const p = device_to_device_3d(x_, y_, pitch, width);
  SIM_TEST_TRY(cudaMemcpy3DAsync(&p, a_));
  SIM_TEST_TRY(cudaMemsetAsync(x_ + 3 * pitch + width - 1, 0, 1, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("3-D memcpy of 2 slices of 2 rows of 64 bytes"), std::string::npos)
      << found[0];
}

TEST_F(pitched_copies_sim, a_3d_copy_ordered_before_a_write_does_not_race) {
  cudaMemcpy3DParms const p = device_to_device_3d(x_, y_, pitch, width);
  SIM_TEST_TRY(cudaMemcpy3DAsync(&p, a_));
  cudaEvent_t copied = nullptr;
  SIM_TEST_TRY(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  SIM_TEST_TRY(cudaEventRecord(copied, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, copied, 0));
  SIM_TEST_TRY(cudaMemsetAsync(x_ + 3 * pitch + width - 1, 0, 1, b_));
  // The padding after each row is not the copy's: a write to it races with nothing.
  SIM_TEST_TRY(cudaMemsetAsync(y_ + width, 0, pitch - width, b_));
  EXPECT_TRUE(new_races().empty());
  SIM_TEST_TRY(cudaEventDestroy(copied));
}

// A 3-D memset's rows race with an unordered read of them; one whose slices skip rows (height
// below ysize) writes only its rows.
TEST_F(pitched_copies_sim, a_3d_memset_races_with_an_unordered_read_of_its_rows_only) {
  // Two slices of two rows, only the first row of each set: rows 0 and 2.
  cudaPitchedPtr const target = pitched(y_, pitch, width, 2);
  SIM_TEST_TRY(cudaMemset3DAsync(target, 7, extent_of(width, 1, 2), a_));
  std::vector<unsigned char> host(width);
  SIM_TEST_TRY(cudaMemcpyAsync(host.data(), y_ + pitch, width, cudaMemcpyDeviceToHost, b_));
  EXPECT_TRUE(new_races().empty()) << "row 1 is not the memset's";
  SIM_TEST_TRY(cudaMemcpyAsync(host.data(), y_ + 2 * pitch, width, cudaMemcpyDeviceToHost, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("memset of 64 bytes"), std::string::npos) << found[0];
}

// Registered host memory is pinned memory to the race checker too: a copy from it on one stream
// and a copy into it on another, unordered, race; ordered by an event they do not.
TEST_F(pitched_copies_sim, copies_through_registered_memory_race_unless_ordered) {
  std::vector<unsigned char> host(bytes);
  SIM_TEST_TRY(cudaHostRegister(host.data(), bytes, cudaHostRegisterDefault));
  SIM_TEST_TRY(cudaMemcpyAsync(x_, host.data(), bytes, cudaMemcpyHostToDevice, a_));
  SIM_TEST_TRY(cudaMemcpyAsync(host.data(), y_, bytes, cudaMemcpyDeviceToHost, b_));
  auto const found = new_races();
  ASSERT_EQ(found.size(), 1U);
  EXPECT_NE(found[0].find("memcpy of 1024 bytes"), std::string::npos) << found[0];
  SIM_TEST_TRY(cudaDeviceSynchronize());
  already_ = gs::sim::races().size();
  cudaEvent_t copied = nullptr;
  SIM_TEST_TRY(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  SIM_TEST_TRY(cudaMemcpyAsync(x_, host.data(), bytes, cudaMemcpyHostToDevice, a_));
  SIM_TEST_TRY(cudaEventRecord(copied, a_));
  SIM_TEST_TRY(cudaStreamWaitEvent(b_, copied, 0));
  SIM_TEST_TRY(cudaMemcpyAsync(host.data(), y_, bytes, cudaMemcpyDeviceToHost, b_));
  EXPECT_TRUE(new_races().empty());
  SIM_TEST_TRY(cudaEventDestroy(copied));
  SIM_TEST_TRY(cudaHostUnregister(host.data()));
}
