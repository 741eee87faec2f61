// Causal multi-head self-attention on CUDA cores, flash-attention style: the [T,T] score matrix
// of a head is never stored. fp32, fp16 or bf16 storage, fp32 math.
//
// Every kernel works on tiles staged in shared memory as fp32, rows padded by 4 floats so that
// the 16-byte reads of eight rows at once hit distinct banks. A block owns `rows` rows (queries,
// or keys in the dk/dv kernel) and walks the other side in tiles of `cols`. Its threads form
// rows/rm groups of 8 lanes: the thread (ty, tx) owns rows ty·rm .. ty·rm + rm − 1, the
// score columns tx, tx + 8, ... of a tile, and head-dimension columns in runs of `width`
// (width·tx + 8·width·j ...). A row's eight lanes are adjacent in one warp, so row maxima and
// sums are three xor shuffles.
//
// The head dimension is padded to the next of 16, 32, 64, 128, 256 (the `dp` of the
// instantiation) with zeros in shared memory, so that every loop over it is unrolled and the
// padding adds nothing to a dot product; results are stored for the D real columns only.
//
// forward: per query tile, an online softmax over the key tiles up to the diagonal (scores in
//   log2 units, so exp2f); writes out and logsumexp (natural log) per query.
// backward: delta[b,h,t] = Σ_d dout·out (one 8-lane group per row and head); then dq per query
//   tile over the key tiles ≤ its last query, and dk, dv per key tile over the query tiles ≥
//   its first key, each recomputing P = exp(s − logsumexp) and dS = P ⊙ (dP − delta). Each
//   output element has exactly one owner, so there are no atomics and the sums run in a fixed
//   order: the results are bitwise reproducible.
//
// Shared memory stays under the 48 KiB a block may use without opting in, which sets the tile
// sizes below (4-byte floats):
//   forward   rows·(dp+4) + 2·cols·(dp+4) + rows·(cols+4)
//   dq        2·rows·(dp+4) + 2·cols·(dp+4) + rows·(cols+4) + 2·rows
//   dk, dv    2·rows·(dp+4) + 2·cols·(dp+4) + 2·rows·(cols+4) + 2·cols
// The longest-running blocks are scheduled first: the last query tiles in the forward and dq,
// the first key tiles in dk/dv. Grids: x = batch·heads, y = row tiles.
//
// The launchers require 16-byte aligned matrices (qkv, out, dout, dqkv: every row and head
// then starts 16-byte aligned, since D is a multiple of 8), 4-byte aligned logsumexp and
// workspace, and no overlap between what a launch writes and what it reads.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/attention_problem.hpp>
#include <type_traits>

#include "detail/element_conversion.cuh"
#include "ops/op_kernels.hpp"

