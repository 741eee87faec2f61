// Kernels and runtime calls as CUDA trainers write them: cache-hinted loads and stores, CUDA's
// min and max overloads, clocks, half-precision atomics, reductions whose upper threads return
// before a barrier, kernels opting into more dynamic shared memory, managed memory with its
// advice and prefetches, the profiler calls and an executable graph's flags. Each call that
// must refuse an argument is checked for the error the CUDA Runtime API documents. Plain CUDA:
// on the simulated device they check the simulator, on a GPU the tests themselves.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "sim_test.hpp"

namespace {

class device_functions : public sim_testing::gpu_test {
 protected:
  // A refused call sets the thread's last error too; clear it so later launches start clean.
  static void expect_refused(cudaError_t returned, cudaError_t expected) {
    EXPECT_EQ(returned, expected) << cudaGetErrorName(returned);
    static_cast<void>(cudaGetLastError());
  }
};

using sim_testing::read_back;

// --- cache-hinted loads and stores -------------------------------------------------------------

struct hinted_buffers {
  float f[4];
  float4 f4[4];
  int2 i2[4];
  unsigned long long u64[4];
  double d[4];
  __half h[4];
  __nv_bfloat162 b2[4];
};

// Each element goes through one hinted load and one hinted store; the values arrive unchanged.
__global__ void copy_with_cache_hints(hinted_buffers const* in, hinted_buffers* out) {
  int const i = static_cast<int>(threadIdx.x);
  __stcs(&out->f[i], __ldcs(&in->f[i]) + __ldg(&in->f[i]));
  __stcg(&out->f4[i], __ldcg(&in->f4[i]));
  __stwb(&out->i2[i], __ldca(&in->i2[i]));
  __stwt(&out->u64[i], __ldlu(&in->u64[i]));
  __stcs(&out->d[i], __ldcv(&in->d[i]));
  __stcg(&out->h[i], __ldg(&in->h[i]));
  __stwt(&out->b2[i], __ldcs(&in->b2[i]));
}

TEST_F(device_functions, cache_hinted_loads_and_stores_move_values_unchanged) {
  hinted_buffers host{};
  for (int i = 0; i < 4; ++i) {
    auto const x = static_cast<float>(i) + 0.25F;
    host.f[i] = x;
    host.f4[i] = make_float4(x, -x, 2 * x, -2 * x);
    host.i2[i] = make_int2(-i, 7 * i);
    host.u64[i] = 0x0123456789ABCDEFULL + static_cast<unsigned long long>(i);
    host.d[i] = 1.0 / (i + 3);
    host.h[i] = __float2half(x);
    host.b2[i] = __floats2bfloat162_rn(x, -x);
  }
  hinted_buffers* in = nullptr;
  hinted_buffers* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&in, sizeof host));
  SIM_TEST_TRY(cudaMalloc(&out, sizeof host));
  sim_testing::copy_to_device(in, &host, sizeof host);
  copy_with_cache_hints<<<1, 4>>>(in, out);
  SIM_TEST_TRY(cudaGetLastError());
  hinted_buffers const got = read_back(out, 1).front();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got.f[i], 2 * host.f[i]);
    EXPECT_EQ(got.f4[i].x, host.f4[i].x);
    EXPECT_EQ(got.f4[i].w, host.f4[i].w);
    EXPECT_EQ(got.i2[i].x, host.i2[i].x);
    EXPECT_EQ(got.i2[i].y, host.i2[i].y);
    EXPECT_EQ(got.u64[i], host.u64[i]);
    EXPECT_EQ(got.d[i], host.d[i]);
    EXPECT_EQ(__half2float(got.h[i]), __half2float(host.h[i]));
    EXPECT_EQ(__low2float(got.b2[i]), __low2float(host.b2[i]));
    EXPECT_EQ(__high2float(got.b2[i]), __high2float(host.b2[i]));
  }
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

// --- min and max: CUDA Math API overloads ------------------------------------------------------

