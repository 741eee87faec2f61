// Kernels in plain CUDA whose results the host can predict: indices over 1-D, 2-D and 3-D grids,
// barriers and shared memory, warp shuffles and votes, atomics, dynamic shared memory, half and
// bfloat16, and arguments copied when a launch is captured. On the simulated device they check
// how it runs kernels from their source; on a GPU the same tests check the tests.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "sim_test.hpp"

namespace {

__global__ void write_global_index(unsigned* out, dim3 grid, dim3 block) {
  unsigned const block_id = blockIdx.x + grid.x * (blockIdx.y + grid.y * blockIdx.z);
  unsigned const thread_id = threadIdx.x + block.x * (threadIdx.y + block.y * threadIdx.z);
  unsigned const threads = block.x * block.y * block.z;
  if (blockDim.x != block.x || gridDim.z != grid.z) return;  // the built-ins agree
  out[block_id * threads + thread_id] = block_id * 1000U + thread_id;
}

template <int threads>
__global__ void block_sum(float const* in, float* out) {
  __shared__ float partial[threads];
  int const t = static_cast<int>(threadIdx.x);
  partial[t] = in[blockIdx.x * threads + t];
  __syncthreads();
  for (int half = threads / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

__global__ void warp_sums(int const* in, int* out) {
  int value = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xffffffffU, value, offset);
  if (threadIdx.x % 32 == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = value;
}

// Each lane takes the value of the lane after it (the last lane the first's).
template <typename T>
__global__ void rotate_in_warp(T const* in, T* out) {
  unsigned const lane = threadIdx.x % 32U;
  out[threadIdx.x] = __shfl_sync(0xffffffffU, in[threadIdx.x], static_cast<int>((lane + 1U) % 32U));
}

__global__ void odd_lanes(unsigned* out) {
  unsigned const bits = __ballot_sync(0xffffffffU, threadIdx.x % 2 == 1);
  if (threadIdx.x == 0) out[blockIdx.x] = bits;
}

__global__ void count_up(int* counter, float* total) {
  atomicAdd(counter, 1);
  atomicAdd(total, 0.5F);
}

__global__ void reverse_in_shared(int const* in, int* out, int n) {
  extern __shared__ int staged[];
  int const t = static_cast<int>(threadIdx.x);
  staged[t] = in[t];
  __syncthreads();
  if (t < n) out[t] = staged[n - 1 - t];
}

__global__ void round_trip_narrow(float const* in, float* half_out, float* bf16_out, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  half_out[i] = __half2float(__float2half(in[i]));
  bf16_out[i] = __bfloat162float(__float2bfloat16(in[i]));
}

__global__ void gradient_step(float const* w, float const* g, float lr, float* out, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = w[i] - lr * g[i];
}

__global__ void store_value(int* out, int value) {
  *out = value;
}

class kernel_execution : public sim_testing::gpu_test {};

using sim_testing::read_back;

TEST_F(kernel_execution, every_thread_of_1d_2d_and_3d_grids_runs_once_with_its_indices) {
  for (auto const& [grid, block] : {std::pair{dim3{7}, dim3{64}}, std::pair{dim3{3, 2}, dim3{8, 4}},
                                    std::pair{dim3{2, 3, 2}, dim3{4, 2, 3}}}) {
    std::size_t const count =
        static_cast<std::size_t>(grid.x) * grid.y * grid.z * block.x * block.y * block.z;
    unsigned* out = nullptr;
    SIM_TEST_TRY(cudaMalloc(&out, count * sizeof(unsigned)));
    SIM_TEST_TRY(cudaMemset(out, 0xFF, count * sizeof(unsigned)));
    write_global_index<<<grid, block>>>(out, grid, block);
    SIM_TEST_TRY(cudaGetLastError());
    std::vector<unsigned> const host = read_back(out, count);
    unsigned const threads = block.x * block.y * block.z;
    for (std::size_t i = 0; i < count; ++i) {
      unsigned const b = static_cast<unsigned>(i) / threads;
      unsigned const t = static_cast<unsigned>(i) % threads;
      ASSERT_EQ(host[i], b * 1000U + t) << "element " << i;
    }
    SIM_TEST_TRY(cudaFree(out));
  }
}

template <int threads>
void check_block_sums() {
  int const blocks = 5;
  std::vector<float> host(static_cast<std::size_t>(blocks * threads));
  std::iota(host.begin(), host.end(), 0.0F);
  float* in = nullptr;
  float* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&in, host.size() * sizeof(float)));
  SIM_TEST_TRY(cudaMalloc(&out, blocks * sizeof(float)));
  sim_testing::copy_to_device(in, host.data(), host.size() * sizeof(float));
  block_sum<threads><<<blocks, threads>>>(in, out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<float> const sums = read_back(out, blocks);
  for (int b = 0; b < blocks; ++b) {
    double const first = static_cast<double>(b) * threads;
    double const expected = threads * first + threads * (threads - 1) / 2.0;
    EXPECT_EQ(static_cast<double>(sums[static_cast<std::size_t>(b)]), expected) << "block " << b;
  }
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(kernel_execution, a_shared_memory_tree_reduction_meets_at_every_barrier) {
  check_block_sums<256>();
  check_block_sums<1024>();
}

TEST_F(kernel_execution, warp_shuffles_and_votes_exchange_values_within_each_warp) {
  int const threads = 128;
  std::vector<int> host(threads * 2);
  std::iota(host.begin(), host.end(), 1);
  int* in = nullptr;
  int* out = nullptr;
  unsigned* votes = nullptr;
  SIM_TEST_TRY(cudaMalloc(&in, host.size() * sizeof(int)));
  SIM_TEST_TRY(cudaMalloc(&out, host.size() / 32 * sizeof(int)));
  SIM_TEST_TRY(cudaMalloc(&votes, 2 * sizeof(unsigned)));
  sim_testing::copy_to_device(in, host.data(), host.size() * sizeof(int));
  warp_sums<<<2, threads>>>(in, out);
  odd_lanes<<<2, 64>>>(votes);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<int> const sums = read_back(out, host.size() / 32);
  for (std::size_t w = 0; w < sums.size(); ++w) {
    int const first = static_cast<int>(w) * 32 + 1;
    EXPECT_EQ(sums[w], 32 * first + 32 * 31 / 2) << "warp " << w;
  }
  EXPECT_EQ(read_back(votes, 2), (std::vector<unsigned>{0xAAAAAAAAU, 0xAAAAAAAAU}));
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
  SIM_TEST_TRY(cudaFree(votes));
}

// A shuffle of `T` over two warps: every byte of every lane's value arrives at the lane before.
template <typename T>
void check_rotation_of(T first) {
  int const threads = 64;
  std::vector<T> values(threads);
  for (int t = 0; t < threads; ++t) {
    // Every byte differs from lane to lane.
    std::vector<unsigned char> bytes(sizeof(T));
    for (std::size_t b = 0; b < sizeof(T); ++b) bytes[b] = static_cast<unsigned char>(t * 7 + b);
    std::memcpy(static_cast<void*>(&values[t]), bytes.data(), sizeof(T));
    if (t == 0) values[t] = first;
  }
  T* in = nullptr;
  T* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&in, threads * sizeof(T)));
  SIM_TEST_TRY(cudaMalloc(&out, threads * sizeof(T)));
  sim_testing::copy_to_device(in, values.data(), threads * sizeof(T));
  rotate_in_warp<T><<<1, threads>>>(in, out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<T> const got = read_back(out, threads);
  for (int t = 0; t < threads; ++t) {
    int const from = t / 32 * 32 + (t % 32 + 1) % 32;
    EXPECT_EQ(std::memcmp(&got[t], &values[from], sizeof(T)), 0)
        << sizeof(T) << "-byte values, lane " << t << " should hold lane " << from << "'s";
  }
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(kernel_execution, shuffles_move_every_byte_of_values_of_each_size) {
  check_rotation_of<__half>(__float2half(-2.5F));
  check_rotation_of<__half2>(__floats2half2_rn(0.25F, -8.0F));
  check_rotation_of<__nv_bfloat16>(__float2bfloat16(7.0F));
  check_rotation_of<__nv_bfloat162>(__floats2bfloat162_rn(1.5F, -3.0F));
  check_rotation_of<double>(-1.0 / 3.0);
  check_rotation_of<long long>(-1234567890123456789LL);
}

TEST_F(kernel_execution, atomics_from_every_thread_of_many_blocks_all_count) {
  int* counter = nullptr;
  float* total = nullptr;
  SIM_TEST_TRY(cudaMalloc(&counter, sizeof(int)));
  SIM_TEST_TRY(cudaMalloc(&total, sizeof(float)));
  SIM_TEST_TRY(cudaMemset(counter, 0, sizeof(int)));
  SIM_TEST_TRY(cudaMemset(total, 0, sizeof(float)));
  count_up<<<40, 256>>>(counter, total);
  SIM_TEST_TRY(cudaGetLastError());
  EXPECT_EQ(read_back(counter, 1)[0], 40 * 256);
  EXPECT_EQ(read_back(total, 1)[0], 40 * 256 * 0.5F);
  SIM_TEST_TRY(cudaFree(counter));
  SIM_TEST_TRY(cudaFree(total));
}

TEST_F(kernel_execution, dynamic_shared_memory_has_the_size_of_the_launch) {
  int const n = 200;
  std::vector<int> host(n);
  std::iota(host.begin(), host.end(), 0);
  int* in = nullptr;
  int* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&in, n * sizeof(int)));
  SIM_TEST_TRY(cudaMalloc(&out, n * sizeof(int)));
  sim_testing::copy_to_device(in, host.data(), n * sizeof(int));
  reverse_in_shared<<<1, n, n * sizeof(int)>>>(in, out, n);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<int> const reversed = read_back(out, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(reversed[static_cast<std::size_t>(i)], n - 1 - i);
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

// nvcc fuses w - lr * g into one FMA (--fmad defaults to true): the product is not rounded
// before the subtraction. On the simulated device kernels are fused the same way where the host
// has an FMA unit.
TEST_F(kernel_execution, a_multiply_and_add_fuse_into_one_rounding_as_nvcc_compiles_them) {
#if defined(GRAPHSTEP_CUDA_SIM) && !defined(GRAPHSTEP_SIM_FMA)
  GTEST_SKIP() << "this build's simulated kernels round each multiply and add apart: a Debug "
                  "build, or a host without an FMA unit (GRAPHSTEP_SIM_FMA off)";
#endif
  float const w = 0.5F;
  float const g = 5.0F;
  float const lr = 0.1F;
  float* device = nullptr;
  SIM_TEST_TRY(cudaMalloc(&device, 3 * sizeof(float)));
  sim_testing::copy_to_device(device, &w, sizeof w);
  sim_testing::copy_to_device(device + 1, &g, sizeof g);
  gradient_step<<<1, 1>>>(device, device + 1, lr, device + 2, 1);
  SIM_TEST_TRY(cudaGetLastError());
  float const fused = read_back(device + 2, 1)[0];
  EXPECT_EQ(fused, std::fma(-lr, g, w)) << "one rounding: -7.45e-09";
  EXPECT_NE(fused, w - lr * g) << "two roundings (host code, no contraction): 0";
  SIM_TEST_TRY(cudaFree(device));
}

TEST_F(kernel_execution, half_and_bfloat16_round_to_nearest_even) {
  std::vector<float> const values{1.0F,        1.0F + 1.0F / 1024, 1.0F + 1.0F / 2048,
                                  3.14159265F, 65504.0F,           1.0F + 1.0F / 256};
  int const n = static_cast<int>(values.size());
  float* in = nullptr;
  float* half_out = nullptr;
  float* bf16_out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&in, n * sizeof(float)));
  SIM_TEST_TRY(cudaMalloc(&half_out, n * sizeof(float)));
  SIM_TEST_TRY(cudaMalloc(&bf16_out, n * sizeof(float)));
  sim_testing::copy_to_device(in, values.data(), n * sizeof(float));
  round_trip_narrow<<<1, 32>>>(in, half_out, bf16_out, n);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<float> const half = read_back(half_out, values.size());
  std::vector<float> const bf16 = read_back(bf16_out, values.size());
  // fp16 keeps 10 mantissa bits, bfloat16 7; a tie rounds to the even neighbour.
  EXPECT_EQ(half[1], 1.0F + 1.0F / 1024);
  EXPECT_EQ(half[2], 1.0F);  // a tie between 1 and 1 + 2^-10: even is 1
  EXPECT_EQ(half[3], 3.140625F);
  EXPECT_EQ(half[4], 65504.0F);
  EXPECT_EQ(bf16[5], 1.0F);  // 1 + 2^-8 is a tie for bfloat16: even is 1
  EXPECT_EQ(bf16[3], 3.140625F);
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(half_out));
  SIM_TEST_TRY(cudaFree(bf16_out));
}