namespace graphstep::ops {
namespace {

using graphstep::detail::from_float;
using graphstep::detail::to_float;

constexpr float log2_e = 1.4426950408889634F;
constexpr float ln_2 = 0.69314718055994531F;
// dispatch() below tiles head dimensions up to 256, the most attention_problem lets through.
static_assert(attention_problem::max_head_dim == 256, "dispatch ends at the 256 tiling");

// dp: padded head dimension; rows: rows a block owns; cols: columns of the tiles it walks;
// rm: rows per thread.
template <int DP, int Rows, int Cols, int RM>
struct tiling {
  static constexpr int dp = DP;
  static constexpr int rows = Rows;
  static constexpr int cols = Cols;
  static constexpr int rm = RM;
  static constexpr int cn = Cols / 8;                    // score columns per thread
  static constexpr int dn = DP / 8;                      // head-dimension columns per thread
  static constexpr int width = DP / 8 < 4 ? DP / 8 : 4;  // of them adjacent in memory
  static constexpr int threads = Rows / RM * 8;
  static constexpr int stride = DP + 4;          // row stride of [.][dp] tiles
  static constexpr int score_stride = Cols + 4;  // row stride of [rows][cols] tiles
  static_assert(Rows % RM == 0 && Cols % 8 == 0 && threads % 32 == 0 && DP % 16 == 0);
};

using forward_16 = tiling<16, 64, 64, 4>;
using forward_32 = tiling<32, 64, 64, 4>;
using forward_64 = tiling<64, 64, 32, 4>;
using forward_128 = tiling<128, 32, 16, 2>;
using forward_256 = tiling<256, 16, 8, 2>;
// The backward kernels hold dout (or q and dout) beside q, k and v: narrower tiles.
using backward_16 = tiling<16, 64, 32, 4>;
using backward_32 = tiling<32, 64, 32, 4>;
using backward_64 = tiling<64, 32, 32, 2>;
using backward_128 = tiling<128, 16, 16, 1>;
using backward_256 = tiling<256, 8, 8, 1>;

// `n` elements of T moved as one access.
template <typename T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) pack {
  T v[N];
};

// Rows [0, Count) of a tile from a matrix of T with row stride `ld`, `src` at the tile's first
// row and the head's first column, into tile[Count][Stride] as fp32. Rows at or past `valid` and
// columns from `d` to DP become zero. Eight elements per access: 16 bytes of fp16 or bf16, 32 of
// fp32 (the launcher checks the alignment that needs).
template <typename T, int DP, int Stride, int Threads, int Count>
__device__ __forceinline__ void load_tile(float* tile, T const* src, std::int64_t ld, int valid,
                                          int d) {
  constexpr int chunks_per_row = DP / 8;
  for (int c = static_cast<int>(threadIdx.x); c < Count * chunks_per_row; c += Threads) {
    int const r = c / chunks_per_row;
    int const col = (c % chunks_per_row) * 8;
    float v[8];
    if (r < valid && col < d) {
      pack<T, 8> const p = *reinterpret_cast<pack<T, 8> const*>(src + r * ld + col);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = to_float(p.v[i]);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = 0.0F;
    }
    auto* const dst = reinterpret_cast<float4*>(tile + r * Stride + col);
    dst[0] = make_float4(v[0], v[1], v[2], v[3]);
    dst[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

// acc[i][j] += Σ_k a[(ty·RM + i)·Stride + k] · b[(tx + 8j)·Stride + k], k < K: a tile of
// A·Bᵀ with both operands row-major in shared memory.
template <int RM, int CN, int K, int Stride>
__device__ __forceinline__ void dot_tile(float (&acc)[RM][CN], float const* a, float const* b,
                                         int ty, int tx) {
#pragma unroll 4
  for (int k = 0; k < K; k += 4) {
    float4 av[RM];
    float4 bv[CN];
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      av[i] = *reinterpret_cast<float4 const*>(a + (ty * RM + i) * Stride + k);
    }
#pragma unroll
    for (int j = 0; j < CN; ++j) {
      bv[j] = *reinterpret_cast<float4 const*>(b + (tx + 8 * j) * Stride + k);
    }
#pragma unroll
    for (int i = 0; i < RM; ++i) {
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        acc[i][j] += av[i].x * bv[j].x;
        acc[i][j] += av[i].y * bv[j].y;
        acc[i][j] += av[i].z * bv[j].z;
        acc[i][j] += av[i].w * bv[j].w;
      }
    }
  }
}

// W adjacent floats of shared memory.
template <int W>
__device__ __forceinline__ void load_run(float* out, float const* p) {
  if constexpr (W == 4) {
    float4 const v = *reinterpret_cast<float4 const*>(p);
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
  } else {
    static_assert(W == 2);
    float2 const v = *reinterpret_cast<float2 const*>(p);
    out[0] = v.x;
    out[1] = v.y;
  }
}

// acc[i][n] += Σ_k a[(ty·RM + i)·AStride + k] · b[k·BStride + column(n)], k < K, where the
// thread's head columns are column(j·W + e) = W·tx + 8·W·j + e: a tile of A·B.
template <int RM, int DN, int W, int K, int AStride, int BStride>
__device__ __forceinline__ void accumulate_tile(float (&acc)[RM][DN], float const* a,
                                                float const* b, int ty, int tx) {
#pragma unroll 2
  for (int k = 0; k < K; k += 4) {
    float av[RM][4];
#pragma unroll
    for (int i = 0; i < RM; ++i) load_run<4>(av[i], a + (ty * RM + i) * AStride + k);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      float bv[DN];
#pragma unroll
      for (int j = 0; j < DN / W; ++j) {
        load_run<W>(bv + j * W, b + (k + kk) * BStride + W * tx + 8 * W * j);
      }
#pragma unroll
      for (int i = 0; i < RM; ++i) {
#pragma unroll
        for (int n = 0; n < DN; ++n) acc[i][n] += av[i][kk] * bv[n];
      }
    }
  }
}

// Stores row `r` of a thread's head columns, times `factor`, to `dst` (the row's head column 0)
// for the columns below d.
template <typename T, int RM, int DN, int W>
__device__ __forceinline__ void store_row(T* dst, float const (&acc)[RM][DN], int i, float factor,
                                          int tx, int d) {
#pragma unroll
  for (int j = 0; j < DN / W; ++j) {
    int const col = W * tx + 8 * W * j;
    if (col < d) {  // d is a multiple of 8, so a run is wholly in or out
      pack<T, W> p;
#pragma unroll
      for (int e = 0; e < W; ++e) p.v[e] = from_float<T>(acc[i][j * W + e] * factor);
      *reinterpret_cast<pack<T, W>*>(dst + col) = p;
    }
  }
}

__device__ __forceinline__ float max_over_row(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffU, v, 1));
  v = fmaxf(v, __shfl_xor_sync(0xffffffffU, v, 2));
  return fmaxf(v, __shfl_xor_sync(0xffffffffU, v, 4));
}

