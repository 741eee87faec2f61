// Pitched and 3-D memory as cuda_runtime_api.h documents it: cudaMallocPitch, cudaMalloc3D,
// cudaMemcpy3D and its asynchronous and peer forms, cudaMemset3D and cudaMemset3DAsync, on
// pitched pointers. On the simulated device they check its model; on a GPU the same tests check
// the tests.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "sim_test.hpp"

namespace {

using memory_3d = sim_testing::gpu_test;

// cudaPitchedPtr, cudaExtent and cudaPos by their fields (driver_functions.h's make_* functions
// are for nvcc's headers).
cudaPitchedPtr pitched(void* ptr, std::size_t pitch, std::size_t xsize, std::size_t ysize) {
  return cudaPitchedPtr{ptr, pitch, xsize, ysize};
}
cudaExtent extent_of(std::size_t width, std::size_t height, std::size_t depth) {
  return cudaExtent{width, height, depth};
}
cudaPos position(std::size_t x, std::size_t y, std::size_t z) {
  return cudaPos{x, y, z};
}

// A box of 40 x 3 x 4 bytes in an object of 64 x 5 x 6 (host or device), and the value the host
// object holds at each byte.
constexpr std::size_t width = 64;
constexpr std::size_t height = 5;
constexpr std::size_t depth = 6;

unsigned char pattern(std::size_t x, std::size_t y, std::size_t z) {
  return static_cast<unsigned char>(x + 7 * y + 31 * z + 1);
}

std::vector<unsigned char> host_object() {
  std::vector<unsigned char> host(width * height * depth);
  for (std::size_t z = 0; z < depth; ++z) {
    for (std::size_t y = 0; y < height; ++y) {
      for (std::size_t x = 0; x < width; ++x) host[(z * height + y) * width + x] = pattern(x, y, z);
    }
  }
  return host;
}

// Reads a 3-D device object back into a packed host buffer.
std::vector<unsigned char> read_back(cudaPitchedPtr const& device) {
  std::vector<unsigned char> host(width * height * depth);
  cudaMemcpy3DParms p{};
  p.srcPtr = device;
  p.dstPtr = pitched(host.data(), width, width, height);
  p.extent = extent_of(width, height, depth);
  p.kind = cudaMemcpyDeviceToHost;
  SIM_TEST_TRY(cudaMemcpy3D(&p));
  return host;
}

class device_object {
 public:
  device_object() {
    SIM_TEST_TRY(cudaMalloc3D(&object_, extent_of(width, height, depth)));
    SIM_TEST_TRY(cudaMemset3D(object_, 0, extent_of(width, height, depth)));
    // cudaMemset3D is "asynchronous with respect to the host": work on other streams follows it
    // only once the host has seen it done.
    SIM_TEST_TRY(cudaDeviceSynchronize());
  }
  ~device_object() { SIM_TEST_EXPECT_SUCCESS(cudaFree(object_.ptr)); }
  device_object(device_object const&) = delete;
  device_object& operator=(device_object const&) = delete;
  device_object(device_object&&) = delete;
  device_object& operator=(device_object&&) = delete;
  [[nodiscard]] cudaPitchedPtr const& get() const noexcept { return object_; }

 private:
  cudaPitchedPtr object_{};
};

// The box copied from `source_position` of the host object to `destination_position`.
cudaMemcpy3DParms box_copy(std::vector<unsigned char>& host, cudaPitchedPtr const& device) {
  cudaMemcpy3DParms p{};
  p.srcPtr = pitched(host.data(), width, width, height);
  p.srcPos = position(3, 1, 2);
  p.dstPtr = device;
  p.dstPos = position(10, 2, 1);
  p.extent = extent_of(40, 3, 4);
  p.kind = cudaMemcpyHostToDevice;
  return p;
}

// Whether `copied` holds the box at its destination and zeros elsewhere.
bool holds_the_box(std::vector<unsigned char> const& copied) {
  for (std::size_t z = 0; z < depth; ++z) {
    for (std::size_t y = 0; y < height; ++y) {
      for (std::size_t x = 0; x < width; ++x) {
        bool const inside = x >= 10 && x < 50 && y >= 2 && y < 5 && z >= 1 && z < 5;
        unsigned char const expected = inside ? pattern(x - 10 + 3, y - 2 + 1, z - 1 + 2) : 0;
        if (copied[(z * height + y) * width + x] != expected) return false;
      }
    }
  }
  return true;
}

}  // namespace

