// 2-D copies and memsets and copies between devices as cuda_runtime_api.h documents them
// (cudaMemcpy2D, cudaMemcpy2DAsync, cudaMemset2D, cudaMemset2DAsync, cudaMemcpyPeer,
// cudaMemcpyPeerAsync): eager and captured, element by element, with their bad input. On the
// simulated device they check its model; on a GPU the same tests check the tests.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "sim_test.hpp"

namespace {

// A device matrix of `rows` rows, `pitch` bytes apart, and a host matrix of the same shape with
// a different pitch. The copies move a sub-rectangle: `width` bytes from `column`, `height` rows
// from `row`.
class pitched_copies : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaMalloc(reinterpret_cast<void**>(&device_), device_pitch * rows));
    SIM_TEST_TRY(cudaMalloc(reinterpret_cast<void**>(&other_), device_pitch * rows));
    host_.resize(device_pitch * rows);  // wide enough for either pitch
    for (std::size_t i = 0; i < host_.size(); ++i) {
      host_[i] = static_cast<unsigned char>(i * 7 + 3);
    }
  }
  void TearDown() override {
    if (stream_ == nullptr) return;
    SIM_TEST_EXPECT_SUCCESS(cudaStreamSynchronize(stream_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(device_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(other_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_));
  }

  // The whole device matrix `memory`, read back after the stream's work.
  [[nodiscard]] std::vector<unsigned char> device_matrix(unsigned char const* memory) const {
    return sim_testing::copy_to_host(memory, device_pitch * rows, stream_);
  }

  // Every byte of `got` (a device matrix): the sub-rectangle holds what `expected_at` says for its
  // byte (row, column), every other byte is still `fill`.
  template <typename Expected>
  static void expect_rectangle(std::vector<unsigned char> const& got, unsigned char fill,
                               Expected const& expected_at) {
    for (std::size_t y = 0; y < rows; ++y) {
      for (std::size_t x = 0; x < device_pitch; ++x) {
        bool const inside = y >= row && y < row + height && x >= column && x < column + width;
        unsigned char const expected = inside ? expected_at(y - row, x - column) : fill;
        ASSERT_EQ(got[y * device_pitch + x], expected) << "row " << y << ", byte " << x;
      }
    }
  }

  [[nodiscard]] unsigned char host_at(std::size_t y, std::size_t x) const {
    return host_[(y + row) * host_pitch + x + column];
  }

  static constexpr std::size_t rows = 12;
  static constexpr std::size_t device_pitch = 512;
  static constexpr std::size_t host_pitch = 200;
  static constexpr std::size_t row = 2;
  static constexpr std::size_t column = 24;
  static constexpr std::size_t width = 100;
  static constexpr std::size_t height = 7;
  cudaStream_t stream_{};
  unsigned char* device_{};
  unsigned char* other_{};
  std::vector<unsigned char> host_;
};

}  // namespace

// cudaMemcpy2D: "Copies a matrix (height rows of width bytes each) ... dpitch and spitch are the
// widths in memory in bytes of the 2D arrays pointed to by dst and src, including any padding
// added to the end of each row". Bytes outside the rectangle, padding included, are untouched.
TEST_F(pitched_copies, a_2d_copy_moves_a_sub_rectangle_between_pitches) {
  SIM_TEST_TRY(cudaMemset(device_, 0xAB, device_pitch * rows));
  SIM_TEST_TRY(cudaDeviceSynchronize());
  unsigned char* target = device_ + row * device_pitch + column;
  SIM_TEST_TRY(cudaMemcpy2D(target, device_pitch, host_.data() + row * host_pitch + column,
                                  host_pitch, width, height, cudaMemcpyHostToDevice));
  SIM_TEST_TRY(cudaDeviceSynchronize());
  std::vector<unsigned char> const got = device_matrix(device_);
  expect_rectangle(got, 0xAB, [this](std::size_t y, std::size_t x) { return host_at(y, x); });
  // And back: device to host into a third pitch, through cudaMemcpyDefault.
  std::vector<unsigned char> back(width * height, 0);
  SIM_TEST_TRY(
      cudaMemcpy2D(back.data(), width, target, device_pitch, width, height, cudaMemcpyDefault));
  for (std::size_t y = 0; y < height; ++y) {
    for (std::size_t x = 0; x < width; ++x) {
      ASSERT_EQ(back[y * width + x], host_at(y, x)) << "row " << y << ", byte " << x;
    }
  }
}