// The same sum in all eight lanes: each level adds a pair in either order, which rounds alike.
__device__ __forceinline__ float sum_over_row(float v) {
  v += __shfl_xor_sync(0xffffffffU, v, 1);
  v += __shfl_xor_sync(0xffffffffU, v, 2);
  return v + __shfl_xor_sync(0xffffffffU, v, 4);
}

// Grid: x = batch·heads, y = query tiles (last first). scale_log2 = log2(e)/√D.
template <typename T, typename C>
__global__ void __launch_bounds__(C::threads)
    attention_forward_kernel(T* __restrict__ out, float* __restrict__ logsumexp,
                             T const* __restrict__ qkv, int sequence, int heads, int d,
                             float scale_log2) {
  __shared__ __align__(16) float q_s[C::rows * C::stride];
  __shared__ __align__(16) float k_s[C::cols * C::stride];
  __shared__ __align__(16) float v_s[C::cols * C::stride];
  __shared__ __align__(16) float p_s[C::rows * C::score_stride];

  int const b = static_cast<int>(blockIdx.x) / heads;
  int const h = static_cast<int>(blockIdx.x) % heads;
  int const q0 = static_cast<int>(gridDim.y - 1 - blockIdx.y) * C::rows;
  int const tx = static_cast<int>(threadIdx.x) % 8;
  int const ty = static_cast<int>(threadIdx.x) / 8;
  std::int64_t const ld = std::int64_t{3} * heads * d;
  T const* const q_base = qkv + std::int64_t{b} * sequence * ld + std::int64_t{h} * d;
  T const* const k_base = q_base + std::int64_t{heads} * d;
  T const* const v_base = k_base + std::int64_t{heads} * d;

  load_tile<T, C::dp, C::stride, C::threads, C::rows>(q_s, q_base + q0 * ld, ld, sequence - q0, d);

  float o[C::rm][C::dn];
  float m[C::rm];  // running maximum of the row's scores (log2 units)
  float l[C::rm];  // this thread's part of Σ exp2(s − m)
#pragma unroll
  for (int i = 0; i < C::rm; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0F;
#pragma unroll
    for (int n = 0; n < C::dn; ++n) o[i][n] = 0.0F;
  }

  // Key 0 is in the first tile and precedes every query, so m is finite after it.
  int const last_key = (q0 + C::rows < sequence ? q0 + C::rows : sequence) - 1;
  for (int k0 = 0; k0 <= last_key; k0 += C::cols) {
    __syncthreads();  // the previous tile is read
    load_tile<T, C::dp, C::stride, C::threads, C::cols>(k_s, k_base + k0 * ld, ld, sequence - k0,
                                                        d);
    load_tile<T, C::dp, C::stride, C::threads, C::cols>(v_s, v_base + k0 * ld, ld, sequence - k0,
                                                        d);
    __syncthreads();

    float s[C::rm][C::cn];
#pragma unroll
    for (int i = 0; i < C::rm; ++i) {
#pragma unroll
      for (int j = 0; j < C::cn; ++j) s[i][j] = 0.0F;
    }
    dot_tile<C::rm, C::cn, C::dp, C::stride>(s, q_s, k_s, ty, tx);

#pragma unroll
    for (int i = 0; i < C::rm; ++i) {
      int const row = ty * C::rm + i;
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < C::cn; ++j) {
        bool const masked = k0 + tx + 8 * j > q0 + row;
        s[i][j] = masked ? -INFINITY : s[i][j] * scale_log2;
        tile_max = fmaxf(tile_max, s[i][j]);
      }
      float const m_new = fmaxf(m[i], max_over_row(tile_max));
      float const correction = exp2f(m[i] - m_new);  // 0 on the first tile (m = −inf)
      m[i] = m_new;
      l[i] *= correction;
#pragma unroll
      for (int n = 0; n < C::dn; ++n) o[i][n] *= correction;
#pragma unroll
      for (int j = 0; j < C::cn; ++j) {
        float const p = exp2f(s[i][j] - m_new);
        l[i] += p;
        p_s[row * C::score_stride + tx + 8 * j] = p;
      }
    }
    __syncthreads();
    accumulate_tile<C::rm, C::dn, C::width, C::cols, C::score_stride, C::stride>(o, p_s, v_s, ty,
                                                                                 tx);
  }

