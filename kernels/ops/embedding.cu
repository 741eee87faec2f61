// Token + position embedding of a language model, forward and backward, for fp32, fp16 and
// bf16 storage with fp32 math. 16-byte loads and stores where every pointer allows and C is a
// multiple of the pack; one element at a time otherwise.
//
// The backward has no floating-point atomics. The position gradient is one thread per
// (t, pack) adding the B rows in increasing b. The token gradient is one block per position p
// and channel tile, which scans the ids in steps (each thread checks 8 consecutive ids, two
// 16-byte loads): in the steps before p the block leaves as soon as one finds p's id (p is not
// its first position); in the steps after p it collects the later positions with that id in
// increasing order (an exclusive scan of the threads' hit counts places them in shared memory).
// Then one thread per pack of channels adds p's dout row and the collected ones, in that order.
// So each row of the token gradient has one owner that sums in increasing position, and the
// bits depend on the ids alone.
//
// A first occurrence scans all B·T ids, a repeat until an earlier one (for the benchmark's
// 16 × 1024 ids, at most 16384 per block, from L1 and L2): cheap beside the dout and table
// traffic. Rows of ids that do not occur are zeroed by a separate kernel, only when the gradient
// is written rather than accumulated.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/embedding_problem.hpp>

#include "detail/element_conversion.cuh"
#include "ops/op_kernels.hpp"

namespace graphstep::ops {
namespace {

using graphstep::detail::from_float;
using graphstep::detail::to_float;

constexpr int threads = 256;  // the element-wise kernels
// Token gradient blocks: one pack per thread, at most this many threads (then more tiles).
constexpr int max_gather_threads = static_cast<int>(embedding_problem::max_gather_threads);
constexpr int min_gather_threads = 64;  // enough threads to scan ids quickly
constexpr int ids_per_thread = 8;       // ids each thread checks per step of a scan

// `width` elements of T moved as one transaction (16 bytes when width = 16 / sizeof(T)).
template <typename T, int width>
struct alignas(sizeof(T) * width) pack {
  T v[width];
};

template <typename T, int width>
__device__ __forceinline__ pack<T, width> load(T const* p) {
  return *reinterpret_cast<pack<T, width> const*>(p);
}
template <typename T, int width>
__device__ __forceinline__ void store(T* p, pack<T, width> const& values) {
  *reinterpret_cast<pack<T, width>*>(p) = values;
}

// out[p, col..col+width) = token_table[id, ...] + position_table[p mod T, ...], or NaN for an
// id outside the vocabulary.
template <typename T, int width>
__global__ void __launch_bounds__(threads)
    forward_kernel(T* __restrict__ out, std::int32_t const* __restrict__ tokens,
                   T const* __restrict__ token_table, T const* __restrict__ position_table,
                   std::int64_t positions, std::int64_t sequence, std::int64_t vocab,
                   std::int64_t channels) {
  std::int64_t const packs_per_row = channels / width;
  std::int64_t const total = positions * packs_per_row;
  std::int64_t const stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    std::int64_t const p = i / packs_per_row;
    std::int64_t const col = (i - p * packs_per_row) * width;
    std::int64_t const id = tokens[p];
    pack<T, width> result{};
    if (id >= 0 && id < vocab) {
      pack<T, width> const token = load<T, width>(token_table + id * channels + col);
      pack<T, width> const position =
          load<T, width>(position_table + (p % sequence) * channels + col);
#pragma unroll
      for (int k = 0; k < width; ++k) {
        result.v[k] = from_float<T>(to_float(token.v[k]) + to_float(position.v[k]));
      }
    } else {
#pragma unroll
      for (int k = 0; k < width; ++k) result.v[k] = from_float<T>(__int_as_float(0x7FC00000));
    }
    store<T, width>(out + p * channels + col, result);
  }
}

// position_gradient[t, :] = Σ_b dout[b·T + t, :] in increasing b; i runs over the packs of the
// [T, C] gradient, whose flat index is the same in every batch slice of dout.
template <typename T, int width>
__global__ void __launch_bounds__(threads)
    position_gradient_kernel(T* __restrict__ gradient, T const* __restrict__ dout,
                             std::int64_t batch, std::int64_t slice) {
  std::int64_t const total = slice / width;
  std::int64_t const stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    float sum[width];
#pragma unroll
    for (int k = 0; k < width; ++k) sum[k] = 0.0F;
#pragma unroll 4
    for (std::int64_t b = 0; b < batch; ++b) {
      pack<T, width> const d = load<T, width>(dout + b * slice + i * width);
#pragma unroll
      for (int k = 0; k < width; ++k) sum[k] += to_float(d.v[k]);
    }
    pack<T, width> result{};
#pragma unroll
    for (int k = 0; k < width; ++k) result.v[k] = from_float<T>(sum[k]);
    store<T, width>(gradient + i * width, result);
  }
}

