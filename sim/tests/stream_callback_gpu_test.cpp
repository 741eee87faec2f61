// Stream callbacks (cudaStreamAddCallback) and stream ids (cudaStreamGetId) as cuda_runtime_api.h
// documents them. On the simulated device they check its model; on a GPU the same tests check the
// tests.

#include <cuda_runtime_api.h>

#include <vector>

#include "sim_test.hpp"

namespace {

struct callback_log {
  std::vector<int> order;
  std::vector<cudaStream_t> streams;
  std::vector<cudaError_t> statuses;
};

struct tagged {
  callback_log* log;
  int tag;
};

void CUDART_CB record_callback(cudaStream_t stream, cudaError_t status, void* data) {
  auto const* call = static_cast<tagged const*>(data);
  call->log->order.push_back(call->tag);
  call->log->streams.push_back(stream);
  call->log->statuses.push_back(status);
}

void CUDART_CB record_host_function(void* data) {
  auto const* call = static_cast<tagged const*>(data);
  call->log->order.push_back(call->tag);
}

class stream_callback : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (int tag = 0; tag < 3; ++tag) tags_.push_back(tagged{&log_, tag});
  }
  void TearDown() override {
    if (stream_ != nullptr) static_cast<void>(cudaStreamDestroy(stream_));
  }

  cudaStream_t stream_{};
  callback_log log_;
  std::vector<tagged> tags_;
};

}  // namespace

// "Adds a callback to be called on the host after all currently enqueued items in the stream have
// completed ... For each cudaStreamAddCallback call, a callback will be executed exactly once":
// in stream order with host functions, given the stream and cudaSuccess.
TEST_F(stream_callback, callbacks_run_once_in_stream_order_with_their_stream) {
  ASSERT_EQ(cudaStreamAddCallback(stream_, record_callback, &tags_[0], 0), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(stream_, record_host_function, &tags_[1]), cudaSuccess);
  ASSERT_EQ(cudaStreamAddCallback(stream_, record_callback, &tags_[2], 0), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(log_.order, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(log_.streams.size(), 2U);
  EXPECT_EQ(log_.streams[0], stream_);
  EXPECT_EQ(log_.streams[1], stream_);
  EXPECT_EQ(log_.statuses, (std::vector<cudaError_t>{cudaSuccess, cudaSuccess}));
}

// "flags - Reserved for future use, must be 0"; a null callback or an invalid stream is refused.
TEST_F(stream_callback, bad_arguments_are_refused) {
  EXPECT_EQ(cudaStreamAddCallback(stream_, record_callback, &tags_[0], 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamAddCallback(stream_, nullptr, &tags_[0], 0), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_TRUE(log_.order.empty());
}

// "this function is not supported with cudaStreamBeginCapture and cudaStreamEndCapture, unlike
// cudaLaunchHostFunc": refused in a capture, the callback never runs, and the capture is
// invalidated as for any operation it cannot record (CUDA Programming Guide, "Prohibited and
// Unhandled Operations"). The code a GPU gives is an open question; the simulator answers
// cudaErrorStreamCaptureUnsupported.
TEST_F(stream_callback, a_callback_is_refused_in_a_capture_and_invalidates_it) {
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_NE(cudaStreamAddCallback(stream_, record_callback, &tags_[0], 0), cudaSuccess);
  static_cast<void>(cudaGetLastError());
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  static_cast<void>(cudaGetLastError());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_TRUE(log_.order.empty());
}

// "The Id is unique for the life of the program"; the NULL stream and cudaStreamLegacy are the
// same stream, cudaStreamPerThread another.
TEST_F(stream_callback, stream_ids_are_unique_and_stable) {
  unsigned long long id = 0;
  ASSERT_EQ(cudaStreamGetId(stream_, &id), cudaSuccess);
  unsigned long long again = 0;
  ASSERT_EQ(cudaStreamGetId(stream_, &again), cudaSuccess);
  EXPECT_EQ(id, again);
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreate(&other), cudaSuccess);
  unsigned long long other_id = 0;
  ASSERT_EQ(cudaStreamGetId(other, &other_id), cudaSuccess);
  EXPECT_NE(other_id, id);
  ASSERT_EQ(cudaStreamDestroy(other), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&other), cudaSuccess);
  unsigned long long recreated = 0;
  ASSERT_EQ(cudaStreamGetId(other, &recreated), cudaSuccess);
  EXPECT_NE(recreated, other_id);
  EXPECT_NE(recreated, id);
  ASSERT_EQ(cudaStreamDestroy(other), cudaSuccess);

  unsigned long long null_id = 0;
  unsigned long long legacy_id = 0;
  unsigned long long per_thread_id = 0;
  ASSERT_EQ(cudaStreamGetId(nullptr, &null_id), cudaSuccess);
  ASSERT_EQ(cudaStreamGetId(cudaStreamLegacy, &legacy_id), cudaSuccess);
  ASSERT_EQ(cudaStreamGetId(cudaStreamPerThread, &per_thread_id), cudaSuccess);
  EXPECT_EQ(null_id, legacy_id);
  EXPECT_NE(per_thread_id, legacy_id);
  EXPECT_NE(per_thread_id, id);
  EXPECT_EQ(cudaStreamGetId(stream_, nullptr), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}