struct min_max_results {
  unsigned mixed_min;  // min(int, unsigned int) compares as unsigned int
  unsigned mixed_max;
  long long ll_min;
  unsigned long long ull_mixed_max;  // max(long long, unsigned long long) as unsigned long long
  int int_max;
  float float_min_nan;      // min(NaN, x) is x, as fminf
  double float_double_max;  // max(float, double) is a double
};

__global__ void mins_and_maxes(min_max_results* out, int minus_one, unsigned one, float nan) {
  out->mixed_min = min(minus_one, one);
  out->mixed_max = max(minus_one, one);
  out->ll_min = min(-5LL, 3LL);
  out->ull_mixed_max = max(-1LL, 2ULL);
  out->int_max = max(minus_one, -7);
  out->float_min_nan = min(nan, 2.5F);
  out->float_double_max = max(1.5F, 0.1);
}

TEST_F(device_functions, min_and_max_take_cudas_overloads_for_mixed_types) {
  min_max_results* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&out, sizeof(min_max_results)));
  mins_and_maxes<<<1, 1>>>(out, -1, 1U, std::numeric_limits<float>::quiet_NaN());
  SIM_TEST_TRY(cudaGetLastError());
  min_max_results const got = read_back(out, 1).front();
  EXPECT_EQ(got.mixed_min, 1U);
  EXPECT_EQ(got.mixed_max, 0xFFFFFFFFU);
  EXPECT_EQ(got.ll_min, -5LL);
  EXPECT_EQ(got.ull_mixed_max, std::numeric_limits<unsigned long long>::max());
  EXPECT_EQ(got.int_max, -1);
  EXPECT_EQ(got.float_min_nan, 2.5F);
  EXPECT_EQ(got.float_double_max, 1.5);
  SIM_TEST_TRY(cudaFree(out));
}

// --- clocks ------------------------------------------------------------

__global__ void read_clocks(long long* elapsed, int* clock_ran) {
  long long const start = clock64();
  clock_t const coarse = clock();
  long long const end = clock64();
  *elapsed = end - start;
  *clock_ran = clock() >= coarse ? 1 : 0;
}

TEST_F(device_functions, clock64_and_clock_never_go_back) {
  long long* elapsed = nullptr;
  int* ran = nullptr;
  SIM_TEST_TRY(cudaMalloc(&elapsed, sizeof(long long)));
  SIM_TEST_TRY(cudaMalloc(&ran, sizeof(int)));
  read_clocks<<<1, 1>>>(elapsed, ran);
  SIM_TEST_TRY(cudaGetLastError());
  EXPECT_GE(read_back(elapsed, 1).front(), 0);
  EXPECT_EQ(read_back(ran, 1).front(), 1);
  SIM_TEST_TRY(cudaFree(elapsed));
  SIM_TEST_TRY(cudaFree(ran));
}

// --- pointers to volatile memory ----------------------------------------------------------------

// A flag written through a pointer to volatile, as kernels that poll across blocks take it.
__global__ void raise_flag(volatile int* flag, int const* value) {
  if (threadIdx.x == 0) *flag = *value;
}

TEST_F(device_functions, a_kernel_takes_a_pointer_to_volatile_memory) {
  int* flag = nullptr;
  int* value = nullptr;
  SIM_TEST_TRY(cudaMalloc(&flag, sizeof(int)));
  SIM_TEST_TRY(cudaMalloc(&value, sizeof(int)));
  int const seven = 7;
  SIM_TEST_TRY(cudaMemcpy(value, &seven, sizeof seven, cudaMemcpyHostToDevice));
  SIM_TEST_TRY(cudaMemset(flag, 0, sizeof(int)));
  raise_flag<<<1, 32>>>(flag, value);
  SIM_TEST_TRY(cudaGetLastError());
  EXPECT_EQ(read_back(flag, 1).front(), 7);
  SIM_TEST_TRY(cudaFree(flag));
  SIM_TEST_TRY(cudaFree(value));
}

// --- half-precision atomics ----------------------------------------------------------------------

struct half_sums {
  __half h;
  __half2 h2;
  __nv_bfloat16 b;
  __nv_bfloat162 b2;
};

