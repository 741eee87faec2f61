// cuBLASLt's logger (cublasLt.h, "Experimental: Logger"): the levels and masks, a callback and a
// file as destinations, and disabling it for the rest of the process. A failing call is logged as
// an error naming the function; on the simulated device the message also says why it refused.

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "sim_test.hpp"

namespace {

struct logged {
  int level;
  std::string function;
  std::string message;
};

std::mutex log_mutex;
std::vector<logged>& messages() {
  static std::vector<logged> all;
  return all;
}

void keep(int level, char const* function, char const* message) {
  std::lock_guard<std::mutex> const lock{log_mutex};
  messages().push_back(
      {level, function != nullptr ? function : "", message != nullptr ? message : ""});
}

class cublaslt_logger : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    sim_testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cublasLtLoggerSetCallback(keep), CUBLAS_STATUS_SUCCESS);
    messages().clear();
  }
  void TearDown() override {
    EXPECT_EQ(cublasLtLoggerSetLevel(0), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtLoggerSetCallback(nullptr), CUBLAS_STATUS_SUCCESS);
  }
  // A matmul whose shapes do not agree: A is 2 x 3 but B 2 x 2.
  static cublasStatus_t a_failing_matmul() {
    cublasLtHandle_t handle = nullptr;
    cublasLtMatmulDesc_t matmul = nullptr;
    cublasLtMatrixLayout_t a = nullptr;
    cublasLtMatrixLayout_t square = nullptr;
    EXPECT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, 2, 3, 2), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&square, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulPreference_t preference = nullptr;
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t const status = cublasLtMatmulAlgoGetHeuristic(
        handle, matmul, a, square, square, square, preference, 1, &result, &found);
    EXPECT_EQ(cublasLtMatmulPreferenceDestroy(preference), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutDestroy(square), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutDestroy(a), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescDestroy(matmul), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtDestroy(handle), CUBLAS_STATUS_SUCCESS);
    return status;
  }
  static bool has(int level, std::string const& function) {
    std::lock_guard<std::mutex> const lock{log_mutex};
    for (logged const& m : messages()) {
      if (m.level == level && m.function.find(function) != std::string::npos) return true;
    }
    return false;
  }
};

TEST_F(cublaslt_logger, level_1_logs_a_failing_call_as_an_error_naming_it) {
  ASSERT_EQ(cublasLtLoggerSetLevel(1), CUBLAS_STATUS_SUCCESS);
  EXPECT_NE(a_failing_matmul(), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(has(1, "cublasLtMatmulAlgoGetHeuristic"));
  EXPECT_FALSE(has(5, "cublasLtCreate"));  // API trace is level 5
  if (sim_testing::simulated_device) {
    std::lock_guard<std::mutex> const lock{log_mutex};
    bool says_why = false;
    for (logged const& m : messages()) {
      says_why = says_why || m.message.find("shapes") != std::string::npos;
    }
    EXPECT_TRUE(says_why) << "the simulator's error names why it refused";
  }
}

TEST_F(cublaslt_logger, level_0_logs_nothing_and_level_5_traces_every_call) {
  ASSERT_EQ(cublasLtLoggerSetLevel(0), CUBLAS_STATUS_SUCCESS);
  EXPECT_NE(a_failing_matmul(), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(messages().empty());
  ASSERT_EQ(cublasLtLoggerSetLevel(5), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(preference), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(has(5, "cublasLtMatmulPreferenceCreate"));
}

TEST_F(cublaslt_logger, a_mask_selects_errors_alone_and_levels_outside_0_to_5_are_refused) {
  ASSERT_EQ(cublasLtLoggerSetMask(1), CUBLAS_STATUS_SUCCESS);
  EXPECT_NE(a_failing_matmul(), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(has(1, "cublasLtMatmulAlgoGetHeuristic"));
  EXPECT_FALSE(has(5, "cublasLtCreate"));
  EXPECT_EQ(cublasLtLoggerSetLevel(6), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtLoggerSetLevel(-1), CUBLAS_STATUS_INVALID_VALUE);
}

TEST_F(cublaslt_logger, without_a_callback_the_log_goes_to_the_file_opened) {
  ASSERT_EQ(cublasLtLoggerSetCallback(nullptr), CUBLAS_STATUS_SUCCESS);
  std::string const path = ::testing::TempDir() + "cublaslt_logger_test.log";
  ASSERT_EQ(cublasLtLoggerOpenFile(path.c_str()), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtLoggerSetLevel(1), CUBLAS_STATUS_SUCCESS);
  EXPECT_NE(a_failing_matmul(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtLoggerSetLevel(0), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtLoggerSetFile(stdout), CUBLAS_STATUS_SUCCESS);  // closes nothing of ours
  std::ifstream file{path};
  std::string const text{std::istreambuf_iterator<char>{file}, std::istreambuf_iterator<char>{}};
  EXPECT_NE(text.find("cublasLtMatmulAlgoGetHeuristic"), std::string::npos) << text;
  static_cast<void>(std::remove(path.c_str()));
}

// "Disable logging for the entire session": in a child process, so that the tests after it log.
TEST_F(cublaslt_logger, force_disable_silences_it_for_the_rest_of_the_process) {
  EXPECT_EXIT(
      {
        static_cast<void>(cublasLtLoggerForceDisable());
        static_cast<void>(cublasLtLoggerSetLevel(5));
        static_cast<void>(a_failing_matmul());
        std::exit(messages().empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace

// CUBLASLT_LOG_LEVEL and CUBLASLT_LOG_FILE ("%i" the process id), read before the first use:
// run by its own ctest entry with them set (sim/tests/CMakeLists.txt), skipped otherwise.
TEST(cublaslt_logger_environment, the_level_and_file_come_from_the_environment) {
  char const* const file = std::getenv("CUBLASLT_LOG_FILE");
  if (std::getenv("CUBLASLT_LOG_LEVEL") == nullptr || file == nullptr) {
    GTEST_SKIP() << "run with CUBLASLT_LOG_LEVEL and CUBLASLT_LOG_FILE set";
  }
  cublasLtMatmulDesc_t matmul = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(
      cublasLtMatmulDescGetAttribute(matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, nullptr, 0, nullptr),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescDestroy(matmul), CUBLAS_STATUS_SUCCESS);
  std::string path{file};
  if (std::size_t const at = path.find("%i"); at != std::string::npos) {
    path.replace(at, 2, std::to_string(static_cast<long>(getpid())));
  }
  std::ifstream log{path};
  std::string const text{std::istreambuf_iterator<char>{log}, std::istreambuf_iterator<char>{}};
  EXPECT_NE(text.find("cublasLtMatmulDescGetAttribute"), std::string::npos) << path << ": " << text;
  static_cast<void>(std::remove(path.c_str()));
}
