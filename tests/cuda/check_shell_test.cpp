// The checked calls of cuda/check.hpp: CUDA, driver and cuBLAS statuses mapped to exception
// types with the call, file and line; cleanup failures reported, never thrown.

#include <cublas_api.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <graphstep/cuda/check.hpp>
#include <string>

#include "common/error_message.hpp"

namespace gs = graphstep;

using graphstep::testing::catch_as;
using graphstep::testing::contains;

TEST(error, cuda_try_keeps_code_call_and_location) {
  auto const e = catch_as<gs::cuda_error>([] { GRAPHSTEP_CUDA_TRY(cudaErrorInvalidValue); });
  EXPECT_EQ(e.code(), cudaErrorInvalidValue);
  std::string const what = e.what();
  EXPECT_TRUE(contains(what, "check_shell_test.cpp:")) << what;
  EXPECT_TRUE(contains(what, "cudaErrorInvalidValue")) << what;
  EXPECT_TRUE(contains(what, "GRAPHSTEP_CUDA_TRY") || contains(what, "cudaErrorInvalidValue:"))
      << what;
  EXPECT_TRUE(contains(what, cudaGetErrorString(cudaErrorInvalidValue))) << what;
}

TEST(error, cuda_try_passes_success_through) {
  int calls = 0;
  auto succeed = [&] {
    ++calls;
    return cudaSuccess;
  };
  EXPECT_NO_THROW(GRAPHSTEP_CUDA_TRY(succeed()));
  EXPECT_EQ(calls, 1);  // the call is evaluated exactly once
}

TEST(error, missing_driver_or_device_is_no_device_error) {
  for (cudaError_t code : {cudaErrorNoDevice, cudaErrorInsufficientDriver}) {
    auto const e = catch_as<gs::no_device_error>([code] { GRAPHSTEP_CUDA_TRY(code); });
    EXPECT_EQ(e.code(), code);
    EXPECT_TRUE(contains(e.what(), "no CUDA device visible")) << e.what();
    EXPECT_TRUE(contains(e.what(), "nvidia-smi")) << e.what();
  }
}

TEST(error, broken_capture_is_capture_error) {
  for (cudaError_t code : {cudaErrorStreamCaptureInvalidated, cudaErrorStreamCaptureUnjoined,
                           cudaErrorStreamCaptureImplicit, cudaErrorStreamCaptureUnsupported}) {
    auto const e = catch_as<gs::capture_error>([code] { GRAPHSTEP_CUDA_TRY(code); });
    EXPECT_EQ(e.code(), code);
  }
}

TEST(error, cublas_try_names_the_status) {
  try {
    GRAPHSTEP_CUBLAS_TRY(CUBLAS_STATUS_INVALID_VALUE);
    FAIL() << "no exception";
  } catch (gs::cublas_error const& e) {
    EXPECT_EQ(e.code(), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_TRUE(contains(e.what(), "CUBLAS_STATUS_INVALID_VALUE")) << e.what();
  }
  EXPECT_NO_THROW(GRAPHSTEP_CUBLAS_TRY(CUBLAS_STATUS_SUCCESS));
}

TEST(error, driver_try_keeps_the_code) {
  try {
    GRAPHSTEP_CU_TRY(CUDA_ERROR_INVALID_VALUE);
    FAIL() << "no exception";
  } catch (gs::cuda_driver_error const& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_VALUE);
    // With a driver the name is CUDA_ERROR_INVALID_VALUE; without one, the number.
    EXPECT_TRUE(contains(e.what(), "CUDA_ERROR_INVALID_VALUE") || contains(e.what(), "CUresult 1"))
        << e.what();
  }
}

TEST(error, cleanup_failures_are_reported_not_thrown) {
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaErrorInvalidResourceHandle));
  std::string const reported = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(reported, "cudaErrorInvalidResourceHandle")) << reported;

  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaErrorCudartUnloading));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // shutting down is not a failure
}
