// Device, function and stream settings as cuda_runtime_api.h documents them: cache and shared
// memory configurations, the attributes of the link between two devices, stream attributes, and
// cudaCtxResetPersistingL2Cache. On the simulated device they check its model; on a GPU the same
// tests check the tests.

// The deprecated shared memory configuration calls are part of what is tested.
#define CUDA_ENABLE_DEPRECATED
#include <cuda_runtime_api.h>

#include "sim_test.hpp"

namespace {

using device_settings = sim_testing::gpu_test;

// Any function stands for a kernel here: the simulated device takes any non-null pointer for one,
// and no kernel is launched.
void not_a_kernel() {}

class stream_guard {
 public:
  stream_guard() { SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~stream_guard() { SIM_TEST_EXPECT_SUCCESS(cudaStreamDestroy(stream_)); }
  stream_guard(stream_guard const&) = delete;
  stream_guard& operator=(stream_guard const&) = delete;
  stream_guard(stream_guard&&) = delete;
  stream_guard& operator=(stream_guard&&) = delete;
  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }

 private:
  cudaStream_t stream_{};
};

}  // namespace

// cudaDeviceSetCacheConfig sets "the preferred cache configuration for the current device" and
// cudaDeviceGetCacheConfig returns it (cudaFuncCachePreferNone "(default)").
TEST_F(device_settings, the_device_cache_preference_reads_back) {
  cudaFuncCache config = cudaFuncCachePreferL1;
  ASSERT_EQ(cudaDeviceGetCacheConfig(&config), cudaSuccess);
  EXPECT_EQ(config, cudaFuncCachePreferNone);
  for (cudaFuncCache const preference : {cudaFuncCachePreferShared, cudaFuncCachePreferL1,
                                         cudaFuncCachePreferEqual, cudaFuncCachePreferNone}) {
    ASSERT_EQ(cudaDeviceSetCacheConfig(preference), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetCacheConfig(&config), cudaSuccess);
    EXPECT_EQ(config, preference);
  }
  EXPECT_EQ(cudaDeviceGetCacheConfig(nullptr), cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaFuncSetCacheConfig and the deprecated cudaFuncSetSharedMemConfig take a kernel ("If the
// specified function does not exist, then cudaErrorInvalidDeviceFunction is returned").
TEST_F(device_settings, function_preferences_take_a_kernel) {
  auto const* kernel = reinterpret_cast<void const*>(&not_a_kernel);
  EXPECT_EQ(cudaFuncSetCacheConfig(nullptr, cudaFuncCachePreferShared),
            cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaFuncSetSharedMemConfig(nullptr, cudaSharedMemBankSizeFourByte),
            cudaErrorInvalidDeviceFunction);
  static_cast<void>(cudaGetLastError());
#if defined(GRAPHSTEP_CUDA_SIM)
  // On a GPU a host function is no kernel; here any function stands for one.
  EXPECT_EQ(cudaFuncSetCacheConfig(kernel, cudaFuncCachePreferShared), cudaSuccess);
  EXPECT_EQ(cudaFuncSetSharedMemConfig(kernel, cudaSharedMemBankSizeEightByte), cudaSuccess);
  EXPECT_EQ(cudaFuncSetSharedMemConfig(kernel, static_cast<cudaSharedMemConfig>(3)),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
#else
  static_cast<void>(kernel);
#endif
}

// The deprecated shared memory bank configuration: "This function will do nothing on devices
// with fixed shared memory bank size", and the getter returns "the fixed bank size of the
// hardware" (four bytes on compute capability 9.0).
TEST_F(device_settings, the_shared_memory_bank_size_is_fixed) {
  int major = 0;
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  if (major < 5) GTEST_SKIP() << "configurable banks before compute capability 5.0";
  ASSERT_EQ(cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeEightByte), cudaSuccess);
  cudaSharedMemConfig config = cudaSharedMemBankSizeDefault;
  ASSERT_EQ(cudaDeviceGetSharedMemConfig(&config), cudaSuccess);
  EXPECT_EQ(config, cudaSharedMemBankSizeFourByte);
  EXPECT_EQ(cudaDeviceSetSharedMemConfig(static_cast<cudaSharedMemConfig>(3)),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaDeviceGetP2PAttribute: cudaErrorInvalidDevice for invalid devices "or if they represent the
// same device", cudaErrorInvalidValue for an invalid attribute or a null value; access
// supported agrees with cudaDeviceCanAccessPeer.
TEST_F(device_settings, the_peer_link_attributes) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  int value = -1;
  EXPECT_EQ(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrAccessSupported, 0, 0),
            cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrAccessSupported, 0, count),
            cudaErrorInvalidDevice);
  static_cast<void>(cudaGetLastError());
  if (count < 2) GTEST_SKIP() << "needs two devices";
  int can_access = 0;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can_access, 0, 1), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrAccessSupported, 0, 1), cudaSuccess);
  EXPECT_EQ(value, can_access);
  ASSERT_EQ(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrPerformanceRank, 0, 1), cudaSuccess);
  EXPECT_GE(value, 0);
  EXPECT_EQ(cudaDeviceGetP2PAttribute(nullptr, cudaDevP2PAttrPerformanceRank, 0, 1),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceGetP2PAttribute(&value, static_cast<cudaDeviceP2PAttr>(6), 0, 1),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaStreamSetAttribute and cudaStreamGetAttribute round-trip what a stream keeps, and
// cudaStreamCopyAttributes "Copies attributes from source stream src to destination stream dst".
TEST_F(device_settings, stream_attributes_round_trip_and_copy) {
  stream_guard const source;
  stream_guard const destination;
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  int max_window = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device),
            cudaSuccess);
  static char window_base[4096];
  cudaLaunchAttributeValue value{};
  value.accessPolicyWindow.base_ptr = window_base;
  value.accessPolicyWindow.num_bytes = sizeof window_base;
  value.accessPolicyWindow.hitRatio = 0.5F;
  value.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  value.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  if (max_window > 0) {
    ASSERT_EQ(cudaStreamSetAttribute(source.get(), cudaStreamAttributeAccessPolicyWindow, &value),
              cudaSuccess);
  }
  cudaLaunchAttributeValue policy{};
  policy.syncPolicy = cudaSyncPolicyYield;
  ASSERT_EQ(cudaStreamSetAttribute(source.get(), cudaStreamAttributeSynchronizationPolicy, &policy),
            cudaSuccess);
  cudaLaunchAttributeValue priority{};
  priority.priority = -1;
  int least = 0;
  int greatest = 0;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  if (greatest < least) {
    ASSERT_EQ(cudaStreamSetAttribute(source.get(), cudaStreamAttributePriority, &priority),
              cudaSuccess);
    int read = 0;
    ASSERT_EQ(cudaStreamGetPriority(source.get(), &read), cudaSuccess);
    EXPECT_EQ(read, -1);
  }
  ASSERT_EQ(cudaStreamCopyAttributes(destination.get(), source.get()), cudaSuccess);
  for (cudaStream_t const stream : {source.get(), destination.get()}) {
    cudaLaunchAttributeValue out{};
    ASSERT_EQ(cudaStreamGetAttribute(stream, cudaStreamAttributeSynchronizationPolicy, &out),
              cudaSuccess);
    EXPECT_EQ(out.syncPolicy, cudaSyncPolicyYield);
    if (max_window > 0) {
      ASSERT_EQ(cudaStreamGetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &out),
                cudaSuccess);
      EXPECT_EQ(out.accessPolicyWindow.base_ptr, static_cast<void*>(window_base));
      EXPECT_EQ(out.accessPolicyWindow.num_bytes, sizeof window_base);
      EXPECT_EQ(out.accessPolicyWindow.hitProp, cudaAccessPropertyPersisting);
      EXPECT_EQ(out.accessPolicyWindow.missProp, cudaAccessPropertyStreaming);
    }
  }
  EXPECT_EQ(cudaCtxResetPersistingL2Cache(), cudaSuccess);
}

