// cuBLASLt's lower-level algorithm API as cublasLt.h documents it: the ids that can run, an
// algorithm initialized from one and checked against a problem, its capabilities and its
// configuration, and a matmul run with it. Written so that a GPU's many algorithms and the
// simulator's one both answer it.

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim_test.hpp"

namespace {

class cublaslt_algorithms : public sim_testing::gpu_test {
 protected:
  void SetUp() override {
    sim_testing::gpu_test::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatmulDescCreate(&matmul_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&square_, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    // Null handles are no-ops for each destroy call.
    EXPECT_EQ(cublasLtMatrixLayoutDestroy(square_), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescDestroy(matmul_), CUBLAS_STATUS_SUCCESS);
    if (handle_ != nullptr) {
      EXPECT_EQ(cublasLtDestroy(handle_), CUBLAS_STATUS_SUCCESS);
    }
  }
  // The ids for fp32 data with fp32 compute.
  std::vector<int> fp32_ids() {
    std::vector<int> ids(64);
    int found = 0;
    EXPECT_EQ(cublasLtMatmulAlgoGetIds(handle_, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                       CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                       static_cast<int>(ids.size()), ids.data(), &found),
              CUBLAS_STATUS_SUCCESS);
    ids.resize(static_cast<std::size_t>(found));
    return ids;
  }
  // An fp32 algorithm AlgoCheck accepts for the 2 x 2 problem, with its result.
  bool checked_algorithm(cublasLtMatmulAlgo_t& algo, cublasLtMatmulHeuristicResult_t& result) {
    for (int const id : fp32_ids()) {
      if (cublasLtMatmulAlgoInit(handle_, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                 CUDA_R_32F, CUDA_R_32F, id, &algo) != CUBLAS_STATUS_SUCCESS) {
        continue;
      }
      if (cublasLtMatmulAlgoCheck(handle_, matmul_, square_, square_, square_, square_, &algo,
                                  &result) == CUBLAS_STATUS_SUCCESS) {
        return true;
      }
    }
    return false;
  }

  cublasLtHandle_t handle_{};
  cublasLtMatmulDesc_t matmul_{};
  cublasLtMatrixLayout_t square_{};
};

TEST_F(cublaslt_algorithms, an_algorithm_from_the_ids_checks_and_runs_a_matmul) {
  cublasLtMatmulAlgo_t algo{};
  cublasLtMatmulHeuristicResult_t result{};
  ASSERT_TRUE(checked_algorithm(algo, result)) << "no fp32 algorithm passes AlgoCheck";
  EXPECT_EQ(result.state, CUBLAS_STATUS_SUCCESS);
  EXPECT_GT(result.wavesCount, 0.0F);
  // Column-major: A = [[1, 2], [3, 4]], B = [[5, 6], [7, 8]]; D = A B = [[19, 22], [43, 50]].
  std::vector<float> const inputs{1, 3, 2, 4, 5, 7, 6, 8};
  void* memory = nullptr;
  SIM_TEST_TRY(cudaMalloc(&memory, 12 * sizeof(float) + result.workspaceSize));
  auto* const device = static_cast<float*>(memory);
  SIM_TEST_TRY(cudaMemcpy(device, inputs.data(), 8 * sizeof(float), cudaMemcpyHostToDevice));
  float const one = 1.0F;
  float const zero = 0.0F;
  EXPECT_EQ(cublasLtMatmul(handle_, matmul_, &one, device, square_, device + 4, square_, &zero,
                           device + 8, square_, device + 8, square_, &algo,
                           result.workspaceSize > 0 ? device + 12 : nullptr, result.workspaceSize,
                           nullptr),
            CUBLAS_STATUS_SUCCESS);
  std::vector<float> d(4);
  SIM_TEST_TRY(cudaMemcpy(d.data(), device + 8, 4 * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(d, (std::vector<float>{19, 43, 22, 50}));
  SIM_TEST_TRY(cudaFree(memory));
}

// The configuration reads back as set, from cublasLt.h's defaults; a configuration the
// algorithm's capabilities exclude does not pass AlgoCheck.
TEST_F(cublaslt_algorithms, configuration_reads_back_and_an_unsupported_one_fails_the_check) {
  cublasLtMatmulAlgo_t algo{};
  cublasLtMatmulHeuristicResult_t result{};
  ASSERT_TRUE(checked_algorithm(algo, result));
  std::int32_t splitk = 0;
  std::size_t written = 0;
  ASSERT_EQ(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                                 sizeof splitk, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof splitk);
  std::int32_t supports_splitk = 0;
  ASSERT_EQ(cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT,
                                              &supports_splitk, sizeof supports_splitk, nullptr),
            CUBLAS_STATUS_SUCCESS);
  std::int32_t const four = 4;
  ASSERT_EQ(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &four,
                                                 sizeof four),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                                 sizeof splitk, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(splitk, 4);
  if (supports_splitk == 0) {
    EXPECT_NE(cublasLtMatmulAlgoCheck(handle_, matmul_, square_, square_, square_, square_, &algo,
                                      &result),
              CUBLAS_STATUS_SUCCESS);
  }
}

// "use cublasLtMatmulAlgoCapGetAttribute() with sizeInBytes=0 to query actual count".
TEST_F(cublaslt_algorithms, the_tile_ids_are_counted_then_read) {
  cublasLtMatmulAlgo_t algo{};
  cublasLtMatmulHeuristicResult_t result{};
  ASSERT_TRUE(checked_algorithm(algo, result));
  std::size_t bytes = 0;
  ASSERT_EQ(
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &bytes),
      CUBLAS_STATUS_SUCCESS);
  ASSERT_GT(bytes, 0U);
  ASSERT_EQ(bytes % sizeof(std::uint32_t), 0U);
  std::vector<std::uint32_t> tiles(bytes / sizeof(std::uint32_t));
  std::size_t written = 0;
  EXPECT_EQ(cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(),
                                              bytes, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, bytes);
}

TEST_F(cublaslt_algorithms, bad_arguments_and_a_mismatched_algorithm_are_refused) {
  std::array<int, 4> ids{};
  int found = 0;
  EXPECT_EQ(cublasLtMatmulAlgoGetIds(handle_, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                     CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 0, ids.data(), &found),
            CUBLAS_STATUS_INVALID_VALUE);  // "if requestedAlgoCount is less or equal to zero"
  ASSERT_FALSE(fp32_ids().empty());
  int const id = fp32_ids().front();
  EXPECT_EQ(cublasLtMatmulAlgoInit(handle_, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                   CUDA_R_32F, CUDA_R_32F, id, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);  // "if algo is NULL"
  cublasLtMatmulAlgo_t algo{};
  EXPECT_EQ(cublasLtMatmulAlgoInit(handle_, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                   CUDA_R_32F, CUDA_R_32F, -1, &algo),
            CUBLAS_STATUS_INVALID_VALUE);  // "algoId is outside of recognized range"
  // An algorithm made for bf16 data, checked against fp32 layouts: "CUBLAS_STATUS_INVALID_VALUE
  // if matrix layout descriptors or operation descriptor don't match algo descriptor".
  std::array<int, 64> bf16_ids{};
  int bf16_found = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetIds(
                handle_, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                CUDA_R_16BF, static_cast<int>(bf16_ids.size()), bf16_ids.data(), &bf16_found),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_GT(bf16_found, 0);
  ASSERT_EQ(cublasLtMatmulAlgoInit(handle_, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF,
                                   CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, bf16_ids[0], &algo),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  EXPECT_NE(
      cublasLtMatmulAlgoCheck(handle_, matmul_, square_, square_, square_, square_, &algo, &result),
      CUBLAS_STATUS_SUCCESS);
}

}  // namespace