template <typename T, int width>
__global__ void __launch_bounds__(threads) zero_kernel(T* __restrict__ data, std::int64_t count) {
  std::int64_t const stride = std::int64_t{gridDim.x} * blockDim.x;
  pack<T, width> zero{};
#pragma unroll
  for (int k = 0; k < width; ++k) zero.v[k] = from_float<T>(0.0F);
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count / width;
       i += stride) {
    store<T, width>(data + i * width, zero);
  }
}

// The exclusive prefix sum of `value` over the threads of the block, in thread order, and the
// block's total. Every thread of the block must call it.
__device__ __forceinline__ int block_exclusive_scan(int value, int* warp_totals, int& total) {
  constexpr unsigned full = 0xFFFFFFFFU;
  int const lane = static_cast<int>(threadIdx.x) % 32;
  int const warp = static_cast<int>(threadIdx.x) / 32;
  int const warps = static_cast<int>(blockDim.x) / 32;
  int inclusive = value;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    int const below = __shfl_up_sync(full, inclusive, d);
    if (lane >= d) inclusive += below;
  }
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  int before = 0;
  total = 0;
  for (int w = 0; w < warps; ++w) {
    int const t = warp_totals[w];
    if (w < warp) before += t;
    total += t;
  }
  __syncthreads();  // every thread has read the totals before the next scan writes them
  return before + inclusive - value;
}

// sum += the dout rows `rows[0..count)` at this thread's pack, in list order; four loads in
// flight before their adds, which stay in order.
template <typename T, int width>
__device__ __forceinline__ void add_rows(float (&sum)[width], T const* dout, int const* rows,
                                         int count, std::int64_t channels, std::int64_t col) {
  int i = 0;
  for (; i + 4 <= count; i += 4) {
    pack<T, width> d[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) d[j] = load<T, width>(dout + rows[i + j] * channels + col);
#pragma unroll
    for (auto const& row : d) {
#pragma unroll
      for (int k = 0; k < width; ++k) sum[k] += to_float(row.v[k]);
    }
  }
  for (; i < count; ++i) {
    pack<T, width> const d = load<T, width>(dout + rows[i] * channels + col);
#pragma unroll
    for (int k = 0; k < width; ++k) sum[k] += to_float(d.v[k]);
  }
}

// Bit k set where tokens[first + k] == id, for the positions below `positions`. Thread t of a
// scan checks the ids_per_thread consecutive positions from base + t·ids_per_thread: two 16-byte
// loads when `vector_ids` (tokens 16-byte aligned; base and first stay multiples of 8).
__device__ __forceinline__ unsigned matches(std::int32_t const* tokens, int first, int positions,
                                            std::int32_t id, bool vector_ids) {
  static_assert(ids_per_thread == 8, "two int4 loads");
  unsigned bits = 0;
  if (vector_ids && first + ids_per_thread <= positions) {
    int4 const a = *reinterpret_cast<int4 const*>(tokens + first);
    int4 const b = *reinterpret_cast<int4 const*>(tokens + first + 4);
    bits = static_cast<unsigned>(a.x == id) | static_cast<unsigned>(a.y == id) << 1U |
           static_cast<unsigned>(a.z == id) << 2U | static_cast<unsigned>(a.w == id) << 3U |
           static_cast<unsigned>(b.x == id) << 4U | static_cast<unsigned>(b.y == id) << 5U |
           static_cast<unsigned>(b.z == id) << 6U | static_cast<unsigned>(b.w == id) << 7U;
  } else {
#pragma unroll
    for (int k = 0; k < ids_per_thread; ++k) {
      int const q = first + k;
      if (q < positions && tokens[q] == id) bits |= 1U << static_cast<unsigned>(k);
    }
  }
  return bits;
}

