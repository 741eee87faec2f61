// Batched operations on managed memory as cuda_runtime_api.h documents them:
// cudaMemPrefetchBatchAsync, cudaMemDiscardBatchAsync and cudaMemDiscardAndPrefetchBatchAsync. On
// the simulated device they check its model; on a GPU the same tests check the tests.

#include <cuda_runtime_api.h>

#include <vector>

#include "sim_test.hpp"

namespace {

class managed_batches : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    sim_testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    SIM_TEST_TRY(cudaGetDevice(&device_));
    int concurrent = 0;
    SIM_TEST_TRY(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device_));
    if (concurrent == 0) GTEST_SKIP() << "needs cudaDevAttrConcurrentManagedAccess";
    SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SIM_TEST_TRY(cudaMallocManaged(reinterpret_cast<void**>(&a_), bytes));
    SIM_TEST_TRY(cudaMallocManaged(reinterpret_cast<void**>(&b_), bytes));
  }
  void TearDown() override {
    if (stream_ == nullptr) return;
    SIM_TEST_EXPECT_SUCCESS(cudaStreamSynchronize(stream_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(a_));
    SIM_TEST_EXPECT_SUCCESS(cudaFree(b_));
    SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_));
  }
  static constexpr std::size_t bytes = 1 << 16;
  int device_{};
  cudaStream_t stream_{};
  unsigned char* a_{};
  unsigned char* b_{};
};

}  // namespace

