// Softmax cross-entropy over the logits of a language model with its gradient, for fp32, fp16
// and bf16 logits with fp32 math.
//
// One block per row. Pass 1: each thread keeps a running max and sum of exp(x − max) over its
// columns of the first `vocab` (16-byte packs where the pointers and the row length allow), and
// a fixed shuffle tree, then the warps' results in warp order, give the row's max and sum.
// Pass 2: each thread rewrites the columns it read with (softmax − onehot) · scale / M, zero in
// the padded columns. The row's loss, logsumexp − logit[target], goes to the workspace; then a
// single block adds the M losses in row order (contiguous runs, whose sums are added in order)
// and writes the mean. No atomics: the bits depend on the inputs alone.
//
// In place (dlogits == logits): in pass 2 every thread writes only the columns it read itself in
// pass 1, and the target's logit, which another thread may write, is read before the barrier
// that ends pass 1.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/cross_entropy_problem.hpp>

#include "detail/element_conversion.cuh"
#include "ops/op_kernels.hpp"

namespace graphstep::ops {
namespace {

using graphstep::detail::from_float;
using graphstep::detail::to_float;

constexpr int threads = 512;        // per row: 50304 bf16 logits are 12 or 13 packs a thread
constexpr int mean_threads = 1024;  // the single block that adds the row losses

// `width` elements of T moved as one transaction (16 bytes when width = 16 / sizeof(T)).
template <typename T, int width>
struct alignas(sizeof(T) * width) pack {
  T v[width];
};

__device__ __forceinline__ float quiet_nan() {
  return __int_as_float(0x7FC00000);
}

// Adds x to a running (max, Σ exp(· − max)). Starting from max = −FLT_MAX rather than −inf keeps
// exp(−inf − max) = 0 for a logit of −inf; a NaN logit makes the sum NaN.
__device__ __forceinline__ void add_logit(float& top, float& sum, float x) {
  if (x > top) {
    sum = sum * expf(top - x) + 1.0F;
    top = x;
  } else {
    sum += expf(x - top);
  }
}

// (top, sum) ⊕ (other_top, other_sum), in that order.
__device__ __forceinline__ void combine(float& top, float& sum, float other_top, float other_sum) {
  float const both = fmaxf(top, other_top);
  sum = sum * expf(top - both) + other_sum * expf(other_top - both);
  top = both;
}

// Lane 0 ends with the warp's (top, sum), combined in a fixed tree.
__device__ __forceinline__ void warp_combine(float& top, float& sum) {
  constexpr unsigned full = 0xFFFFFFFFU;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    float const other_top = __shfl_down_sync(full, top, offset);
    float const other_sum = __shfl_down_sync(full, sum, offset);
    combine(top, sum, other_top, other_sum);
  }
}

template <typename T, int width>
__global__ void __launch_bounds__(threads)
    rows_kernel(float* __restrict__ row_loss, T* dlogits, T const* logits,
                std::int32_t const* __restrict__ targets, std::int64_t vocab,
                std::int64_t padded_vocab, float factor) {
  constexpr int warps = threads / 32;
  __shared__ float warp_top[warps];
  __shared__ float warp_sum[warps];
  __shared__ float row_top;
  __shared__ float row_sum;
  std::int64_t const row = blockIdx.x;
  T const* const x = logits + row * padded_vocab;
  T* const d = dlogits + row * padded_vocab;
  std::int64_t const target = targets[row];
  bool const valid = target >= 0 && target < vocab;
  int const lane = static_cast<int>(threadIdx.x) % 32;
  int const warp = static_cast<int>(threadIdx.x) / 32;

  // Pass 1 over the packs holding classes; vectorized: padded_vocab % width == 0.
  float top = -FLT_MAX;
  float sum = 0.0F;
  std::int64_t const class_packs = (vocab + width - 1) / width;
  for (std::int64_t p = threadIdx.x; p < class_packs; p += threads) {
    pack<T, width> const v = *reinterpret_cast<pack<T, width> const*>(x + p * width);
#pragma unroll
    for (int k = 0; k < width; ++k) {
      if (p * width + k < vocab) add_logit(top, sum, to_float(v.v[k]));
    }
  }
  float const picked = (threadIdx.x == 0 && valid) ? to_float(x[target]) : 0.0F;
  warp_combine(top, sum);
  if (lane == 0) {
    warp_top[warp] = top;
    warp_sum[warp] = sum;
  }
  __syncthreads();  // ends pass 1: nothing below writes before every read above is done
  if (warp == 0) {
    top = lane < warps ? warp_top[lane] : -FLT_MAX;
    sum = lane < warps ? warp_sum[lane] : 0.0F;
    warp_combine(top, sum);
    if (lane == 0) {
      row_top = top;
      row_sum = sum;
    }
  }
  __syncthreads();
  top = row_top;
  float const inverse = 1.0F / row_sum;

  // Pass 2 over every pack of the row.
  float const nan = quiet_nan();
  std::int64_t const packs = padded_vocab / width;
  for (std::int64_t p = threadIdx.x; p < packs; p += threads) {
    pack<T, width> v = *reinterpret_cast<pack<T, width> const*>(x + p * width);
#pragma unroll
    for (int k = 0; k < width; ++k) {
      std::int64_t const column = p * width + k;
      float g = 0.0F;
      if (!valid) {
        g = nan;
      } else if (column < vocab) {
        float const probability = expf(to_float(v.v[k]) - top) * inverse;
        g = (column == target ? probability - 1.0F : probability) * factor;
      }
      v.v[k] = from_float<T>(g);
    }
    *reinterpret_cast<pack<T, width>*>(d + p * width) = v;
  }
  if (threadIdx.x == 0) row_loss[row] = valid ? (top - picked) + logf(row_sum) : nan;
}

// loss[0] = (Σ_r row_loss[r]) / rows: thread t adds a contiguous run of rows in order, then 32
// threads add 32 consecutive runs each in order, then one thread adds those 32 in order.
__global__ void __launch_bounds__(mean_threads)
    mean_kernel(float* __restrict__ loss, float const* __restrict__ row_loss, std::int64_t rows) {
  __shared__ float runs[mean_threads];
  __shared__ float groups[mean_threads / 32];
  std::int64_t const per_thread = (rows + mean_threads - 1) / mean_threads;
  std::int64_t const first = std::int64_t{threadIdx.x} * per_thread;
  std::int64_t const end = first + per_thread < rows ? first + per_thread : rows;
  float sum = 0.0F;
  for (std::int64_t r = first; r < end; ++r) sum += row_loss[r];
  runs[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x < mean_threads / 32) {
    float group = 0.0F;
    for (int i = 0; i < 32; ++i) group += runs[threadIdx.x * 32 + i];
    groups[threadIdx.x] = group;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0F;
    for (float const group : groups) total += group;
    loss[0] = total / static_cast<float>(rows);
  }
}

bool aligned(void const* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

template <typename T>
void forward_backward_of(float* loss, void* dlogits, void const* logits,
                         std::int32_t const* targets, cross_entropy_shape const& s, float factor,
                         float* row_loss, cuda::stream_view stream) {
  constexpr int width = 16 / static_cast<int>(sizeof(T));
  auto const grid = static_cast<unsigned>(s.rows);
  if (s.padded_vocab % width == 0 && aligned(logits) && aligned(dlogits)) {
    rows_kernel<T, width><<<grid, threads, 0, stream.get()>>>(
        row_loss, static_cast<T*>(dlogits), static_cast<T const*>(logits), targets, s.vocab,
        s.padded_vocab, factor);
  } else {
    rows_kernel<T, 1><<<grid, threads, 0, stream.get()>>>(row_loss, static_cast<T*>(dlogits),
                                                          static_cast<T const*>(logits), targets,
                                                          s.vocab, s.padded_vocab, factor);
  }
  mean_kernel<<<1, mean_threads, 0, stream.get()>>>(loss, row_loss, s.rows);
}

}  // namespace

namespace detail {

void cross_entropy_forward_backward(cross_entropy_shape const& shape, dtype type, float* loss,
                                    void* dlogits, void const* logits, std::int32_t const* targets,
                                    float gradient_scale, float* row_loss,
                                    cuda::stream_view stream) {
  float const factor = gradient_scale / static_cast<float>(shape.rows);
  switch (type) {
    case dtype::float32:
      forward_backward_of<float>(loss, dlogits, logits, targets, shape, factor, row_loss, stream);
      break;
    case dtype::float16:
      forward_backward_of<__half>(loss, dlogits, logits, targets, shape, factor, row_loss, stream);
      break;
    case dtype::bfloat16:
      forward_backward_of<__nv_bfloat16>(loss, dlogits, logits, targets, shape, factor, row_loss,
                                         stream);
      break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("cross_entropy", type);
  }
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace detail
}  // namespace graphstep::ops