__global__ void add_halves(half_sums* sums) {
  atomicAdd(&sums->h, __float2half(1.0F));
  atomicAdd(&sums->h2, __floats2half2_rn(1.0F, 0.5F));
  atomicAdd(&sums->b, __float2bfloat16(1.0F));
  atomicAdd(&sums->b2, __floats2bfloat162_rn(1.0F, 2.0F));
}

TEST_F(device_functions, half_and_bfloat16_atomic_adds_from_every_thread_all_count) {
  half_sums* sums = nullptr;
  SIM_TEST_TRY(cudaMalloc(&sums, sizeof(half_sums)));
  SIM_TEST_TRY(cudaMemset(sums, 0, sizeof(half_sums)));  // 0 bits are +0 in both formats
  add_halves<<<4, 64>>>(sums);  // 256 additions each, exact in both formats
  SIM_TEST_TRY(cudaGetLastError());
  half_sums const got = read_back(sums, 1).front();
  EXPECT_EQ(__half2float(got.h), 256.0F);
  EXPECT_EQ(__low2float(got.h2), 256.0F);
  EXPECT_EQ(__high2float(got.h2), 128.0F);
  EXPECT_EQ(__bfloat162float(got.b), 256.0F);
  EXPECT_EQ(__low2float(got.b2), 256.0F);
  EXPECT_EQ(__high2float(got.b2), 512.0F);
  SIM_TEST_TRY(cudaFree(sums));
}

// --- barriers after early exits ------------------------------------------------------------------

constexpr int reduction_threads = 64;