// cudaMemPrefetchBatchAsync: prefetchLocs[k] applies from prefetchLocIdxs[k] to the next index;
// the data stays what it was.
TEST_F(managed_batches, a_prefetch_batch_moves_no_values) {
  for (std::size_t i = 0; i < bytes; ++i) a_[i] = static_cast<unsigned char>(i);
  void* pointers[] = {a_, b_, a_ + 100};
  std::size_t sizes[] = {bytes, bytes, 10};
  cudaMemLocation locations[] = {{cudaMemLocationTypeDevice, device_},
                                 {cudaMemLocationTypeHost, 0}};
  std::size_t indices[] = {0, 2};
  ASSERT_EQ(cudaMemPrefetchBatchAsync(pointers, sizes, 3, locations, indices, 2, 0, stream_),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  bool same = true;
  for (std::size_t i = 0; i < bytes; ++i) same = same && a_[i] == static_cast<unsigned char>(i);
  EXPECT_TRUE(same);
}

// cudaMemDiscardBatchAsync: "This operation can be undone on any part of the range by either
// writing to it or prefetching it": what is written after the discard reads back.
TEST_F(managed_batches, memory_written_after_a_discard_reads_back) {
  void* pointers[] = {a_};
  std::size_t sizes[] = {bytes};
  ASSERT_EQ(cudaMemDiscardBatchAsync(pointers, sizes, 1, 0, stream_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a_, 0x42, bytes / 2, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  bool written = true;
  for (std::size_t i = 0; i < bytes / 2; ++i) written = written && a_[i] == 0x42;
  EXPECT_TRUE(written);
  cudaMemLocation location{cudaMemLocationTypeDevice, device_};
  std::size_t index = 0;
  ASSERT_EQ(
      cudaMemDiscardAndPrefetchBatchAsync(pointers, sizes, 1, &location, &index, 1, 0, stream_),
      cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a_, 0x17, bytes, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  written = true;
  for (std::size_t i = 0; i < bytes; ++i) written = written && a_[i] == 0x17;
  EXPECT_TRUE(written);
}

// The errors the header implies: the legacy stream ("Must not be legacy NULL stream"), flags
// ("Must be zero"), memory that is not managed, and location indices that do not start at 0,
// increase and stay below count are cudaErrorInvalidValue.
TEST_F(managed_batches, bad_batches_are_invalid_value) {
  void* pointers[] = {a_, b_};
  std::size_t sizes[] = {bytes, bytes};
  cudaMemLocation locations[] = {{cudaMemLocationTypeDevice, device_},
                                 {cudaMemLocationTypeDevice, device_}};
  std::size_t indices[] = {0, 1};
  EXPECT_EQ(
      cudaMemPrefetchBatchAsync(pointers, sizes, 2, locations, indices, 2, 0, cudaStreamLegacy),
      cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPrefetchBatchAsync(pointers, sizes, 2, locations, indices, 2, 1, stream_),
            cudaErrorInvalidValue);
  std::size_t not_increasing[] = {0, 0};
  EXPECT_EQ(cudaMemPrefetchBatchAsync(pointers, sizes, 2, locations, not_increasing, 2, 0, stream_),
            cudaErrorInvalidValue);
  std::size_t not_from_zero[] = {1};
  EXPECT_EQ(cudaMemPrefetchBatchAsync(pointers, sizes, 2, locations, not_from_zero, 1, 0, stream_),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemDiscardBatchAsync(pointers, sizes, 2, 1, stream_), cudaErrorInvalidValue);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, bytes), cudaSuccess);
  void* not_managed[] = {device};
  EXPECT_EQ(cudaMemDiscardBatchAsync(not_managed, sizes, 1, 0, stream_), cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaMemDiscardAndPrefetchBatchAsync(not_managed, sizes, 1, locations, indices, 1, 0, stream_),
      cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  static_cast<void>(cudaGetLastError());
}

// Doc-silent, modelled strictly as cudaMemPrefetchAsync is on the simulated device (a GPU
// answers): a batch issued to a capturing stream fails with cudaErrorStreamCaptureUnsupported and
// invalidates the capture.
TEST_F(managed_batches, a_batch_in_a_capture_invalidates_it) {
  void* pointers[] = {a_};
  std::size_t sizes[] = {bytes};
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaMemDiscardBatchAsync(pointers, sizes, 1, 0, stream_),
            cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
  static_cast<void>(cudaGetLastError());
}

// cudaStreamAttachMemAsync: managed memory, "length must be either zero or the entire
// allocation's size", flags one of the three, and "It is illegal to attach singly to the NULL
// stream"; the memory stays usable from the stream after an attachment.
TEST_F(managed_batches, attaching_managed_memory_to_a_stream) {
  ASSERT_EQ(cudaStreamAttachMemAsync(stream_, a_, 0, cudaMemAttachSingle), cudaSuccess);
  ASSERT_EQ(cudaStreamAttachMemAsync(stream_, b_, bytes, cudaMemAttachGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a_, 0x33, bytes, stream_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b_, a_, bytes, cudaMemcpyDefault, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  bool copied = true;
  for (std::size_t i = 0; i < bytes; ++i) copied = copied && b_[i] == 0x33;
  EXPECT_TRUE(copied);
  ASSERT_EQ(cudaStreamAttachMemAsync(stream_, a_, 0, cudaMemAttachHost), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(cudaStreamAttachMemAsync(stream_, a_, bytes / 2, cudaMemAttachGlobal),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamAttachMemAsync(nullptr, a_, 0, cudaMemAttachSingle), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamAttachMemAsync(stream_, a_, 0, cudaMemAttachGlobal | cudaMemAttachHost),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

namespace {

int range_int(cudaMemRangeAttribute attribute, void const* pointer, std::size_t bytes) {
  int value = 12345;
  SIM_TEST_TRY(cudaMemRangeGetAttribute(&value, sizeof value, attribute, pointer, bytes));
  return value;
}

cudaMemLocationType range_type(cudaMemRangeAttribute attribute, void const* pointer,
                               std::size_t bytes) {
  cudaMemLocationType type = cudaMemLocationTypeHostNumaCurrent;
  SIM_TEST_TRY(cudaMemRangeGetAttribute(&type, sizeof type, attribute, pointer, bytes));
  return type;
}

}  // namespace

// cudaMemRangeGetAttribute reads back what cudaMemAdvise set: read duplication, the preferred
// location (a device id, cudaCpuDeviceId for the CPU, cudaInvalidDeviceId for none) and its type
// and id, and the devices advised to access the range.
TEST_F(managed_batches, range_attributes_read_back_the_advice) {
  EXPECT_EQ(range_int(cudaMemRangeAttributeReadMostly, a_, bytes), 0);
  EXPECT_EQ(range_int(cudaMemRangeAttributePreferredLocation, a_, bytes), cudaInvalidDeviceId);
  EXPECT_EQ(range_type(cudaMemRangeAttributePreferredLocationType, a_, bytes),
            cudaMemLocationTypeInvalid);
  cudaMemLocation const device{cudaMemLocationTypeDevice, device_};
  cudaMemLocation const host{cudaMemLocationTypeHost, 0};
  ASSERT_EQ(cudaMemAdvise(a_, bytes, cudaMemAdviseSetReadMostly, device), cudaSuccess);
  EXPECT_EQ(range_int(cudaMemRangeAttributeReadMostly, a_, bytes), 1);
  ASSERT_EQ(cudaMemAdvise(a_, bytes, cudaMemAdviseSetPreferredLocation, device), cudaSuccess);
  EXPECT_EQ(range_int(cudaMemRangeAttributePreferredLocation, a_, bytes), device_);
  EXPECT_EQ(range_type(cudaMemRangeAttributePreferredLocationType, a_, bytes),
            cudaMemLocationTypeDevice);
  EXPECT_EQ(range_int(cudaMemRangeAttributePreferredLocationId, a_, bytes), device_);
  ASSERT_EQ(cudaMemAdvise(a_, bytes, cudaMemAdviseSetPreferredLocation, host), cudaSuccess);
  EXPECT_EQ(range_int(cudaMemRangeAttributePreferredLocation, a_, bytes), cudaCpuDeviceId);
  EXPECT_EQ(range_type(cudaMemRangeAttributePreferredLocationType, a_, bytes),
            cudaMemLocationTypeHost);
  ASSERT_EQ(cudaMemAdvise(a_, bytes, cudaMemAdviseUnsetPreferredLocation, host), cudaSuccess);
  EXPECT_EQ(range_int(cudaMemRangeAttributePreferredLocation, a_, bytes), cudaInvalidDeviceId);
  ASSERT_EQ(cudaMemAdvise(a_, bytes, cudaMemAdviseUnsetReadMostly, device), cudaSuccess);
  EXPECT_EQ(range_int(cudaMemRangeAttributeReadMostly, a_, bytes), 0);
  // "If data is larger than the number of devices that have that advice set for that memory
  // range, cudaInvalidDeviceId will be returned in all the extra space provided".
  ASSERT_EQ(cudaMemAdvise(a_, bytes, cudaMemAdviseSetAccessedBy, device), cudaSuccess);
  int accessed_by[3] = {7, 7, 7};
  ASSERT_EQ(cudaMemRangeGetAttribute(accessed_by, sizeof accessed_by,
                                     cudaMemRangeAttributeAccessedBy, a_, bytes),
            cudaSuccess);
  EXPECT_EQ(accessed_by[0], device_);
  EXPECT_EQ(accessed_by[1], cudaInvalidDeviceId);
  EXPECT_EQ(accessed_by[2], cudaInvalidDeviceId);
  ASSERT_EQ(cudaMemAdvise(a_, bytes, cudaMemAdviseUnsetAccessedBy, device), cudaSuccess);
  ASSERT_EQ(cudaMemRangeGetAttribute(accessed_by, sizeof accessed_by,
                                     cudaMemRangeAttributeAccessedBy, a_, bytes),
            cudaSuccess);
  EXPECT_EQ(accessed_by[0], cudaInvalidDeviceId);
}

// cudaMemRangeAttributeLastPrefetchLocation: "the last location to which all pages in the memory
// range were prefetched explicitly"; cudaInvalidDeviceId "If any page in the memory range was
// never explicitly prefetched". cudaMemRangeGetAttributes answers several at once.
TEST_F(managed_batches, range_attributes_read_back_the_last_prefetch) {
  EXPECT_EQ(range_int(cudaMemRangeAttributeLastPrefetchLocation, a_, bytes), cudaInvalidDeviceId);
  ASSERT_EQ(cudaMemPrefetchAsync(a_, bytes, cudaMemLocation{cudaMemLocationTypeDevice, device_}, 0,
                                 stream_),
            cudaSuccess);
  EXPECT_EQ(range_int(cudaMemRangeAttributeLastPrefetchLocation, a_, bytes), device_);
  void* pointers[] = {a_, b_};
  std::size_t sizes[] = {bytes, bytes};
  cudaMemLocation host{cudaMemLocationTypeHost, 0};
  std::size_t index = 0;
  ASSERT_EQ(cudaMemPrefetchBatchAsync(pointers, sizes, 2, &host, &index, 1, 0, stream_),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  int last = 0;
  cudaMemLocationType last_type = cudaMemLocationTypeInvalid;
  void* data[] = {&last, &last_type};
  std::size_t data_sizes[] = {sizeof last, sizeof last_type};
  cudaMemRangeAttribute attributes[] = {cudaMemRangeAttributeLastPrefetchLocation,
                                        cudaMemRangeAttributeLastPrefetchLocationType};
  ASSERT_EQ(cudaMemRangeGetAttributes(data, data_sizes, attributes, 2, b_, bytes), cudaSuccess);
  EXPECT_EQ(last, cudaCpuDeviceId);
  EXPECT_EQ(last_type, cudaMemLocationTypeHost);
}

// The range "must refer to managed memory"; a result size other than the attribute's is
// cudaErrorInvalidValue.
TEST_F(managed_batches, range_attributes_refuse_what_the_header_excludes) {
  int value = 0;
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, bytes), cudaSuccess);
  EXPECT_EQ(cudaMemRangeGetAttribute(&value, sizeof value, cudaMemRangeAttributeReadMostly, device,
                                     bytes),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttribute(&value, 2, cudaMemRangeAttributeReadMostly, a_, bytes),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemRangeGetAttribute(&value, 0, cudaMemRangeAttributeAccessedBy, a_, bytes),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  static_cast<void>(cudaGetLastError());
}
