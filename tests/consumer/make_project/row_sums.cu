// The launches: plain CUDA, compiled by nvcc on a GPU machine and, here, rewritten by
// graphstep_rewrite_launches and compiled as C++ for the simulated device.
#include "row_sums.cuh"
#include "row_sums.hpp"

namespace consumer {

template <typename T>
cudaError_t launch_row_sums(T const* matrix, T* sums, int rows, int cols, cudaStream_t stream) {
  row_sums<<<rows, warp_lanes, 0, stream>>>(matrix, sums, cols);  // T deduced from the arguments
  return cudaGetLastError();
}

template cudaError_t launch_row_sums(int const*, int*, int, int, cudaStream_t);
template cudaError_t launch_row_sums(double const*, double*, int, int, cudaStream_t);

}  // namespace consumer
