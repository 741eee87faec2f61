#pragma once
// What the host code sees of the kernels: plain C++ and the CUDA runtime's types.

#include <cuda_runtime_api.h>

namespace consumer {

/// sums[row] = the sum of row `row` of the row-major `rows` x `cols` matrix, on `stream`.
template <typename T>
cudaError_t launch_row_sums(T const* matrix, T* sums, int rows, int cols, cudaStream_t stream);

}  // namespace consumer