TEST_F(kernel_execution, a_captured_launch_keeps_the_argument_values_of_its_capture) {
  cudaStream_t stream = nullptr;
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&out, sizeof(int)));
  int value = 7;
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  store_value<<<1, 1, 0, stream>>>(out, value);
  SIM_TEST_TRY(cudaStreamEndCapture(stream, &graph));
  value = 8;  // the node holds a copy of the arguments
  cudaGraphExec_t exec = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiate(&exec, graph, 0));
  SIM_TEST_TRY(cudaGraphLaunch(exec, stream));
  SIM_TEST_TRY(cudaStreamSynchronize(stream));
  EXPECT_EQ(read_back(out, 1)[0], 7);
  SIM_TEST_TRY(cudaGraphExecDestroy(exec));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
  SIM_TEST_TRY(cudaFree(out));
  SIM_TEST_TRY(cudaStreamDestroy(stream));
}

// driver_types.h describes cudaErrorInvalidConfiguration for these; an H100 with CUDA 13.0
// answers cudaErrorInvalidValue (docs/validation.md), and the simulator follows the GPU.
TEST_F(kernel_execution, a_configuration_the_device_cannot_run_is_refused_at_launch) {
  int* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&out, sizeof(int)));
  store_value<<<1, 2048>>>(out, 1);  // more threads than a block may have
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  store_value<<<0, 32>>>(out, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  store_value<<<1, 32, 200 << 10>>>(out, 1);  // more shared memory than a block may have
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  SIM_TEST_TRY(cudaFree(out));
}

}  // namespace
