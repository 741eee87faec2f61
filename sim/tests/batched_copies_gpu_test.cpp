// cudaMemcpyBatchAsync as cuda_runtime_api.h documents it: a batch of pointer-to-pointer copies,
// each with the attributes attrsIdxs gives it, and its bad input; and, during a capture, what
// CUDA 13 does (rapidsai/rmm#2518): the call is refused with cudaErrorStreamCaptureUnsupported,
// the capture stays valid, and its graph lacks the copies. On the simulated device they check
// its model; on a GPU the same tests check the tests.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "sim_test.hpp"

#if defined(CUDART_VERSION) && CUDART_VERSION >= 13000

namespace {

constexpr std::size_t bytes = 256;

class batched_copies : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaMalloc(&device_, bytes));
    SIM_TEST_TRY(cudaMalloc(&other_, bytes));
    SIM_TEST_TRY(cudaMemsetAsync(device_, 0, bytes, stream_));
    SIM_TEST_TRY(cudaMemsetAsync(other_, 0, bytes, stream_));
    SIM_TEST_TRY(cudaStreamSynchronize(stream_));
    for (std::size_t i = 0; i < bytes; ++i) host_[i] = static_cast<unsigned char>(i * 5 + 1);
  }
  void TearDown() override {
    if (stream_ == nullptr) return;
    static_cast<void>(cudaGetLastError());
    SIM_TEST_EXPECT_SUCCESS(cudaStreamSynchronize(stream_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(device_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(other_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_));
  }
  std::vector<unsigned char> read(void const* device) {
    std::vector<unsigned char> back(bytes);
    SIM_TEST_TRY(cudaMemcpyAsync(back.data(), device, bytes, cudaMemcpyDeviceToHost, stream_));
    SIM_TEST_TRY(cudaStreamSynchronize(stream_));
    return back;
  }
  static cudaMemcpyAttributes in_stream_order() {
    cudaMemcpyAttributes attributes{};
    attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    return attributes;
  }
  // One host-to-device copy of the whole buffer, in stream order.
  cudaError_t copy_host_to_device(cudaStream_t stream) {
    void* destinations[] = {device_};
    void const* sources[] = {host_.data()};
    std::size_t sizes[] = {bytes};
    cudaMemcpyAttributes attributes[] = {in_stream_order()};
    std::size_t first_copy[] = {0};
    return cudaMemcpyBatchAsync(destinations, sources, sizes, 1, attributes, first_copy, 1, stream);
  }

  cudaStream_t stream_{};
  void* device_{};
  void* other_{};
  std::vector<unsigned char> host_ = std::vector<unsigned char>(bytes);
};

// "Performs memory copies from source buffers specified in srcs to destination buffers specified
// in dsts"; "attrs[k] will be applied to copies starting from attrsIdxs[k] through
// attrsIdxs[k+1] - 1": host to device, then (a later batch: no order within one) device to
// device and device to host, under two sets of attributes.
TEST_F(batched_copies, copies_each_pair_under_its_attributes) {
  ASSERT_EQ(copy_host_to_device(stream_), cudaSuccess);
  std::vector<unsigned char> back(bytes);
  void* destinations[] = {other_, back.data()};
  void const* sources[] = {device_, device_};
  std::size_t sizes[] = {bytes, bytes / 2};
  cudaMemcpyAttributes attributes[] = {in_stream_order(), in_stream_order()};
  attributes[1].srcAccessOrder = cudaMemcpySrcAccessOrderAny;
  attributes[1].flags = cudaMemcpyFlagPreferOverlapWithCompute;  // a hint
  std::size_t first_copy[] = {0, 1};
  ASSERT_EQ(cudaMemcpyBatchAsync(destinations, sources, sizes, 2, attributes, first_copy, 2,
                                 stream_),
            cudaSuccess);
  SIM_TEST_TRY(cudaStreamSynchronize(stream_));
  EXPECT_EQ(read(other_), host_);
  EXPECT_EQ(std::vector<unsigned char>(back.begin(), back.begin() + bytes / 2),
            std::vector<unsigned char>(host_.begin(), host_.begin() + bytes / 2));
  EXPECT_EQ(std::vector<unsigned char>(back.begin() + bytes / 2, back.end()),
            std::vector<unsigned char>(bytes / 2, 0));
}

// cudaMemcpySrcAccessOrderDuringApiCall: "all accesses must be complete before the API call
// returns" — the source may change as soon as the call returns, even with work still queued.
TEST_F(batched_copies, a_source_read_during_the_call_may_change_after_it) {
  sim_testing::queued_work const queued;
  std::vector<unsigned char> source = host_;
  void* destinations[] = {device_};
  void const* sources[] = {source.data()};
  std::size_t sizes[] = {bytes};
  cudaMemcpyAttributes attributes[] = {in_stream_order()};
  attributes[0].srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
  std::size_t first_copy[] = {0};
  ASSERT_EQ(cudaMemcpyBatchAsync(destinations, sources, sizes, 1, attributes, first_copy, 1,
                                 stream_),
            cudaSuccess);
  std::fill(source.begin(), source.end(), static_cast<unsigned char>(0xEE));
  EXPECT_EQ(read(device_), host_);
}

// Bad input is cudaErrorInvalidValue, the one error the doc comment lists, and copies nothing:
// attribute indices that do not start at 0, do not increase or reach past the batch; a missing
// or invalid source access order ("Each memcpy operation in the batch must have a valid
// cudaMemcpyAttributes ... including the appropriate srcAccessOrder setting"); more attributes
// than copies; an empty copy (CUDA 13 rejects it: rapidsai/rmm#2509); the legacy stream ("Must
// not be legacy NULL stream").
TEST_F(batched_copies, bad_input_is_invalid_value_and_copies_nothing) {
  void* destinations[] = {device_, other_};
  void const* sources[] = {host_.data(), host_.data()};
  std::size_t sizes[] = {bytes, bytes};
  cudaMemcpyAttributes attributes[] = {in_stream_order(), in_stream_order()};
  std::size_t not_from_zero[] = {1};
  EXPECT_EQ(cudaMemcpyBatchAsync(destinations, sources, sizes, 2, attributes, not_from_zero, 1,
                                 stream_),
            cudaErrorInvalidValue);
  std::size_t not_increasing[] = {0, 0};
  EXPECT_EQ(cudaMemcpyBatchAsync(destinations, sources, sizes, 2, attributes, not_increasing, 2,
                                 stream_),
            cudaErrorInvalidValue);
  std::size_t past_the_batch[] = {0, 2};
  EXPECT_EQ(cudaMemcpyBatchAsync(destinations, sources, sizes, 2, attributes, past_the_batch, 2,
                                 stream_),
            cudaErrorInvalidValue);
  std::size_t one_each[] = {0, 1};
  EXPECT_EQ(cudaMemcpyBatchAsync(destinations, sources, sizes, 1, attributes, one_each, 2,
                                 stream_),
            cudaErrorInvalidValue);  // two attributes, one copy
  cudaMemcpyAttributes unordered[] = {in_stream_order(), {}};  // srcAccessOrder left invalid
  EXPECT_EQ(cudaMemcpyBatchAsync(destinations, sources, sizes, 2, unordered, one_each, 2, stream_),
            cudaErrorInvalidValue);
  std::size_t with_an_empty_copy[] = {bytes, 0};
  EXPECT_EQ(cudaMemcpyBatchAsync(destinations, sources, with_an_empty_copy, 2, attributes,
                                 one_each, 2, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(copy_host_to_device(cudaStreamLegacy), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  EXPECT_EQ(read(device_), std::vector<unsigned char>(bytes, 0));
  EXPECT_EQ(read(other_), std::vector<unsigned char>(bytes, 0));
}

// CUDA 13 refuses the call during a capture with cudaErrorStreamCaptureUnsupported and leaves the
// capture valid: ending it succeeds, and the graph, which instantiates and launches, lacks the
// copy (rapidsai/rmm#2518: "The rejected cudaMemcpyBatchAsync call does not invalidate the
// capture"). A question for the next GPU run (docs/validation.md).
TEST_F(batched_copies, during_a_capture_it_is_refused_and_the_capture_stays_valid) {
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(copy_host_to_device(stream_), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaGetLastError(), cudaErrorStreamCaptureUnsupported);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ASSERT_EQ(cudaStreamIsCapturing(stream_, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  std::size_t nodes = 1;
  EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 0U);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(read(device_), std::vector<unsigned char>(bytes, 0));  // the copy never happened
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  // Outside the capture the same call copies.
  ASSERT_EQ(copy_host_to_device(stream_), cudaSuccess);
  EXPECT_EQ(read(device_), host_);
}

}  // namespace

#endif