#pragma unroll
  for (int i = 0; i < C::rm; ++i) {
    int const t = q0 + ty * C::rm + i;
    float const sum = sum_over_row(l[i]);
    if (t < sequence) {
      T* const dst = out + (std::int64_t{b} * sequence + t) * heads * d + std::int64_t{h} * d;
      store_row<T, C::rm, C::dn, C::width>(dst, o, i, 1.0F / sum, tx, d);
      if (tx == 0) {
        logsumexp[(std::int64_t{b} * heads + h) * sequence + t] = m[i] * ln_2 + logf(sum);
      }
    }
  }
}

// delta[(b·H + h)·T + t] = Σ_d dout·out over the D columns of head h in row b·T + t; one group
// of 8 lanes per (row, head) segment, 16 bytes of fp16/bf16 (32 of fp32) per lane and step. A
// warp takes 4 adjacent segments per step, so its lanes loop alike and all shuffle together.
constexpr int delta_threads = 256;
constexpr std::int64_t max_delta_blocks = std::int64_t{1} << 20;

template <typename T>
__global__ void __launch_bounds__(delta_threads)
    attention_delta_kernel(float* __restrict__ delta, T const* __restrict__ dout,
                           T const* __restrict__ out, std::int64_t segments, int sequence,
                           int heads, int d) {
  std::int64_t const warp = (std::int64_t{blockIdx.x} * delta_threads + threadIdx.x) / 32;
  std::int64_t const step = std::int64_t{gridDim.x} * (delta_threads / 32) * 4;
  int const group = static_cast<int>(threadIdx.x) % 32 / 8;
  int const lane = static_cast<int>(threadIdx.x) % 8;
  for (std::int64_t first = warp * 4; first < segments; first += step) {
    std::int64_t const segment = first + group;
    float sum = 0.0F;
    if (segment < segments) {
      std::int64_t const start = segment * d;  // segments are contiguous: row·H·D + h·D
      for (int c = lane * 8; c < d; c += 64) {
        pack<T, 8> const g = *reinterpret_cast<pack<T, 8> const*>(dout + start + c);
        pack<T, 8> const o = *reinterpret_cast<pack<T, 8> const*>(out + start + c);
#pragma unroll
        for (int i = 0; i < 8; ++i) sum += to_float(g.v[i]) * to_float(o.v[i]);
      }
    }
    sum = sum_over_row(sum);
    if (lane == 0 && segment < segments) {
      std::int64_t const row = segment / heads;
      std::int64_t const h = segment % heads;
      std::int64_t const b = row / sequence;
      std::int64_t const t = row % sequence;
      delta[(b * heads + h) * sequence + t] = sum;
    }
  }
}

