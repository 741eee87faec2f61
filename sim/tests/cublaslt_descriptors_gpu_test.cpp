// cuBLASLt's descriptors as cublasLt.h documents them: attributes read back as they were set, the
// size query of GetAttribute, the documented defaults, and descriptors initialized in the
// caller's storage (cublasLt*Init) that a matmul then uses.

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim_test.hpp"

namespace {

using cublaslt_descriptors = sim_testing::gpu_test;

TEST_F(cublaslt_descriptors, attributes_read_back_as_set_and_defaults_as_documented) {
  cublasLtMatmulDesc_t matmul = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  // "Default value is: CUBLASLT_EPILOGUE_DEFAULT"; transposes default to CUBLAS_OP_N.
  std::uint32_t epilogue = 0;
  std::size_t written = 0;
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                           sizeof epilogue, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(epilogue, CUBLASLT_EPILOGUE_DEFAULT);
  EXPECT_EQ(written, sizeof epilogue);
  cublasOperation_t const transposed = CUBLAS_OP_T;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(matmul, CUBLASLT_MATMUL_DESC_TRANSA, &transposed,
                                           sizeof transposed),
            CUBLAS_STATUS_SUCCESS);
  std::int32_t transa = -1;
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(matmul, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                           sizeof transa, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(transa, CUBLAS_OP_T);
  cublasComputeType_t compute{};
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(matmul, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &compute,
                                           sizeof compute, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(compute, CUBLAS_COMPUTE_32F);
  EXPECT_EQ(cublasLtMatmulDescDestroy(matmul), CUBLAS_STATUS_SUCCESS);

  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, 64, 32, 64), CUBLAS_STATUS_SUCCESS);
  std::int32_t batches = 0;
  std::int32_t order = -1;
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batches,
                                             sizeof batches, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ORDER, &order,
                                             sizeof order, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(batches, 1);                 // "Default value: 1"
  EXPECT_EQ(order, CUBLASLT_ORDER_COL);  // "Default value: CUBLASLT_ORDER_COL"
  std::uint64_t rows = 0;
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows,
                                             sizeof rows, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(rows, 64U);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(layout), CUBLAS_STATUS_SUCCESS);

  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  std::uint64_t workspace = 1;
  EXPECT_EQ(
      cublasLtMatmulPreferenceGetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace, sizeof workspace, nullptr),
      CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(workspace, 0U);  // "Default is 0 (no workspace memory allowed)"
  std::uint64_t const allowed = 1U << 20U;
  ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(
                preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &allowed, sizeof allowed),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(
      cublasLtMatmulPreferenceGetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace, sizeof workspace, nullptr),
      CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(workspace, allowed);
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(preference), CUBLAS_STATUS_SUCCESS);
}

// "sizeWritten ... if sizeInBytes is 0: number of bytes needed to write full contents";
// CUBLAS_STATUS_INVALID_VALUE "if sizeInBytes is 0 and sizeWritten is NULL, or if sizeInBytes is
// non-zero and buf is NULL or sizeInBytes doesn't match size of internal storage".
TEST_F(cublaslt_descriptors, get_attribute_answers_the_size_and_refuses_a_wrong_one) {
  cublasLtMatmulDesc_t matmul = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  std::size_t needed = 0;
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0,
                                           &needed),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(needed, sizeof(void*));
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0,
                                           nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  std::uint32_t too_small = 0;
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &too_small,
                                           sizeof too_small, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr,
                                           sizeof(void*), nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescDestroy(matmul), CUBLAS_STATUS_SUCCESS);
}

// cublasLt*Init: "Initialize ... descriptor in pre-allocated space", CUBLAS_STATUS_ALLOC_FAILED
// "if size of the pre-allocated space is insufficient".
TEST_F(cublaslt_descriptors, descriptors_initialized_in_place_run_a_matmul) {
  cublasLtMatmulDescOpaque_t matmul{};
  cublasLtMatrixLayoutOpaque_t square{};
  cublasLtMatmulPreferenceOpaque_t preference{};
  ASSERT_EQ(cublasLtMatmulDescInit(&matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutInit(&square, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulPreferenceInit(&preference), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescInit_internal(&matmul, 8, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_ALLOC_FAILED);
  EXPECT_EQ(cublasLtMatrixLayoutInit_internal(&square, 8, CUDA_R_32F, 2, 2, 2),
            CUBLAS_STATUS_ALLOC_FAILED);
  EXPECT_EQ(cublasLtMatmulPreferenceInit_internal(&preference, 8), CUBLAS_STATUS_ALLOC_FAILED);

  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  // Column-major: A = [[1, 2], [3, 4]], B = [[5, 6], [7, 8]]; D = A B = [[19, 22], [43, 50]].
  std::vector<float> const a{1, 3, 2, 4};
  std::vector<float> const b{5, 7, 6, 8};
  void* memory = nullptr;
  SIM_TEST_TRY(cudaMalloc(&memory, 12 * sizeof(float)));
  auto* const device = static_cast<float*>(memory);
  SIM_TEST_TRY(cudaMemcpy(device, a.data(), 4 * sizeof(float), cudaMemcpyHostToDevice));
  SIM_TEST_TRY(cudaMemcpy(device + 4, b.data(), 4 * sizeof(float), cudaMemcpyHostToDevice));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, &matmul, &square, &square, &square, &square,
                                           &preference, 1, &result, &found),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  float const one = 1.0F;
  float const zero = 0.0F;
  EXPECT_EQ(
      cublasLtMatmul(handle, &matmul, &one, device, &square, device + 4, &square, &zero, device + 8,
                     &square, device + 8, &square, &result.algo, nullptr, 0, nullptr),
      CUBLAS_STATUS_SUCCESS);
  std::vector<float> d(4);
  SIM_TEST_TRY(cudaMemcpy(d.data(), device + 8, 4 * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(d, (std::vector<float>{19, 43, 22, 50}));
  SIM_TEST_TRY(cudaFree(memory));
  EXPECT_EQ(cublasLtDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