// The upper threads of the block return at once; the others reduce in shared memory with
// __syncthreads between the steps. Exited threads do not hold up a barrier (PTX ISA, "exit").
__global__ void sum_after_upper_threads_return(float const* in, float* out) {
  __shared__ float partial[reduction_threads];
  int const t = static_cast<int>(threadIdx.x);
  if (t >= reduction_threads) return;
  partial[t] = in[blockIdx.x * reduction_threads + t];
  __syncthreads();
  for (int half = reduction_threads / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

// The lower warp returns (thread 0 among them) and the upper warps meet at barriers; the last
// count takes only the threads that are left.
__global__ void sum_after_lower_threads_return(int const* in, int* out, int* counted) {
  __shared__ int partial[96];
  int const t = static_cast<int>(threadIdx.x);
  if (t < 32) return;
  partial[t - 32] = in[t - 32];
  __syncthreads();
  if (t == 32) {
    int sum = 0;
    for (int i = 0; i < 96; ++i) sum += partial[i];
    *out = sum;
  }
  int const count = __syncthreads_count(1);
  if (t == 32) *counted = count;
}

// Whole warps return; the warps left reduce with shuffles over full masks.
__global__ void warp_sum_after_upper_warps_return(int const* in, int* out) {
  if (threadIdx.x >= 32) return;
  int value = in[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xffffffffU, value, offset);
  __syncthreads();
  if (threadIdx.x == 0) *out = value;
}

// The upper half of the warp returns; the lanes left vote and see who is active. "All
// non-exited threads named in mask must execute the same intrinsic" (Programming Guide, "Warp
// Vote Functions"): exited lanes vote 0.
__global__ void vote_after_upper_lanes_return(unsigned* out) {
  if (threadIdx.x >= 16) return;
  unsigned const voted = __ballot_sync(0xffffffffU, 1);
  unsigned const active = __activemask();
  if (threadIdx.x == 0) {
    out[0] = voted;
    out[1] = active;
  }
}

TEST_F(device_functions, exited_lanes_vote_zero_and_are_not_active) {
  unsigned* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&out, 2 * sizeof(unsigned)));
  vote_after_upper_lanes_return<<<1, 32>>>(out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<unsigned> const got = read_back(out, 2);
  EXPECT_EQ(got[0], 0xFFFFU);
  EXPECT_EQ(got[1], 0xFFFFU);
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(device_functions, a_block_reduction_whose_upper_threads_return_before_the_barrier_sums) {
  constexpr int blocks = 3;
  std::vector<float> host(static_cast<std::size_t>(blocks * reduction_threads));
  std::iota(host.begin(), host.end(), 1.0F);
  float* in = nullptr;
  float* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&in, host.size() * sizeof(float)));
  SIM_TEST_TRY(cudaMalloc(&out, blocks * sizeof(float)));
  sim_testing::copy_to_device(in, host.data(), host.size() * sizeof(float));
  sum_after_upper_threads_return<<<blocks, 256>>>(in, out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<float> const sums = read_back(out, blocks);
  for (int b = 0; b < blocks; ++b) {
    double const first = 1.0 + b * reduction_threads;
    double const expected =
        reduction_threads * first + reduction_threads * (reduction_threads - 1) / 2.0;
    EXPECT_EQ(static_cast<double>(sums[static_cast<std::size_t>(b)]), expected) << "block " << b;
  }
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

TEST_F(device_functions, barriers_complete_when_the_lower_threads_and_whole_warps_return) {
  std::vector<int> host(96);
  std::iota(host.begin(), host.end(), 1);
  int* in = nullptr;
  int* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&in, host.size() * sizeof(int)));
  SIM_TEST_TRY(cudaMalloc(&out, 2 * sizeof(int)));
  sim_testing::copy_to_device(in, host.data(), host.size() * sizeof(int));
  sum_after_lower_threads_return<<<1, 128>>>(in, out, out + 1);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<int> got = read_back(out, 2);
  EXPECT_EQ(got[0], 96 * 97 / 2);
  EXPECT_EQ(got[1], 96);  // __syncthreads_count counts the threads that reached it
  warp_sum_after_upper_warps_return<<<1, 128>>>(in, out);
  SIM_TEST_TRY(cudaGetLastError());
  got = read_back(out, 1);
  EXPECT_EQ(got[0], 32 * 33 / 2);
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

// Every thread of an 80-thread block (two full warps and a partial one) votes at the block
// barrier: __syncthreads_count counts the non-zero predicates, _and and _or combine them
// (Programming Guide, "Synchronization Functions").
__global__ void block_votes(int* out) {
  int const t = static_cast<int>(threadIdx.x);
  int const thirds = __syncthreads_count(t % 3 == 0);
  int const all_below = __syncthreads_and(t < 80);
  int const some_odd = __syncthreads_and(t % 2 == 1);
  int const any_last = __syncthreads_or(t == 79);
  int const none = __syncthreads_or(t > 1000);
  if (t == 5) {
    out[0] = thirds;
    out[1] = all_below;
    out[2] = some_odd;
    out[3] = any_last;
    out[4] = none;
  }
}

TEST_F(device_functions, block_votes_count_and_combine_every_threads_predicate) {
  int* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&out, 5 * sizeof(int)));
  block_votes<<<2, 80>>>(out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<int> const got = read_back(out, 5);
  EXPECT_EQ(got[0], 27);  // 0, 3, ..., 78
  EXPECT_NE(got[1], 0);
  EXPECT_EQ(got[2], 0);
  EXPECT_NE(got[3], 0);
  EXPECT_EQ(got[4], 0);
  SIM_TEST_TRY(cudaFree(out));
}

// The two halves of each warp take different branches and shuffle within their own half, each
// with its own mask: both exchanges complete, each with the values of its own lanes.
__global__ void half_warps_shuffle_apart(int* out) {
  int const lane = static_cast<int>(threadIdx.x % 32);
  int const value = static_cast<int>(threadIdx.x) * 10;
  int got = 0;
  if (lane < 16) {
    got = __shfl_xor_sync(0x0000FFFFU, value, 1);
    got += __shfl_sync(0x0000FFFFU, value, 15);
  } else {
    got = __shfl_down_sync(0xFFFF0000U, value, 2, 16);
  }
  out[threadIdx.x] = got;
}