// Saves logsumexp (in log2 units) and delta of `count` rows from row r0 of a head's [T] slices;
// rows past the sequence get 0 (their results are discarded or masked).
template <int Count, int Threads>
__device__ __forceinline__ void load_row_statistics(float* lse_s, float* delta_s,
                                                    float const* logsumexp, float const* delta,
                                                    int r0, int sequence) {
  for (int r = static_cast<int>(threadIdx.x); r < Count; r += Threads) {
    bool const valid = r0 + r < sequence;
    lse_s[r] = valid ? logsumexp[r0 + r] * log2_e : 0.0F;
    delta_s[r] = valid ? delta[r0 + r] : 0.0F;
  }
}

// dq for a tile of queries. Grid: x = batch·heads, y = query tiles (last first).
template <typename T, typename C>
__global__ void __launch_bounds__(C::threads)
    attention_dq_kernel(T* __restrict__ dqkv, T const* __restrict__ dout, T const* __restrict__ qkv,
                        float const* __restrict__ logsumexp, float const* __restrict__ delta,
                        int sequence, int heads, int d, float scale_log2, float scale) {
  __shared__ __align__(16) float q_s[C::rows * C::stride];
  __shared__ __align__(16) float do_s[C::rows * C::stride];
  __shared__ __align__(16) float k_s[C::cols * C::stride];
  __shared__ __align__(16) float v_s[C::cols * C::stride];
  __shared__ __align__(16) float ds_s[C::rows * C::score_stride];
  __shared__ float lse_s[C::rows];
  __shared__ float delta_s[C::rows];

  int const b = static_cast<int>(blockIdx.x) / heads;
  int const h = static_cast<int>(blockIdx.x) % heads;
  int const q0 = static_cast<int>(gridDim.y - 1 - blockIdx.y) * C::rows;
  int const tx = static_cast<int>(threadIdx.x) % 8;
  int const ty = static_cast<int>(threadIdx.x) / 8;
  std::int64_t const ld = std::int64_t{3} * heads * d;
  std::int64_t const ld_out = std::int64_t{heads} * d;
  std::int64_t const head_offset = std::int64_t{h} * d;
  T const* const q_base = qkv + std::int64_t{b} * sequence * ld + head_offset;
  T const* const k_base = q_base + std::int64_t{heads} * d;
  T const* const v_base = k_base + std::int64_t{heads} * d;
  T const* const do_base = dout + std::int64_t{b} * sequence * ld_out + head_offset;
  std::int64_t const stats = (std::int64_t{b} * heads + h) * sequence;

  load_tile<T, C::dp, C::stride, C::threads, C::rows>(q_s, q_base + q0 * ld, ld, sequence - q0, d);
  load_tile<T, C::dp, C::stride, C::threads, C::rows>(do_s, do_base + q0 * ld_out, ld_out,
                                                      sequence - q0, d);
  load_row_statistics<C::rows, C::threads>(lse_s, delta_s, logsumexp + stats, delta + stats, q0,
                                           sequence);

  float dq[C::rm][C::dn];
#pragma unroll
  for (int i = 0; i < C::rm; ++i) {
#pragma unroll
    for (int n = 0; n < C::dn; ++n) dq[i][n] = 0.0F;
  }

  int const last_key = (q0 + C::rows < sequence ? q0 + C::rows : sequence) - 1;
  for (int k0 = 0; k0 <= last_key; k0 += C::cols) {
    __syncthreads();  // the previous tile is read (and, the first time, the statistics saved)
    load_tile<T, C::dp, C::stride, C::threads, C::cols>(k_s, k_base + k0 * ld, ld, sequence - k0,
                                                        d);
    load_tile<T, C::dp, C::stride, C::threads, C::cols>(v_s, v_base + k0 * ld, ld, sequence - k0,
                                                        d);
    __syncthreads();

    float s[C::rm][C::cn];
    float dp[C::rm][C::cn];
#pragma unroll
    for (int i = 0; i < C::rm; ++i) {
#pragma unroll
      for (int j = 0; j < C::cn; ++j) s[i][j] = dp[i][j] = 0.0F;
    }
    dot_tile<C::rm, C::cn, C::dp, C::stride>(s, q_s, k_s, ty, tx);
    dot_tile<C::rm, C::cn, C::dp, C::stride>(dp, do_s, v_s, ty, tx);
#pragma unroll
    for (int i = 0; i < C::rm; ++i) {
      int const row = ty * C::rm + i;
#pragma unroll
      for (int j = 0; j < C::cn; ++j) {
        int const col = tx + 8 * j;
        bool const masked = k0 + col > q0 + row;
        float const p = masked ? 0.0F : exp2f(s[i][j] * scale_log2 - lse_s[row]);
        ds_s[row * C::score_stride + col] = p * (dp[i][j] - delta_s[row]);
      }
    }
    __syncthreads();
    accumulate_tile<C::rm, C::dn, C::width, C::cols, C::score_stride, C::stride>(dq, ds_s, k_s, ty,
                                                                                 tx);
  }

#pragma unroll
  for (int i = 0; i < C::rm; ++i) {
    int const t = q0 + ty * C::rm + i;
    if (t < sequence) {
      T* const dst = dqkv + (std::int64_t{b} * sequence + t) * ld + head_offset;
      store_row<T, C::rm, C::dn, C::width>(dst, dq, i, scale, tx, d);
    }
  }
}

