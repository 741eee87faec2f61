#pragma once

// For tests of what the library says on a machine without a visible CUDA device (skipped where
// one is visible).

#include <gtest/gtest.h>

#include <graphstep/cuda/device.hpp>
#include <graphstep/error.hpp>
#include <string>

namespace graphstep::testing {

class no_device_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is visible";
  }
};

/// @brief `call` must throw `no_device_error` saying "no CUDA device visible".
template <typename Call>
void expect_no_device_error(Call&& call) {
  try {
    call();
    ADD_FAILURE() << "no exception";
  } catch (no_device_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("no CUDA device visible"), std::string::npos) << e.what();
  }
}

}  // namespace graphstep::testing