TEST_F(device_functions, half_warps_with_their_own_masks_shuffle_apart) {
  int* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&out, 64 * sizeof(int)));
  half_warps_shuffle_apart<<<1, 64>>>(out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<int> const got = read_back(out, 64);
  for (int t = 0; t < 64; ++t) {
    int const lane = t % 32;
    int const warp_first = t - lane;
    int expected = 0;
    if (lane < 16) {
      expected = (t ^ 1) * 10 + (warp_first + 15) * 10;
    } else {
      // Within its 16-lane segment, a lane 2 from the segment's end keeps its own value.
      expected = ((lane - 16) + 2 < 16 ? t + 2 : t) * 10;
    }
    EXPECT_EQ(got[static_cast<std::size_t>(t)], expected) << "thread " << t;
  }
  SIM_TEST_TRY(cudaFree(out));
}

// --- kernel attributes: more dynamic shared memory
// ------------------------------------------------

constexpr int large_shared_ints = 25 * 1024;  // 100 KiB: above the default 48 KiB

__global__ void reverse_through_large_shared(int const* in, int* out) {
  extern __shared__ int staged[];
  for (int i = static_cast<int>(threadIdx.x); i < large_shared_ints; i += blockDim.x)
    staged[i] = in[i];
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < large_shared_ints; i += blockDim.x) {
    out[i] = staged[large_shared_ints - 1 - i];
  }
}