// dk and dv for a tile of keys. Grid: x = batch·heads, y = key tiles (first first).
template <typename T, typename C>
__global__ void __launch_bounds__(C::threads)
    attention_dkdv_kernel(T* __restrict__ dqkv, T const* __restrict__ dout,
                          T const* __restrict__ qkv, float const* __restrict__ logsumexp,
                          float const* __restrict__ delta, int sequence, int heads, int d,
                          float scale_log2, float scale) {
  __shared__ __align__(16) float k_s[C::rows * C::stride];
  __shared__ __align__(16) float v_s[C::rows * C::stride];
  __shared__ __align__(16) float q_s[C::cols * C::stride];
  __shared__ __align__(16) float do_s[C::cols * C::stride];
  __shared__ __align__(16) float p_s[C::rows * C::score_stride];
  __shared__ __align__(16) float ds_s[C::rows * C::score_stride];
  __shared__ float lse_s[C::cols];
  __shared__ float delta_s[C::cols];

  int const b = static_cast<int>(blockIdx.x) / heads;
  int const h = static_cast<int>(blockIdx.x) % heads;
  int const k0 = static_cast<int>(blockIdx.y) * C::rows;
  int const tx = static_cast<int>(threadIdx.x) % 8;
  int const ty = static_cast<int>(threadIdx.x) / 8;
  std::int64_t const ld = std::int64_t{3} * heads * d;
  std::int64_t const ld_out = std::int64_t{heads} * d;
  std::int64_t const head_offset = std::int64_t{h} * d;
  T const* const q_base = qkv + std::int64_t{b} * sequence * ld + head_offset;
  T const* const k_base = q_base + std::int64_t{heads} * d;
  T const* const v_base = k_base + std::int64_t{heads} * d;
  T const* const do_base = dout + std::int64_t{b} * sequence * ld_out + head_offset;
  std::int64_t const stats = (std::int64_t{b} * heads + h) * sequence;

  load_tile<T, C::dp, C::stride, C::threads, C::rows>(k_s, k_base + k0 * ld, ld, sequence - k0, d);
  load_tile<T, C::dp, C::stride, C::threads, C::rows>(v_s, v_base + k0 * ld, ld, sequence - k0, d);

  float dk[C::rm][C::dn];
  float dv[C::rm][C::dn];
#pragma unroll
  for (int i = 0; i < C::rm; ++i) {
#pragma unroll
    for (int n = 0; n < C::dn; ++n) dk[i][n] = dv[i][n] = 0.0F;
  }

  // Queries before k0 see none of these keys.
  for (int q0 = k0 / C::cols * C::cols; q0 < sequence; q0 += C::cols) {
    __syncthreads();  // the previous tile is read
    load_tile<T, C::dp, C::stride, C::threads, C::cols>(q_s, q_base + q0 * ld, ld, sequence - q0,
                                                        d);
    load_tile<T, C::dp, C::stride, C::threads, C::cols>(do_s, do_base + q0 * ld_out, ld_out,
                                                        sequence - q0, d);
    load_row_statistics<C::cols, C::threads>(lse_s, delta_s, logsumexp + stats, delta + stats, q0,
                                             sequence);
    __syncthreads();

    float s[C::rm][C::cn];  // transposed: rows are keys, columns queries
    float dp[C::rm][C::cn];
#pragma unroll
    for (int i = 0; i < C::rm; ++i) {
#pragma unroll
      for (int j = 0; j < C::cn; ++j) s[i][j] = dp[i][j] = 0.0F;
    }
    dot_tile<C::rm, C::cn, C::dp, C::stride>(s, k_s, q_s, ty, tx);
    dot_tile<C::rm, C::cn, C::dp, C::stride>(dp, v_s, do_s, ty, tx);
#pragma unroll
    for (int i = 0; i < C::rm; ++i) {
      int const row = ty * C::rm + i;
#pragma unroll
      for (int j = 0; j < C::cn; ++j) {
        int const col = tx + 8 * j;
        // Padding queries past the sequence must add nothing to the sums over queries.
        bool const masked = k0 + row > q0 + col || q0 + col >= sequence;
        float const p = masked ? 0.0F : exp2f(s[i][j] * scale_log2 - lse_s[col]);
        p_s[row * C::score_stride + col] = p;
        ds_s[row * C::score_stride + col] = p * (dp[i][j] - delta_s[col]);
      }
    }
    __syncthreads();
    accumulate_tile<C::rm, C::dn, C::width, C::cols, C::score_stride, C::stride>(dv, p_s, do_s, ty,
                                                                                 tx);
    accumulate_tile<C::rm, C::dn, C::width, C::cols, C::score_stride, C::stride>(dk, ds_s, q_s, ty,
                                                                                 tx);
  }

#pragma unroll
  for (int i = 0; i < C::rm; ++i) {
    int const t = k0 + ty * C::rm + i;
    if (t < sequence) {
      T* const dst = dqkv + (std::int64_t{b} * sequence + t) * ld + head_offset;
      store_row<T, C::rm, C::dn, C::width>(dst + std::int64_t{heads} * d, dk, i, scale, tx, d);
      store_row<T, C::rm, C::dn, C::width>(dst + std::int64_t{2} * heads * d, dv, i, 1.0F, tx, d);
    }
  }
}