// Bad stream attributes: an invalid stream is cudaErrorInvalidResourceHandle, a null value
// cudaErrorInvalidValue; a miss property that "Must be either NORMAL or STREAMING" and a hit
// ratio above 1 are cudaErrorInvalidValue.
TEST_F(device_settings, bad_stream_attributes_are_refused) {
  stream_guard const stream;
  EXPECT_EQ(cudaStreamGetAttribute(stream.get(), cudaStreamAttributeSynchronizationPolicy, nullptr),
            cudaErrorInvalidValue);
  cudaLaunchAttributeValue value{};
  value.accessPolicyWindow.num_bytes = 4096;
  value.accessPolicyWindow.hitRatio = 0.5F;
  value.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  value.accessPolicyWindow.missProp = cudaAccessPropertyPersisting;
  EXPECT_EQ(cudaStreamSetAttribute(stream.get(), cudaStreamAttributeAccessPolicyWindow, &value),
            cudaErrorInvalidValue);
  value.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  value.accessPolicyWindow.hitRatio = 2.0F;
  EXPECT_EQ(cudaStreamSetAttribute(stream.get(), cudaStreamAttributeAccessPolicyWindow, &value),
            cudaErrorInvalidValue);
  // Doc-silent, modelled strictly (a GPU answers): a priority outside
  // cudaDeviceGetStreamPriorityRange is refused rather than clamped as at creation.
  int least = 0;
  int greatest = 0;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  cudaLaunchAttributeValue priority{};
  priority.priority = greatest - 1;
  EXPECT_EQ(cudaStreamSetAttribute(stream.get(), cudaStreamAttributePriority, &priority),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}

// cudaGetDriverEntryPoint (deprecated) finds what cudaGetDriverEntryPointByVersion finds for the
// runtime's version; a symbol no driver has is "cudaSuccess and ... funcPtr to NULL" with
// cudaDriverEntryPointSymbolNotFound.
TEST_F(device_settings, the_deprecated_entry_point_query_finds_the_same_functions) {
  void* by_version = nullptr;
  void* deprecated = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuGetErrorName", &by_version, CUDART_VERSION,
                                             cudaEnableDefault, &found),
            cudaSuccess);
  ASSERT_EQ(found, cudaDriverEntryPointSuccess);
  found = cudaDriverEntryPointSymbolNotFound;
  ASSERT_EQ(cudaGetDriverEntryPoint("cuGetErrorName", &deprecated, cudaEnableDefault, &found),
            cudaSuccess);
  EXPECT_EQ(found, cudaDriverEntryPointSuccess);
  EXPECT_EQ(deprecated, by_version);
  EXPECT_NE(deprecated, nullptr);
  ASSERT_EQ(cudaGetDriverEntryPoint("cuNoSuchFunction", &deprecated, cudaEnableDefault, &found),
            cudaSuccess);
  EXPECT_EQ(deprecated, nullptr);
  EXPECT_EQ(found, cudaDriverEntryPointSymbolNotFound);
  EXPECT_EQ(cudaGetDriverEntryPoint(nullptr, &deprecated, cudaEnableDefault, &found),
            cudaErrorInvalidValue);
  static_cast<void>(cudaGetLastError());
}