TEST_F(device_functions, a_kernel_that_sets_its_dynamic_shared_memory_limit_launches_with_more) {
  std::size_t const bytes = large_shared_ints * sizeof(int);
  std::vector<int> host(large_shared_ints);
  std::iota(host.begin(), host.end(), 0);
  int* in = nullptr;
  int* out = nullptr;
  SIM_TEST_TRY(cudaMalloc(&in, bytes));
  SIM_TEST_TRY(cudaMalloc(&out, bytes));
  sim_testing::copy_to_device(in, host.data(), bytes);
  // Without the attribute, more than 48 KiB of dynamic shared memory is refused at launch.
  reverse_through_large_shared<<<1, 256, bytes>>>(in, out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  SIM_TEST_TRY(cudaFuncSetAttribute(reverse_through_large_shared,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
  cudaFuncAttributes attributes{};
  SIM_TEST_TRY(cudaFuncGetAttributes(&attributes, reverse_through_large_shared));
  EXPECT_EQ(attributes.maxDynamicSharedSizeBytes, static_cast<int>(bytes));
  reverse_through_large_shared<<<1, 256, bytes>>>(in, out);
  SIM_TEST_TRY(cudaGetLastError());
  std::vector<int> const got = read_back(out, host.size());
  for (int i = 0; i < large_shared_ints; ++i) {
    ASSERT_EQ(got[static_cast<std::size_t>(i)], large_shared_ints - 1 - i) << "element " << i;
  }
  // The C form, through the kernel's address, reaches the same setting.
  SIM_TEST_TRY(cudaFuncSetAttribute(
      reinterpret_cast<void const*>(&reverse_through_large_shared),
      cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  SIM_TEST_TRY(cudaFuncGetAttributes(&attributes, reverse_through_large_shared));
  EXPECT_EQ(attributes.preferredShmemCarveout, 100);
  SIM_TEST_TRY(cudaFree(in));
  SIM_TEST_TRY(cudaFree(out));
}

__global__ void no_op() {}

// cudaFuncSetAttribute: "If the specified attribute cannot be written, or if the value is
// incorrect, then cudaErrorInvalidValue is returned."
TEST_F(device_functions, kernel_attributes_out_of_range_are_refused) {
  int optin = 0;
  SIM_TEST_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  expect_refused(
      cudaFuncSetAttribute(no_op, cudaFuncAttributeMaxDynamicSharedMemorySize, optin + 1),
      cudaErrorInvalidValue);
  expect_refused(cudaFuncSetAttribute(no_op, cudaFuncAttributeMaxDynamicSharedMemorySize, -1),
                 cudaErrorInvalidValue);
  expect_refused(cudaFuncSetAttribute(no_op, cudaFuncAttributePreferredSharedMemoryCarveout, 101),
                 cudaErrorInvalidValue);
  expect_refused(cudaFuncSetAttribute(no_op, cudaFuncAttributePreferredSharedMemoryCarveout, -2),
                 cudaErrorInvalidValue);
  expect_refused(cudaFuncSetAttribute(no_op, cudaFuncAttributeNonPortableClusterSizeAllowed, 2),
                 cudaErrorInvalidValue);
  expect_refused(cudaFuncSetAttribute(no_op, cudaFuncAttributeClusterSchedulingPolicyPreference, 7),
                 cudaErrorInvalidValue);
  cudaFuncAttributes attributes{};
  expect_refused(cudaFuncGetAttributes(nullptr, reinterpret_cast<void const*>(&no_op)),
                 cudaErrorInvalidValue);
  SIM_TEST_TRY(cudaFuncGetAttributes(&attributes, no_op));
  EXPECT_GE(attributes.maxThreadsPerBlock, 1);
  SIM_TEST_TRY(
      cudaFuncSetAttribute(no_op, cudaFuncAttributePreferredSharedMemoryCarveout, 0));
  no_op<<<1, 1>>>();
  SIM_TEST_TRY(cudaGetLastError());
  SIM_TEST_TRY(cudaDeviceSynchronize());
}

// --- managed memory ----------------------------------------------------------------------------

__global__ void fill_squares(int* out, int n) {
  int const i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = i * i;
}

TEST_F(device_functions, managed_memory_written_by_a_kernel_is_read_by_the_host_after_a_sync) {
  constexpr int n = 1000;
  int* values = nullptr;
  SIM_TEST_TRY(cudaMallocManaged(&values, n * sizeof(int)));
  cudaPointerAttributes pointer{};
  SIM_TEST_TRY(cudaPointerGetAttributes(&pointer, values));
  EXPECT_EQ(pointer.type, cudaMemoryTypeManaged);
  for (int i = 0; i < n; ++i) values[i] = -1;  // the host writes it directly
  fill_squares<<<(n + 127) / 128, 128>>>(values, n);
  SIM_TEST_TRY(cudaGetLastError());
  SIM_TEST_TRY(cudaDeviceSynchronize());
  for (int i = 0; i < n; ++i) ASSERT_EQ(values[i], i * i) << "element " << i;
  SIM_TEST_TRY(cudaFree(values));
}

TEST_F(device_functions, managed_memory_advice_and_prefetches_take_documented_arguments) {
  int managed = 0;
  SIM_TEST_TRY(cudaDeviceGetAttribute(&managed, cudaDevAttrConcurrentManagedAccess, 0));
  if (managed == 0) GTEST_SKIP() << "the device cannot prefetch managed memory";
  constexpr std::size_t bytes = std::size_t{1} << 20;
  void* data = nullptr;
  SIM_TEST_TRY(cudaMallocManaged(&data, bytes, cudaMemAttachHost));
  cudaStream_t stream = nullptr;
  SIM_TEST_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaMemLocation const device0{cudaMemLocationTypeDevice, 0};
  cudaMemLocation const host{cudaMemLocationTypeHost, 0};
  SIM_TEST_TRY(cudaMemAdvise(data, bytes, cudaMemAdviseSetReadMostly, device0));
  SIM_TEST_TRY(cudaMemAdvise(data, bytes, cudaMemAdviseSetPreferredLocation, device0));
  SIM_TEST_TRY(cudaMemAdvise(data, bytes, cudaMemAdviseSetAccessedBy, host));
  SIM_TEST_TRY(cudaMemAdvise(data, bytes / 2, cudaMemAdviseUnsetPreferredLocation, host));
  SIM_TEST_TRY(cudaMemPrefetchAsync(data, bytes, device0, 0, stream));
  SIM_TEST_TRY(cudaMemPrefetchAsync(data, bytes, host, 0, stream));
  SIM_TEST_TRY(cudaStreamSynchronize(stream));
  SIM_TEST_TRY(cudaStreamDestroy(stream));
  SIM_TEST_TRY(cudaFree(data));
}

TEST_F(device_functions, managed_memory_calls_refuse_what_the_documentation_excludes) {
  void* data = nullptr;
  // "If size is 0, cudaMallocManaged returns cudaErrorInvalidValue"; flags "must be either
  // cudaMemAttachGlobal or cudaMemAttachHost".
  expect_refused(cudaMallocManaged(&data, 0), cudaErrorInvalidValue);
  expect_refused(cudaMallocManaged(&data, 64, cudaMemAttachSingle), cudaErrorInvalidValue);
  constexpr std::size_t bytes = 4096;
  SIM_TEST_TRY(cudaMallocManaged(&data, bytes));
  void* plain = nullptr;
  SIM_TEST_TRY(cudaMalloc(&plain, bytes));
  cudaMemLocation const device0{cudaMemLocationTypeDevice, 0};
  cudaMemLocation const no_such_device{cudaMemLocationTypeDevice, 1000};
  cudaMemLocation const numa_current{cudaMemLocationTypeHostNumaCurrent, 0};
  // Advice: an unknown advice (7: no enumerator, but within the enumeration's range, so that
  // passing it is defined), memory cudaMalloc returned, a device that does not exist, and a
  // location type SetAccessedBy does not take.
  expect_refused(cudaMemAdvise(data, bytes, static_cast<cudaMemoryAdvise>(7), device0),
                 cudaErrorInvalidValue);
  expect_refused(cudaMemAdvise(plain, bytes, cudaMemAdviseSetReadMostly, device0),
                 cudaErrorInvalidValue);
  expect_refused(cudaMemAdvise(data, bytes, cudaMemAdviseSetPreferredLocation, no_such_device),
                 cudaErrorInvalidDevice);
  expect_refused(cudaMemAdvise(data, bytes, cudaMemAdviseSetAccessedBy, numa_current),
                 cudaErrorInvalidValue);
  // Prefetches: flags "must be zero now", managed memory only, a device that exists.
  expect_refused(cudaMemPrefetchAsync(data, bytes, device0, 1, cudaStreamLegacy),
                 cudaErrorInvalidValue);
  expect_refused(cudaMemPrefetchAsync(plain, bytes, device0, 0, cudaStreamLegacy),
                 cudaErrorInvalidValue);
  expect_refused(cudaMemPrefetchAsync(data, bytes, no_such_device, 0, cudaStreamLegacy),
                 cudaErrorInvalidDevice);
  SIM_TEST_TRY(cudaDeviceSynchronize());
  SIM_TEST_TRY(cudaFree(plain));
  SIM_TEST_TRY(cudaFree(data));
}

// --- profiler control and executable graph flags
// ---------------------------------------------------

TEST_F(device_functions, profiler_start_and_stop_succeed) {
  EXPECT_EQ(cudaProfilerStart(), cudaSuccess);
  EXPECT_EQ(cudaProfilerStart(), cudaSuccess);  // "already enabled ... has no effect"
  EXPECT_EQ(cudaProfilerStop(), cudaSuccess);
}

TEST_F(device_functions, an_executable_graph_reports_the_flags_it_was_instantiated_with) {
  cudaGraph_t graph = nullptr;
  SIM_TEST_TRY(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t node = nullptr;
  SIM_TEST_TRY(cudaGraphAddEmptyNode(&node, graph, nullptr, 0));
  cudaGraphExec_t plain = nullptr;
  cudaGraphExec_t auto_free = nullptr;
  SIM_TEST_TRY(cudaGraphInstantiateWithFlags(&plain, graph, 0));
  SIM_TEST_TRY(
      cudaGraphInstantiateWithFlags(&auto_free, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  unsigned long long flags = 99;
  SIM_TEST_TRY(cudaGraphExecGetFlags(plain, &flags));
  EXPECT_EQ(flags, 0ULL);
  SIM_TEST_TRY(cudaGraphExecGetFlags(auto_free, &flags));
  EXPECT_EQ(flags, static_cast<unsigned long long>(cudaGraphInstantiateFlagAutoFreeOnLaunch));
  expect_refused(cudaGraphExecGetFlags(plain, nullptr), cudaErrorInvalidValue);
  SIM_TEST_TRY(cudaGraphExecDestroy(plain));
  SIM_TEST_TRY(cudaGraphExecDestroy(auto_free));
  SIM_TEST_TRY(cudaGraphDestroy(graph));
}

}  // namespace