// --- host side ------------------------------------------------------------------------------

template <typename C>
dim3 grid_of(attention_shape const& s) {
  return {static_cast<unsigned>(s.batch * s.heads),
          static_cast<unsigned>((s.sequence + C::rows - 1) / C::rows)};
}

float scale_of(attention_shape const& s) {
  return 1.0F / sqrtf(static_cast<float>(s.head_dim));
}

template <typename T, typename C>
void forward(void* out, float* logsumexp, void const* qkv, attention_shape const& s,
             cuda::stream_view stream) {
  attention_forward_kernel<T, C><<<grid_of<C>(s), C::threads, 0, stream.get()>>>(
      static_cast<T*>(out), logsumexp, static_cast<T const*>(qkv), static_cast<int>(s.sequence),
      static_cast<int>(s.heads), static_cast<int>(s.head_dim), scale_of(s) * log2_e);
}

template <typename T, typename C>
void backward(void* dqkv, void const* dout, void const* qkv, void const* out,
              float const* logsumexp, attention_shape const& s, float* delta,
              cuda::stream_view stream) {
  auto const sequence = static_cast<int>(s.sequence);
  auto const heads = static_cast<int>(s.heads);
  auto const d = static_cast<int>(s.head_dim);
  std::int64_t const segments = s.batch * s.sequence * s.heads;
  std::int64_t const wanted = (segments * 8 + delta_threads - 1) / delta_threads;
  auto const delta_blocks =
      static_cast<unsigned>(wanted < max_delta_blocks ? wanted : max_delta_blocks);
  attention_delta_kernel<T><<<delta_blocks, delta_threads, 0, stream.get()>>>(
      delta, static_cast<T const*>(dout), static_cast<T const*>(out), segments, sequence, heads, d);
  float const scale = scale_of(s);
  attention_dq_kernel<T, C><<<grid_of<C>(s), C::threads, 0, stream.get()>>>(
      static_cast<T*>(dqkv), static_cast<T const*>(dout), static_cast<T const*>(qkv), logsumexp,
      delta, sequence, heads, d, scale * log2_e, scale);
  attention_dkdv_kernel<T, C><<<grid_of<C>(s), C::threads, 0, stream.get()>>>(
      static_cast<T*>(dqkv), static_cast<T const*>(dout), static_cast<T const*>(qkv), logsumexp,
      delta, sequence, heads, d, scale * log2_e, scale);
}