// cudaMemcpy2DAsync captured: "all operations pushed into the stream will not be executed, but
// will instead be captured into a graph" (cudaStreamBeginCapture), as a memcpy node; the launch
// copies the rectangle device to device.
TEST_F(pitched_copies, a_captured_2d_copy_is_a_memcpy_node_that_copies_when_launched) {
  SIM_TEST_TRY(
      cudaMemcpyAsync(other_, host_.data(), device_pitch * rows, cudaMemcpyHostToDevice, stream_));
  SIM_TEST_TRY(cudaMemsetAsync(device_, 0x5C, device_pitch * rows, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  std::size_t const offset = row * device_pitch + column;
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  SIM_TEST_TRY(cudaMemcpy2DAsync(device_ + offset, device_pitch, other_ + offset,
                                       device_pitch, width, height, cudaMemcpyDeviceToDevice,
                                       stream_));
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
  std::size_t count = 0;
  SIM_TEST_TRY(cudaGraphGetNodes(graph, nullptr, &count));
  ASSERT_EQ(count, 1U);
  cudaGraphNode_t node = nullptr;
  SIM_TEST_TRY(cudaGraphGetNodes(graph, &node, &count));
  cudaGraphNodeType type{};
  SIM_TEST_TRY(cudaGraphNodeGetType(node, &type));
  EXPECT_EQ(type, cudaGraphNodeTypeMemcpy);
  // Nothing was copied yet.
  expect_rectangle(device_matrix(device_), 0x5C, [](std::size_t, std::size_t) { return 0x5C; });
  cudaGraphExec_t exec = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  std::vector<unsigned char> const got = device_matrix(device_);
  expect_rectangle(got, 0x5C, [this](std::size_t y, std::size_t x) {
    return host_[(y + row) * device_pitch + x + column];
  });
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

// cudaMemset2D: "Sets to the specified value value a matrix (height rows of width bytes each)
// pointed to by dstPtr"; the padding past each row's width keeps its bytes.
TEST_F(pitched_copies, a_2d_memset_sets_only_its_rectangle) {
  SIM_TEST_TRY(cudaMemset(device_, 0x11, device_pitch * rows));
  SIM_TEST_TRY(
      cudaMemset2D(device_ + row * device_pitch + column, device_pitch, 0x7E, width, height));
  SIM_TEST_TRY(cudaDeviceSynchronize());
  expect_rectangle(device_matrix(device_), 0x11, [](std::size_t, std::size_t) { return 0x7E; });
}

// cudaMemset2DAsync captured is a memset node whose parameters (cudaGraphMemsetNodeGetParams)
// are the call's: one-byte elements, the width in bytes, the height and the pitch.
TEST_F(pitched_copies, a_captured_2d_memset_is_a_memset_node_with_its_pitch) {
  SIM_TEST_TRY(cudaMemsetAsync(device_, 0x22, device_pitch * rows, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  unsigned char* target = device_ + row * device_pitch + column;
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  SIM_TEST_TRY(cudaMemset2DAsync(target, device_pitch, 0x3D, width, height, stream_));
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
  cudaGraphNode_t node = nullptr;
  std::size_t count = 1;
  SIM_TEST_TRY(cudaGraphGetNodes(graph, &node, &count));
  ASSERT_EQ(count, 1U);
  cudaMemsetParams params{};
  SIM_TEST_TRY(cudaGraphMemsetNodeGetParams(node, &params));
  EXPECT_EQ(params.dst, target);
  EXPECT_EQ(params.pitch, device_pitch);
  EXPECT_EQ(params.value, 0x3DU);
  EXPECT_EQ(params.elementSize, 1U);
  EXPECT_EQ(params.width, width);
  EXPECT_EQ(params.height, height);
  cudaGraphExec_t exec = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  expect_rectangle(device_matrix(device_), 0x22, [](std::size_t, std::size_t) { return 0x3D; });
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

// "width must not exceed either dpitch or spitch": cudaErrorInvalidPitchValue, the pitch error
// cudaMemcpy2D lists; a null pointer is cudaErrorInvalidValue and an unknown kind
// cudaErrorInvalidMemcpyDirection, as for cudaMemcpy. Nothing is copied.
TEST_F(pitched_copies, a_2d_copy_refuses_a_narrow_pitch_a_null_pointer_and_an_unknown_kind) {
  SIM_TEST_TRY(cudaMemset(device_, 0x44, device_pitch * rows));
  SIM_TEST_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(cudaMemcpy2D(device_, width - 1, host_.data(), host_pitch, width, height,
                         cudaMemcpyHostToDevice),
            cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpy2DAsync(device_, device_pitch, host_.data(), width - 1, width, height,
                              cudaMemcpyHostToDevice, stream_),
            cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaMemcpy2D(nullptr, device_pitch, host_.data(), host_pitch, width, height,
                         cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2DAsync(device_, device_pitch, nullptr, host_pitch, width, height,
                              cudaMemcpyHostToDevice, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy2D(device_, device_pitch, other_, device_pitch, width, height,
                         static_cast<cudaMemcpyKind>(42)),
            cudaErrorInvalidMemcpyDirection);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaDeviceSynchronize());
  expect_rectangle(device_matrix(device_), 0x44, [](std::size_t, std::size_t) { return 0x44; });
}

// cudaMemset2D lists cudaErrorInvalidValue only: a pitch narrower than the width and a null
// pointer are refused with it.
TEST_F(pitched_copies, a_2d_memset_refuses_a_narrow_pitch_and_a_null_pointer) {
  EXPECT_EQ(cudaMemset2D(device_, width - 1, 0, width, height), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2DAsync(device_, width - 1, 0, width, height, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset2D(nullptr, device_pitch, 0, width, height), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
}

// A refused 2-D copy or memset in a capturing stream invalidates the capture, as a refused
// cudaMemcpyAsync does: cudaStreamEndCapture then answers cudaErrorStreamCaptureInvalidated.
TEST_F(pitched_copies, a_refused_2d_copy_invalidates_the_capture) {
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaMemcpy2DAsync(device_, width - 1, other_, device_pitch, width, height,
                              cudaMemcpyDeviceToDevice, stream_),
            cudaErrorInvalidPitchValue);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaMemset2DAsync(nullptr, device_pitch, 0, width, height, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
  static_cast<void>(cudaGetLastError());
}

// cudaMemcpyPeer: "Copies memory from one device to memory on another device"; the same device
// on both sides is a plain device copy. With a second device, both directions.
TEST_F(pitched_copies, peer_copies_move_bytes_between_devices) {
  int current = 0;
  SIM_TEST_TRY(cudaGetDevice(&current));
  SIM_TEST_TRY(cudaMemcpy(other_, host_.data(), 1024, cudaMemcpyHostToDevice));
  SIM_TEST_TRY(cudaMemcpyPeer(device_, current, other_, current, 1024));
  SIM_TEST_TRY(cudaDeviceSynchronize());
  std::vector<unsigned char> got = device_matrix(device_);
  for (std::size_t i = 0; i < 1024; ++i) ASSERT_EQ(got[i], host_[i]) << "byte " << i;
  int count = 0;
  SIM_TEST_TRY(cudaGetDeviceCount(&count));
  if (count < 2) GTEST_SKIP() << "one device: no copy between two";
  int const peer = current == 0 ? 1 : 0;
  SIM_TEST_TRY(cudaSetDevice(peer));
  unsigned char* remote = nullptr;
  SIM_TEST_TRY(cudaMalloc(reinterpret_cast<void**>(&remote), 1024));
  SIM_TEST_TRY(cudaSetDevice(current));
  SIM_TEST_TRY(cudaMemcpyPeer(remote, peer, other_, current, 1024));
  SIM_TEST_TRY(cudaMemsetAsync(device_, 0, 1024, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  SIM_TEST_TRY(cudaMemcpyPeerAsync(device_, current, remote, peer, 512, stream_));
  got = device_matrix(device_);
  for (std::size_t i = 0; i < 1024; ++i) {
    ASSERT_EQ(got[i], i < 512 ? host_[i] : 0) << "byte " << i;
  }
  SIM_TEST_TRY(cudaFree(remote));
}

// cudaMemcpyPeerAsync captured is a memcpy node; the launch copies.
TEST_F(pitched_copies, a_captured_peer_copy_copies_when_launched) {
  int current = 0;
  SIM_TEST_TRY(cudaGetDevice(&current));
  SIM_TEST_TRY(cudaMemcpyAsync(other_, host_.data(), 256, cudaMemcpyHostToDevice, stream_));
  SIM_TEST_TRY(cudaMemsetAsync(device_, 0, 256, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  SIM_TEST_TRY(cudaMemcpyPeerAsync(device_, current, other_, current, 256, stream_));
  SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
  cudaGraphNode_t node = nullptr;
  std::size_t count = 1;
  SIM_TEST_TRY(cudaGraphGetNodes(graph, &node, &count));
  ASSERT_EQ(count, 1U);
  cudaGraphNodeType type{};
  SIM_TEST_TRY(cudaGraphNodeGetType(node, &type));
  EXPECT_EQ(type, cudaGraphNodeTypeMemcpy);
  cudaGraphExec_t exec = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  std::vector<unsigned char> const got = device_matrix(device_);
  for (std::size_t i = 0; i < 256; ++i) ASSERT_EQ(got[i], host_[i]) << "byte " << i;
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

// cudaMemcpyPeer lists cudaErrorInvalidDevice (a device that does not exist) and
// cudaErrorInvalidValue (here: a null pointer).
TEST_F(pitched_copies, peer_copies_refuse_an_invalid_device_and_a_null_pointer) {
  int current = 0;
  SIM_TEST_TRY(cudaGetDevice(&current));
  int count = 0;
  SIM_TEST_TRY(cudaGetDeviceCount(&count));
  EXPECT_EQ(cudaMemcpyPeer(device_, count, other_, current, 64), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaMemcpyPeer(device_, current, other_, -1, 64), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaMemcpyPeerAsync(device_, count, other_, current, 64, stream_),
            cudaErrorInvalidDevice);
  EXPECT_EQ(cudaMemcpyPeer(nullptr, current, other_, current, 64), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyPeerAsync(device_, current, nullptr, current, 64, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
}

// cudaGraphExecUpdate: "For 2d memsets, only address and assigned value may be updated": a
// captured 2-D memset moved to other memory with another value updates the executable, which
// then sets the new rectangle; one with another width is refused
// (cudaGraphExecUpdateErrorParametersChanged).
TEST_F(pitched_copies, an_update_may_change_a_2d_memsets_address_and_value_but_not_its_shape) {
  auto const capture = [this](unsigned char* memory, int value, std::size_t columns) {
    cudaGraph_t graph = nullptr;
    SIM_TEST_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
    SIM_TEST_TRY(cudaMemset2DAsync(memory + row * device_pitch + column, device_pitch, value,
                                         columns, height, stream_));
    SIM_TEST_TRY(cudaStreamEndCapture(stream_, &graph));
    return graph;
  };
  SIM_TEST_TRY(cudaMemsetAsync(device_, 0x01, device_pitch * rows, stream_));
  SIM_TEST_TRY(cudaMemsetAsync(other_, 0x02, device_pitch * rows, stream_));
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  cudaGraph_t first = capture(device_, 0x10, width);
  cudaGraphExec_t exec = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, first, 0));
  cudaGraph_t moved = capture(other_, 0x20, width);
  cudaGraphExecUpdateResultInfo info{};
  SIM_TEST_TRY(cudaGraphExecUpdate(exec, moved, &info));
  EXPECT_EQ(info.result, cudaGraphExecUpdateSuccess);
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream_));
  expect_rectangle(device_matrix(other_), 0x02, [](std::size_t, std::size_t) { return 0x20; });
  expect_rectangle(device_matrix(device_), 0x01, [](std::size_t, std::size_t) { return 0x01; });
  cudaGraph_t reshaped = capture(device_, 0x10, width - 1);
  EXPECT_EQ(cudaGraphExecUpdate(exec, reshaped, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorParametersChanged);
  static_cast<void>(cudaGetLastError());
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  for (cudaGraph_t graph : {first, moved, reshaped}) SIM_TEST_TRY(cudaGraphDestroy(graph));
}
