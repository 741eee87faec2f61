// A runtime function the simulated device does not model links and fails by name
// (sim/src/runtime_refusals.cpp, generated; sim/docs/runtime_coverage.md): the call returns
// cudaErrorNotSupported, cudaGetLastError reports it once, as for any failed call, and the
// message naming the function is printed the first time only.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

namespace {

std::size_t occurrences(std::string const& text, std::string const& word) {
  std::size_t count = 0;
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    ++count;
  }
  return count;
}

TEST(runtime_refusals, a_refused_function_fails_by_name_once_and_leaves_the_device_usable) {
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  cudaTextureObject_t texture{};
  cudaResourceDesc resource{};
  cudaTextureDesc description{};
  testing::internal::CaptureStderr();
  EXPECT_EQ(cudaCreateTextureObject(&texture, &resource, &description, nullptr),
            cudaErrorNotSupported);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotSupported);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not sticky: the device goes on
  EXPECT_EQ(cudaDestroyTextureObject(texture), cudaErrorNotSupported);
  EXPECT_EQ(cudaCreateTextureObject(&texture, &resource, &description, nullptr),
            cudaErrorNotSupported);
  std::string const said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(occurrences(said, "cudaCreateTextureObject is not modelled"), 1U) << said;
  EXPECT_EQ(occurrences(said, "cudaDestroyTextureObject is not modelled"), 1U) << said;
  EXPECT_NE(said.find("sim/docs/runtime_coverage.md"), std::string::npos) << said;
  ASSERT_EQ(cudaGetLastError(), cudaErrorNotSupported);

  void* memory = nullptr;
  ASSERT_EQ(cudaMalloc(&memory, 256), cudaSuccess);
  EXPECT_EQ(cudaFree(memory), cudaSuccess);
}

TEST(runtime_refusals, a_refused_function_returning_a_value_returns_an_empty_one) {
  testing::internal::CaptureStderr();
  cudaChannelFormatDesc const channel =
      cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
  std::string const said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(channel.x, 0);
  EXPECT_EQ(channel.f, cudaChannelFormatKindSigned);  // the enumeration's zero
  EXPECT_NE(said.find("cudaCreateChannelDesc is not modelled"), std::string::npos) << said;
  EXPECT_EQ(cudaGetLastError(), cudaErrorNotSupported);
}

}  // namespace