// Calls f with a null T* of the element type and the tiling of the padded head dimension.
template <bool Backward, typename F>
void dispatch(dtype type, std::int64_t head_dim, F&& f) {
  auto by_dim = [&](auto* typed) {
    if (head_dim <= 16) {
      f(typed, std::conditional_t<Backward, backward_16, forward_16>{});
    } else if (head_dim <= 32) {
      f(typed, std::conditional_t<Backward, backward_32, forward_32>{});
    } else if (head_dim <= 64) {
      f(typed, std::conditional_t<Backward, backward_64, forward_64>{});
    } else if (head_dim <= 128) {
      f(typed, std::conditional_t<Backward, backward_128, forward_128>{});
    } else {
      f(typed, std::conditional_t<Backward, backward_256, forward_256>{});
    }
  };
  switch (type) {
    case dtype::float32: by_dim(static_cast<float*>(nullptr)); break;
    case dtype::float16: by_dim(static_cast<__half*>(nullptr)); break;
    case dtype::bfloat16: by_dim(static_cast<__nv_bfloat16*>(nullptr)); break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("causal_attention", type);
  }
}

}  // namespace

namespace detail {

void causal_attention_forward(attention_shape const& shape, dtype type, void* out, float* logsumexp,
                              void const* qkv, cuda::stream_view stream) {
  dispatch<false>(type, shape.head_dim, [&](auto* typed, auto config) {
    forward<std::remove_pointer_t<decltype(typed)>, decltype(config)>(out, logsumexp, qkv, shape,
                                                                      stream);
  });
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void causal_attention_backward(attention_shape const& shape, dtype type, void* dqkv,
                               void const* dout, void const* qkv, void const* out,
                               float const* logsumexp, float* workspace, cuda::stream_view stream) {
  dispatch<true>(type, shape.head_dim, [&](auto* typed, auto config) {
    backward<std::remove_pointer_t<decltype(typed)>, decltype(config)>(
        dqkv, dout, qkv, out, logsumexp, shape, workspace, stream);
  });
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace detail
}  // namespace graphstep::ops