// Block (p, tile): if p is the first position of its id, gradient[id, tile] (+)= the dout rows of
// every position with that id, in increasing position. One scan over the ids: the steps before
// p leave as soon as one finds the id (p is not its first position), the steps after p collect
// the later positions in order. Dynamic shared memory: the list, 2 steps of ids.
template <typename T, int width>
__global__ void __launch_bounds__(max_gather_threads)
    token_gradient_kernel(T* __restrict__ gradient, T const* __restrict__ dout,
                          std::int32_t const* __restrict__ tokens, int positions,
                          std::int64_t vocab, std::int64_t channels, bool accumulate,
                          bool vector_ids) {
  extern __shared__ int later[];
  __shared__ int warp_totals[max_gather_threads / 32];
  auto const p = static_cast<int>(blockIdx.x);
  std::int32_t const id = tokens[p];
  if (id < 0 || id >= vocab) return;  // the whole block: ignored
  auto const block = static_cast<int>(blockDim.x);
  int const step = block * ids_per_thread;
  int const capacity = 2 * step;

  std::int64_t const col = (std::int64_t{blockIdx.y} * block + threadIdx.x) * width;
  bool const owns = col < channels;  // vectorized: channels % width == 0, whole packs
  float sum[width];
#pragma unroll
  for (int k = 0; k < width; ++k) sum[k] = 0.0F;

  int listed = 0;  // entries in `later`, the same in every thread
  for (int base = 0; base < positions; base += step) {
    int const first = base + static_cast<int>(threadIdx.x) * ids_per_thread;
    unsigned const bits = matches(tokens, first, positions, id, vector_ids);
    int const at_p = p - first;  // the bit of position p, if in range
    if (base < p) {              // an earlier position has the id: not p's row to sum
      unsigned const below = at_p <= 0 ? 0U : (at_p >= ids_per_thread ? 0xFFU : (1U << at_p) - 1U);
      if (__syncthreads_or((bits & below) != 0U) != 0) return;
      if (base + step <= p) continue;
    }
    if (base <= p) {  // p's own row first (the step holding p)
      if (owns) add_rows<T, width>(sum, dout, &p, 1, channels, col);
    }
    if (base + step <= p + 1) continue;  // nothing after p in this step
    unsigned const above =
        at_p < 0 ? 0xFFU : (at_p >= ids_per_thread - 1 ? 0U : 0xFFU & ~((2U << at_p) - 1U));
    unsigned const hits = bits & above;
    // Each thread's hits go after those of the threads before it: in increasing position.
    if (__syncthreads_or(hits != 0U) != 0) {
      int total = 0;
      int at = listed + block_exclusive_scan(__popc(hits), warp_totals, total);
#pragma unroll
      for (int k = 0; k < ids_per_thread; ++k) {
        if (((hits >> k) & 1U) != 0U) later[at++] = first + k;
      }
      listed += total;
    }
    if (listed > capacity - step) {  // the next step might not fit: add these rows now
      __syncthreads();
      if (owns) add_rows<T, width>(sum, dout, later, listed, channels, col);
      listed = 0;
      __syncthreads();  // every thread has read the list before it is written again
    }
  }
  if (listed > 0) {
    __syncthreads();
    if (owns) add_rows<T, width>(sum, dout, later, listed, channels, col);
  }
  if (!owns) return;

  T* const row = gradient + std::int64_t{id} * channels + col;
  pack<T, width> result{};
  if (accumulate) {
    pack<T, width> const old = load<T, width>(row);
#pragma unroll
    for (int k = 0; k < width; ++k) result.v[k] = from_float<T>(to_float(old.v[k]) + sum[k]);
  } else {
#pragma unroll
    for (int k = 0; k < width; ++k) result.v[k] = from_float<T>(sum[k]);
  }
  store<T, width>(row, result);
}

unsigned grid_for(std::int64_t work) {
  std::int64_t const blocks = (work + threads - 1) / threads;
  constexpr std::int64_t most = std::int64_t{65535} * 8;
  return static_cast<unsigned>(blocks < most ? (blocks > 0 ? blocks : 1) : most);
}

