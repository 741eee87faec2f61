#pragma once

// The fixture of every GPU test: without a visible CUDA device the test is skipped, and ctest
// reports it as skipped, not passed.

#include <gtest/gtest.h>

#include <graphstep/cuda/device.hpp>

namespace graphstep::testing {

class gpu_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
};

}  // namespace graphstep::testing
