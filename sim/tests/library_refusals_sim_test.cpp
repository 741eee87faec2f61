// A cuBLASLt or NCCL function the simulated device does not model links and fails by name
// (sim/src/cublaslt_refusals.cpp and nccl_refusals.cpp, generated; sim/docs/*_coverage.md):
// the call answers CUBLAS_STATUS_NOT_SUPPORTED or ncclInvalidUsage, the message naming the
// function is printed the first time only, and NCCL's last error names it. The functions that
// return no status are implemented, and NCCL's profiling names call the plain ones.

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#if __has_include(<nccl.h>)
#include <nccl.h>
#define GRAPHSTEP_SIM_TEST_NCCL 1
#endif

namespace {

std::size_t occurrences(std::string const& text, std::string const& word) {
  std::size_t count = 0;
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    ++count;
  }
  return count;
}

TEST(library_refusals, a_refused_cublaslt_function_fails_by_name_once) {
  cublasLtMatrixTransformDesc_t description{};
  testing::internal::CaptureStderr();
  EXPECT_EQ(cublasLtMatrixTransformDescCreate(&description, CUDA_R_32F),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasLtMatrixTransformDescCreate(&description, CUDA_R_32F),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasLtHeuristicsCacheSetCapacity(16), CUBLAS_STATUS_NOT_SUPPORTED);
  std::string const said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(occurrences(said, "cublasLtMatrixTransformDescCreate is not modelled yet"), 1U)
      << said;
  EXPECT_EQ(occurrences(said, "cublasLtHeuristicsCacheSetCapacity is not modelled yet"), 1U)
      << said;
  EXPECT_NE(said.find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << said;
  EXPECT_NE(said.find("sim/docs/cublaslt_coverage.md"), std::string::npos) << said;
  // The runtime's last error is not touched: cuBLASLt answers through its status.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(library_refusals, cublaslt_names_its_statuses_and_its_version_as_its_headers_do) {
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  EXPECT_STRNE(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE),
               cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS));
  EXPECT_EQ(cublasLtGetVersion(), static_cast<std::size_t>(CUBLAS_VERSION));
  EXPECT_EQ(cublasLtGetCudartVersion(), static_cast<std::size_t>(CUDART_VERSION));
  int major = -1;
  int minor = -1;
  ASSERT_EQ(cublasLtGetProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtGetProperty(MINOR_VERSION, &minor), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(major, CUBLAS_VER_MAJOR);
  EXPECT_EQ(minor, CUBLAS_VER_MINOR);
  EXPECT_EQ(cublasLtGetProperty(MAJOR_VERSION, nullptr), CUBLAS_STATUS_INVALID_VALUE);
  // The mask is kept and the previous one returned, as the header documents.
  unsigned const before = cublasLtDisableCpuInstructionsSetMask(5U);
  EXPECT_EQ(cublasLtDisableCpuInstructionsSetMask(before), 5U);
}

#ifdef GRAPHSTEP_SIM_TEST_NCCL
TEST(library_refusals, a_refused_nccl_function_fails_by_name_and_ncclGetLastError_says_which) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  testing::internal::CaptureStderr();
  EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclInvalidUsage);
  EXPECT_EQ(pncclGroupSimulateEnd(&info), ncclInvalidUsage);  // the profiling name: the same
  std::string const said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(occurrences(said, "ncclGroupSimulateEnd is not modelled yet"), 1U) << said;
  EXPECT_NE(said.find("sim/docs/nccl_coverage.md"), std::string::npos) << said;
  std::string const last = ncclGetLastError(nullptr);
  EXPECT_NE(last.find("ncclGroupSimulateEnd is not modelled yet"), std::string::npos) << last;
}

TEST(library_refusals, nccl_profiling_names_call_the_implemented_functions) {
  int version = 0;
  int profiled = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  ASSERT_EQ(pncclGetVersion(&profiled), ncclSuccess);
  EXPECT_EQ(profiled, version);
  EXPECT_STREQ(pncclGetErrorString(ncclInvalidUsage), ncclGetErrorString(ncclInvalidUsage));
  EXPECT_EQ(pncclGetVersion(nullptr), ncclInvalidArgument);
}
#endif

}  // namespace
