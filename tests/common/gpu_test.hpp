#pragma once

// The fixture of every GPU test: without a visible CUDA device the test is skipped, and ctest
// reports it as skipped, not passed.

#include <gtest/gtest.h>

#include <graphstep/cuda/device.hpp>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <optional>

namespace graphstep::testing {

class gpu_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
};

/// @brief A GPU test with a stream and a pool, made once the device is known to be there.
class stream_pool_test : public gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
    pool_.emplace();
  }
  std::optional<cuda::stream> stream_;
  std::optional<memory::memory_pool> pool_;
};

}  // namespace graphstep::testing
