#pragma once

// D = A·B for 1×1 fp32 matrices, as a trainer calls cuBLASLt: descriptors made per call, on the
// stream it is given (the legacy stream when a port forgets to pass one). For the tests of a
// capture broken inside a library call.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace graphstep::testing {

inline cublasStatus_t multiply_1x1(cublasLtHandle_t handle, float* d, float const* a,
                                   float const* b, cudaStream_t stream) {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasStatus_t status = cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 1, 1, 1);
  }
  float const one = 1.0F;
  float const zero = 0.0F;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmul(handle, desc, &one, a, layout, b, layout, &zero, d, layout, d, layout,
                            nullptr, nullptr, 0, stream);
  }
  if (layout != nullptr) static_cast<void>(cublasLtMatrixLayoutDestroy(layout));
  if (desc != nullptr) static_cast<void>(cublasLtMatmulDescDestroy(desc));
  return status;
}

}  // namespace graphstep::testing
