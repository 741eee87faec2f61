#pragma once

// The fixture of the ops' GPU tests: one stream of their own, made only once a device is known
// to be there (a stream made without one would throw before the test could be skipped).

#include <gtest/gtest.h>

#include <graphstep/cuda/stream.hpp>
#include <optional>

#include "common/gpu_test.hpp"

namespace graphstep::testing {

/// @brief A GPU test with a non-blocking stream, `stream_`: work on it is not ordered with the
/// legacy stream (cudaMemset, a pageable cudaMemcpy), so the tests wait for each explicitly.
class stream_test : public gpu_test {
 protected:
  void SetUp() override {
    gpu_test::SetUp();
    if (IsSkipped()) return;
    stream_.emplace();
  }
  /// Waits for the work on `stream_`.
  void sync() const { stream_->synchronize(); }

  std::optional<cuda::stream> stream_;
};

}  // namespace graphstep::testing