bool aligned(void const* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

template <typename T>
constexpr int pack_width = 16 / static_cast<int>(sizeof(T));

template <typename T, int width>
void forward(void* out, std::int32_t const* tokens, void const* token_table,
             void const* position_table, embedding_shape const& s, cuda::stream_view stream) {
  std::int64_t const positions = s.batch * s.sequence;
  forward_kernel<T, width>
      <<<grid_for(positions * (s.channels / width)), threads, 0, stream.get()>>>(
          static_cast<T*>(out), tokens, static_cast<T const*>(token_table),
          static_cast<T const*>(position_table), positions, s.sequence, s.vocab, s.channels);
}

template <typename T>
void forward(void* out, std::int32_t const* tokens, void const* token_table,
             void const* position_table, embedding_shape const& s, cuda::stream_view stream) {
  constexpr int width = pack_width<T>;
  if (s.channels % width == 0 && aligned(out) && aligned(token_table) && aligned(position_table)) {
    forward<T, width>(out, tokens, token_table, position_table, s, stream);
  } else {
    forward<T, 1>(out, tokens, token_table, position_table, s, stream);
  }
}

template <typename T, int width>
void backward(void* token_gradient, void* position_gradient, void const* dout,
              std::int32_t const* tokens, embedding_shape const& s, bool accumulate_tokens,
              cuda::stream_view stream) {
  std::int64_t const positions = s.batch * s.sequence;
  auto* const tokens_out = static_cast<T*>(token_gradient);
  auto const* const d = static_cast<T const*>(dout);
  if (!accumulate_tokens) {  // rows of ids that occur are written over below
    zero_kernel<T, width><<<grid_for(s.vocab * s.channels / width), threads, 0, stream.get()>>>(
        tokens_out, s.vocab * s.channels);
  }
  // One pack per thread, whole warps, at most max_gather_threads; wider rows take more tiles.
  std::int64_t const packs = s.channels / width;
  std::int64_t block = (packs + 31) / 32 * 32;
  block = block < min_gather_threads ? min_gather_threads
                                     : (block > max_gather_threads ? max_gather_threads : block);
  std::int64_t const tiles = (packs + block - 1) / block;
  dim3 const grid{static_cast<unsigned>(positions), static_cast<unsigned>(tiles)};
  // The list of later positions holds two steps of the scan.
  std::size_t const list_bytes = 2 * static_cast<std::size_t>(block) * ids_per_thread * sizeof(int);
  token_gradient_kernel<T, width><<<grid, static_cast<unsigned>(block), list_bytes, stream.get()>>>(
      tokens_out, d, tokens, static_cast<int>(positions), s.vocab, s.channels, accumulate_tokens,
      aligned(tokens));
  std::int64_t const slice = s.sequence * s.channels;
  position_gradient_kernel<T, width><<<grid_for(slice / width), threads, 0, stream.get()>>>(
      static_cast<T*>(position_gradient), d, s.batch, slice);
}

template <typename T>
void backward(void* token_gradient, void* position_gradient, void const* dout,
              std::int32_t const* tokens, embedding_shape const& s, bool accumulate_tokens,
              cuda::stream_view stream) {
  constexpr int width = pack_width<T>;
  if (s.channels % width == 0 && aligned(token_gradient) && aligned(position_gradient) &&
      aligned(dout)) {
    backward<T, width>(token_gradient, position_gradient, dout, tokens, s, accumulate_tokens,
                       stream);
  } else {
    backward<T, 1>(token_gradient, position_gradient, dout, tokens, s, accumulate_tokens, stream);
  }
}

}  // namespace

namespace detail {

void embedding_forward(embedding_shape const& shape, dtype type, void* out,
                       std::int32_t const* tokens, void const* token_table,
                       void const* position_table, cuda::stream_view stream) {
  switch (type) {
    case dtype::float32:
      forward<float>(out, tokens, token_table, position_table, shape, stream);
      break;
    case dtype::float16:
      forward<__half>(out, tokens, token_table, position_table, shape, stream);
      break;
    case dtype::bfloat16:
      forward<__nv_bfloat16>(out, tokens, token_table, position_table, shape, stream);
      break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("embedding_forward", type);
  }
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void embedding_backward(embedding_shape const& shape, dtype type, void* token_gradient,
                        void* position_gradient, void const* dout, std::int32_t const* tokens,
                        bool accumulate_tokens, cuda::stream_view stream) {
  switch (type) {
    case dtype::float32:
      backward<float>(token_gradient, position_gradient, dout, tokens, shape, accumulate_tokens,
                      stream);
      break;
    case dtype::float16:
      backward<__half>(token_gradient, position_gradient, dout, tokens, shape, accumulate_tokens,
                       stream);
      break;
    case dtype::bfloat16:
      backward<__nv_bfloat16>(token_gradient, position_gradient, dout, tokens, shape,
                              accumulate_tokens, stream);
      break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("embedding_backward", type);
  }
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace detail
}  // namespace graphstep::ops
