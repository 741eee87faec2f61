// The exception hierarchy, message formatting, and the status macros of error.hpp (cuDNN,
// NCCL, preconditions).

#include <gtest/gtest.h>

#include <exception>
#include <graphstep/error.hpp>
#include <new>
#include <string>
#include <type_traits>

#include "common/error_message.hpp"

namespace gs = graphstep;

namespace {

// Stand-ins with cuDNN's names: the macro is checked without linking cuDNN.
enum fake_cudnn_status { CUDNN_STATUS_SUCCESS = 0, CUDNN_STATUS_BAD_PARAM = 2000 };
char const* cudnnGetErrorString(fake_cudnn_status status) {
  return status == CUDNN_STATUS_BAD_PARAM ? "CUDNN_STATUS_BAD_PARAM" : "CUDNN_STATUS_SUCCESS";
}

}  // namespace

using graphstep::testing::contains;

TEST(error, format_failure_has_file_line_call_name_and_text) {
  EXPECT_EQ(gs::detail::format_failure("a.cpp", 12, "f(x)", "errName", "what it means"),
            "a.cpp:12: f(x): errName (what it means)");
  EXPECT_EQ(gs::detail::format_failure("a.cpp", 3, "g()", "errName", ""), "a.cpp:3: g(): errName");
}

TEST(error, exception_hierarchy) {
  static_assert(std::is_base_of_v<std::runtime_error, gs::error>);
  static_assert(std::is_base_of_v<gs::cuda_error, gs::no_device_error>);
  static_assert(std::is_base_of_v<gs::cuda_error, gs::capture_error>);
  static_assert(std::is_base_of_v<gs::error, gs::cuda_driver_error>);
  static_assert(std::is_base_of_v<gs::error, gs::cublas_error>);
  static_assert(std::is_base_of_v<gs::error, gs::cudnn_error>);
  static_assert(std::is_base_of_v<gs::error, gs::nccl_error>);
  static_assert(std::is_base_of_v<gs::error, gs::usage_error>);
  SUCCEED();
}

// Every allocator's out-of-memory is a std::bad_alloc; deriving from error as well would make
// catch (std::exception const&) ambiguous, so that it would not catch it at all.
TEST(error, out_of_memory_is_a_bad_alloc_and_not_an_error) {
  static_assert(std::is_base_of_v<std::bad_alloc, gs::out_of_memory>);
  static_assert(!std::is_base_of_v<gs::error, gs::out_of_memory>);
  static_assert(std::is_nothrow_copy_constructible_v<gs::out_of_memory>);
  gs::out_of_memory const thrown{{64, 0, 0, 32, 0}, "memory_pool: cannot allocate 64 B"};
  try {
    throw thrown;
  } catch (std::bad_alloc const& e) {
    EXPECT_STREQ(e.what(), "memory_pool: cannot allocate 64 B");
  }
  try {
    throw thrown;
  } catch (std::exception const& e) {
    EXPECT_STREQ(e.what(), "memory_pool: cannot allocate 64 B");
  } catch (...) {
    ADD_FAILURE() << "catch (std::exception const&) did not catch out_of_memory";
  }
  try {
    throw thrown;
  } catch (gs::out_of_memory const& e) {
    EXPECT_EQ(e.sizes().requested, 64U);
    EXPECT_EQ(e.sizes().budget, 32U);
  }
}

TEST(error, cudnn_try_names_the_status) {
  try {
    GRAPHSTEP_CUDNN_TRY(CUDNN_STATUS_BAD_PARAM);
    FAIL() << "no exception";
  } catch (gs::cudnn_error const& e) {
    EXPECT_EQ(e.code(), CUDNN_STATUS_BAD_PARAM);
    EXPECT_TRUE(contains(e.what(), "CUDNN_STATUS_BAD_PARAM")) << e.what();
  }
  EXPECT_NO_THROW(GRAPHSTEP_CUDNN_TRY(CUDNN_STATUS_SUCCESS));
}

TEST(error, nccl_result_names) {
  EXPECT_STREQ(gs::detail::nccl_result_name(0), "ncclSuccess");
  EXPECT_STREQ(gs::detail::nccl_result_name(4), "ncclInvalidArgument");
  EXPECT_STREQ(gs::detail::nccl_result_name(7), "ncclInProgress");
  EXPECT_STREQ(gs::detail::nccl_result_name(99), "ncclResult(unknown)");
}

TEST(error, expects_throws_usage_error_with_message_and_condition) {
  int const batch = 3;
  try {
    GRAPHSTEP_EXPECTS(batch % 2 == 0, "batch must be even: pad it to " + std::to_string(4));
    FAIL() << "no exception";
  } catch (gs::usage_error const& e) {
    EXPECT_TRUE(contains(e.what(), "batch must be even: pad it to 4")) << e.what();
    EXPECT_TRUE(contains(e.what(), "batch % 2 == 0")) << e.what();
    EXPECT_TRUE(contains(e.what(), "error_test.cpp:")) << e.what();
  }
  EXPECT_NO_THROW(GRAPHSTEP_EXPECTS(batch == 3, "unused"));
}

TEST(error, out_of_memory_keeps_its_sizes) {
  gs::out_of_memory const e{{1024, 2048, 4096, 8192, 512}, "pool full"};
  EXPECT_EQ(e.sizes().requested, 1024U);
  EXPECT_EQ(e.sizes().in_use, 2048U);
  EXPECT_EQ(e.sizes().reserved, 4096U);
  EXPECT_EQ(e.sizes().budget, 8192U);
  EXPECT_EQ(e.sizes().largest_free, 512U);
  EXPECT_STREQ(e.what(), "pool full");
}