// cudaMallocPitch: "The pitch returned in *pitch by cudaMallocPitch() is the width in bytes of
// the allocation", at least the width asked for; rows written at that pitch read back.
TEST_F(memory_3d, malloc_pitch_gives_rows_at_least_as_wide_as_asked) {
  void* memory = nullptr;
  std::size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(&memory, &pitch, 100, 8), cudaSuccess);
  EXPECT_GE(pitch, 100U);
  std::vector<unsigned char> rows(100 * 8);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<unsigned char>(i % 251);
  ASSERT_EQ(cudaMemcpy2D(memory, pitch, rows.data(), 100, 100, 8, cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<unsigned char> back(rows.size());
  ASSERT_EQ(cudaMemcpy2D(back.data(), 100, memory, pitch, 100, 8, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(back, rows);
  EXPECT_EQ(cudaFree(memory), cudaSuccess);
}

// cudaMalloc3D: xsize and ysize are "equivalent to the width and height extent parameters", and
// the pitch is "the width in bytes of the allocation".
TEST_F(memory_3d, malloc_3d_gives_a_pitched_pointer_of_the_extent) {
  cudaPitchedPtr object{};
  ASSERT_EQ(cudaMalloc3D(&object, extent_of(width, height, depth)), cudaSuccess);
  EXPECT_NE(object.ptr, nullptr);
  EXPECT_GE(object.pitch, width);
  EXPECT_EQ(object.xsize, width);
  EXPECT_EQ(object.ysize, height);
  EXPECT_EQ(cudaFree(object.ptr), cudaSuccess);
}

// cudaMemcpy3D: "The srcPos and dstPos fields are optional offsets into the source and
// destination objects"; "The element for a host or device pointer is assumed to be unsigned
// char". The box lands at its destination and nothing else changes.
TEST_F(memory_3d, memcpy_3d_copies_a_box_between_positions) {
  device_object const device;
  std::vector<unsigned char> host = host_object();
  cudaMemcpy3DParms const p = box_copy(host, device.get());
  ASSERT_EQ(cudaMemcpy3D(&p), cudaSuccess);
  EXPECT_TRUE(holds_the_box(read_back(device.get())));
}

// cudaMemcpy3DAsync is stream-ordered; captured, it is one memcpy node, which the launch runs.
TEST_F(memory_3d, a_captured_3d_copy_is_one_memcpy_node) {
  device_object const device;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::vector<unsigned char> host = host_object();
  void* staged = nullptr;
  ASSERT_EQ(cudaMalloc(&staged, host.size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(staged, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  cudaMemcpy3DParms p = box_copy(host, device.get());
  p.srcPtr = pitched(staged, width, width, height);
  p.kind = cudaMemcpyDeviceToDevice;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemcpy3DAsync(&p, stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  std::size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  ASSERT_EQ(count, 1U);
  cudaGraphNode_t node = nullptr;
  ASSERT_EQ(cudaGraphGetNodes(graph, &node, &count), cudaSuccess);
  cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
  ASSERT_EQ(cudaGraphNodeGetType(node, &type), cudaSuccess);
  EXPECT_EQ(type, cudaGraphNodeTypeMemcpy);
  EXPECT_FALSE(holds_the_box(read_back(device.get()))) << "nothing ran yet";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(holds_the_box(read_back(device.get())));
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaFree(staged), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// cudaMemcpy3DPeerAsync and cudaMemcpy3DPeer between devices (the current device with itself
// when there is one): the box lands as with cudaMemcpy3D.
TEST_F(memory_3d, a_peer_3d_copy_copies_the_box) {
  int const current = [] {
    int d = 0;
    SIM_TEST_TRY(cudaGetDevice(&d));
    return d;
  }();
  device_object const source;
  device_object const destination;
  std::vector<unsigned char> host = host_object();
  cudaMemcpy3DParms whole{};
  whole.srcPtr = pitched(host.data(), width, width, height);
  whole.dstPtr = source.get();
  whole.extent = extent_of(width, height, depth);
  whole.kind = cudaMemcpyHostToDevice;
  ASSERT_EQ(cudaMemcpy3D(&whole), cudaSuccess);
  cudaMemcpy3DPeerParms p{};
  p.srcPtr = source.get();
  p.srcPos = position(3, 1, 2);
  p.srcDevice = current;
  p.dstPtr = destination.get();
  p.dstPos = position(10, 2, 1);
  p.dstDevice = current;
  p.extent = extent_of(40, 3, 4);
  ASSERT_EQ(cudaMemcpy3DPeerAsync(&p, cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(holds_the_box(read_back(destination.get())));
  ASSERT_EQ(cudaMemset3D(destination.get(), 0, extent_of(width, height, depth)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy3DPeer(&p), cudaSuccess);
  EXPECT_TRUE(holds_the_box(read_back(destination.get())));
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  p.dstDevice = count;  // no such device
  EXPECT_EQ(cudaMemcpy3DPeer(&p), cudaErrorInvalidDevice);
  static_cast<void>(cudaGetLastError());
}

// cudaMemset3D: "The xsize field specifies the logical width of each row in bytes, while the
// ysize field specifies the height of each 2D slice in rows": an extent narrower and shorter than
// the object sets only its own rows of each slice.
TEST_F(memory_3d, memset_3d_sets_only_the_rows_of_its_extent) {
  device_object const device;
  ASSERT_EQ(cudaMemset3DAsync(device.get(), 9, extent_of(20, 2, 3), cudaStreamLegacy), cudaSuccess);
  std::vector<unsigned char> const set = read_back(device.get());
  bool right = true;
  for (std::size_t z = 0; z < depth; ++z) {
    for (std::size_t y = 0; y < height; ++y) {
      for (std::size_t x = 0; x < width; ++x) {
        unsigned char const expected = x < 20 && y < 2 && z < 3 ? 9 : 0;
        right = right && set[(z * height + y) * width + x] == expected;
      }
    }
  }
  EXPECT_TRUE(right);
}

// The errors the header lists for bad parameters.
TEST_F(memory_3d, bad_parameters_are_refused_with_the_documented_errors) {
  device_object const device;
  std::vector<unsigned char> host = host_object();
  EXPECT_EQ(cudaMemcpy3D(nullptr), cudaErrorInvalidValue);
  // "Passing more than one non-zero source or destination will cause cudaMemcpy3D() to return an
  // error"; so does passing none.
  cudaMemcpy3DParms p = box_copy(host, device.get());
  p.srcArray = reinterpret_cast<cudaArray_t>(host.data());
  EXPECT_EQ(cudaMemcpy3D(&p), cudaErrorInvalidValue);
  p = box_copy(host, device.get());
  p.dstPtr = cudaPitchedPtr{};
  EXPECT_EQ(cudaMemcpy3D(&p), cudaErrorInvalidValue);
  // "The destination object must entirely contain the region defined by dstPos and extent": a
  // box past the last slice of the device object.
  p = box_copy(host, device.get());
  p.dstPos = position(10, 2, 3);
  EXPECT_EQ(cudaMemcpy3D(&p), cudaErrorInvalidValue);
  // Doc-silent, modelled strictly (a GPU answers): rows that overrun the slice (y + height past
  // ysize) are cudaErrorInvalidValue, a row that overruns the pitch cudaErrorInvalidPitchValue.
  p = box_copy(host, device.get());
  p.srcPos = position(3, 3, 2);
  EXPECT_EQ(cudaMemcpy3D(&p), cudaErrorInvalidValue);
  p = box_copy(host, device.get());
  p.srcPos = position(30, 1, 2);
  EXPECT_EQ(cudaMemcpy3D(&p), cudaErrorInvalidPitchValue);
  p = box_copy(host, device.get());
  p.kind = static_cast<cudaMemcpyKind>(7);
  EXPECT_EQ(cudaMemcpy3DAsync(&p, cudaStreamLegacy), cudaErrorInvalidMemcpyDirection);
  // cudaMemset3D: a pitch narrower than the width.
  cudaPitchedPtr narrow = device.get();
  narrow.pitch = 16;
  EXPECT_EQ(cudaMemset3D(narrow, 0, extent_of(32, 2, 1)), cudaErrorInvalidValue);
  // Doc-silent, modelled strictly: a pitched allocation of nothing.
  void* memory = nullptr;
  std::size_t pitch = 0;
  EXPECT_EQ(cudaMallocPitch(&memory, &pitch, 0, 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocPitch(nullptr, &pitch, 16, 4), cudaErrorInvalidValue);
  cudaPitchedPtr object{};
  EXPECT_EQ(cudaMalloc3D(&object, extent_of(16, 4, 0)), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaMallocPitch is as unsafe as cudaMalloc during a Global capture: refused, and the capture
// is invalidated (the list of potentially unsafe calls an H100 gave names cudaMalloc).
TEST_F(memory_3d, malloc_pitch_during_a_global_capture_invalidates_it) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* memory = nullptr;
  std::size_t pitch = 0;
  EXPECT_EQ(cudaMallocPitch(&memory, &pitch, 64, 4), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

namespace {

cudaMemcpy3DOperand pointer_operand(void* pointer, std::size_t row_length,
                                    std::size_t layer_height) {
  cudaMemcpy3DOperand operand{};
  operand.type = cudaMemcpyOperandTypePointer;
  operand.op.ptr.ptr = pointer;
  operand.op.ptr.rowLength = row_length;
  operand.op.ptr.layerHeight = layer_height;
  return operand;
}

// The whole host object to the device object's first slices, tightly packed on the host side
// (rowLength and layerHeight 0: "tightly packed according to the copy extent").
cudaMemcpy3DBatchOp whole_object_op(std::vector<unsigned char>& host,
                                    cudaPitchedPtr const& device) {
  cudaMemcpy3DBatchOp op{};
  op.src = pointer_operand(host.data(), 0, 0);
  op.dst = pointer_operand(device.ptr, device.pitch, device.ysize);
  op.extent = extent_of(width, height, depth);
  op.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  return op;
}

}  // namespace

// cudaMemcpy3DBatchAsync: "Performs a batch of 3D memory copies", each between pointer operands
// whose rows are rowLength elements (bytes) apart and layers layerHeight rows apart.
TEST_F(memory_3d, a_3d_batch_performs_each_copy) {
  device_object const first;
  device_object const second;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::vector<unsigned char> host = host_object();
  std::vector<cudaMemcpy3DBatchOp> ops(2);
  ops[0] = whole_object_op(host, first.get());
  // The box of box_copy, from the host object into the second device object.
  ops[1].src = pointer_operand(host.data() + (2 * height + 1) * width + 3, width, height);
  ops[1].dst =
      pointer_operand(static_cast<unsigned char*>(second.get().ptr) +
                          second.get().pitch * second.get().ysize + 2 * second.get().pitch + 10,
                      second.get().pitch, second.get().ysize);
  ops[1].extent = extent_of(40, 3, 4);
  ops[1].srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
  ASSERT_EQ(cudaMemcpy3DBatchAsync(ops.size(), ops.data(), 0, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(read_back(first.get()), host);
  EXPECT_TRUE(holds_the_box(read_back(second.get())));
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// The errors the header lists: the legacy stream ("Must not be default NULL stream"), flags
// ("must be zero now"), a zero extent ("must not be zero"), a row length below the width, and a
// source access order no enumerator names are cudaErrorInvalidValue.
TEST_F(memory_3d, a_bad_3d_batch_is_invalid_value) {
  device_object const device;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::vector<unsigned char> host = host_object();
  cudaMemcpy3DBatchOp op = whole_object_op(host, device.get());
  EXPECT_EQ(cudaMemcpy3DBatchAsync(1, &op, 0, cudaStreamLegacy), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy3DBatchAsync(1, &op, 1, stream), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy3DBatchAsync(0, &op, 0, stream), cudaErrorInvalidValue);
  op.extent.depth = 0;
  EXPECT_EQ(cudaMemcpy3DBatchAsync(1, &op, 0, stream), cudaErrorInvalidValue);
  op = whole_object_op(host, device.get());
  op.src.op.ptr.rowLength = width - 1;
  EXPECT_EQ(cudaMemcpy3DBatchAsync(1, &op, 0, stream), cudaErrorInvalidValue);
  op = whole_object_op(host, device.get());
  op.srcAccessOrder = cudaMemcpySrcAccessOrderInvalid;
  EXPECT_EQ(cudaMemcpy3DBatchAsync(1, &op, 0, stream), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::vector<unsigned char> const untouched = read_back(device.get());
  bool zero = true;
  for (unsigned char const b : untouched) zero = zero && b == 0;
  EXPECT_TRUE(zero) << "a refused batch copies nothing";
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// Doc-silent for the 3-D batch, modelled as CUDA 13 does cudaMemcpyBatchAsync: during a capture
// the call is refused with cudaErrorStreamCaptureUnsupported and the capture stays valid, its
// graph without the copies (a GPU answers).
TEST_F(memory_3d, a_3d_batch_during_a_capture_is_refused_and_the_capture_stays_valid) {
  device_object const device;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::vector<unsigned char> host = host_object();
  cudaMemcpy3DBatchOp op = whole_object_op(host, device.get());
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaMemcpy3DBatchAsync(1, &op, 0, stream), cudaErrorStreamCaptureUnsupported);
  static_cast<void>(cudaGetLastError());
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  std::size_t count = 1;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 0U);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}
