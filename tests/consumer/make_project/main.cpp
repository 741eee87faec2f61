// A program built by a plain Makefile against an installed graphstep (pkg-config): graphstep's
// stream, and kernels of its own from a header, run on the simulated device; the results are
// read back and checked against the same sums computed on the host.
#include <cuda_runtime.h>  // cudaMalloc for any pointer type

#include <cstdio>
#include <graphstep/graphstep.hpp>
#include <vector>

#include "row_sums.hpp"

namespace {

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t const status = (call);                                           \
    if (status != cudaSuccess) {                                                 \
      std::printf("consumer: %s failed: %s\n", #call, cudaGetErrorName(status)); \
      return 1;                                                                  \
    }                                                                            \
  } while (false)

// Sums every row of a `rows` x `cols` matrix of T on the device and on the host; 0 when they
// agree exactly (the values are small integers, exact in T whatever the order of the additions).
template <typename T>
int check_row_sums(graphstep::cuda::stream const& stream, int rows, int cols) {
  std::vector<T> matrix(static_cast<std::size_t>(rows) * cols);
  std::vector<T> expected(rows);
  for (int row = 0; row < rows; ++row) {
    for (int col = 0; col < cols; ++col) {
      T const value = static_cast<T>((row * 7 + col * 3) % 11 - 5);
      matrix[static_cast<std::size_t>(row) * cols + col] = value;
      expected[row] += value;
    }
  }
  T* device_matrix = nullptr;
  T* device_sums = nullptr;
  CHECK(cudaMalloc(&device_matrix, matrix.size() * sizeof(T)));
  CHECK(cudaMalloc(&device_sums, rows * sizeof(T)));
  CHECK(cudaMemcpyAsync(device_matrix, matrix.data(), matrix.size() * sizeof(T),
                        cudaMemcpyHostToDevice, stream.get()));
  CHECK(consumer::launch_row_sums(device_matrix, device_sums, rows, cols, stream.get()));
  std::vector<T> sums(rows);
  CHECK(cudaMemcpyAsync(sums.data(), device_sums, rows * sizeof(T), cudaMemcpyDeviceToHost,
                        stream.get()));
  stream.synchronize();
  CHECK(cudaFree(device_matrix));
  CHECK(cudaFree(device_sums));
  for (int row = 0; row < rows; ++row) {
    if (sums[row] != expected[row]) {
      std::printf("consumer: row %d sums to %g on the device, %g on the host\n", row,
                  static_cast<double>(sums[row]), static_cast<double>(expected[row]));
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main() {
  namespace gs = graphstep;
  if (gs::version() != GRAPHSTEP_VERSION) {
    std::printf("consumer: compiled against graphstep %d, linked with %s\n", GRAPHSTEP_VERSION,
                gs::version_string());
    return 1;
  }
  gs::cuda::stream const stream;
  int const rows = 24;
  int const cols = 100;  // not a multiple of the warp: the last lanes add fewer elements
  if (check_row_sums<int>(stream, rows, cols) != 0) return 1;
  if (check_row_sums<double>(stream, rows, cols) != 0) return 1;
  std::printf("consumer: graphstep %s, %d row sums of int and double agree with the host's\n",
              gs::version_string(), rows);
  return 0;
}
