// Layer normalization over the rows of [M,N], forward and backward, and the residual add, for
// fp32, fp16 and bf16 storage with fp32 math. 16-byte loads and stores where N and the pointers
// allow, one element at a time otherwise. No atomics: every sum has a fixed order.
//
// Forward: one warp per row. A row of up to 32 × max_cached packs is held in registers (1024
// fp32 or 2048 fp16/bf16 elements vectorized, 256 scalar), so x is read once; the mean comes
// first and the biased variance is summed around it (two passes, no cancellation of E[x²] −
// E[x]²). Wider rows are read again from global memory (L1/L2) for each pass.
//
// Backward, one block per slice of rows:
//  - rows held in registers: one warp per row. Each lane keeps dy and x of its packs; the row's
//    two sums Σg and Σg·x̂ (g = dy·γ) are warp reductions; dγ and dβ of the lane's columns
//    accumulate over the warp's rows in the warp's own shared memory (registers would need 2·N/32
//    floats per lane). The block then adds its warps' sums in warp order and writes the slice's
//    fp32 partial sums to the workspace.
//  - wider rows: the warps first compute each row's statistics into shared memory, then each
//    thread takes a pack of columns and walks the slice's rows in order, writing dx and summing
//    dγ and dβ of its columns.
// A second kernel adds the slices of each column in slice order. The slice count depends on M
// and the SM count only (three per SM, at least 8 rows each, at most max_rows_per_slice), so the
// result is the same bits on every run on one device, whatever workspace beyond the minimum.
// M = 16384 on a 132-SM H100: 391 slices of 42 rows (bf16, N = 768: blocks of 8 warps, 80
// registers a thread, 48 KiB of shared memory, three blocks resident per SM).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/layer_norm_problem.hpp>
#include <type_traits>

#include "detail/element_conversion.cuh"
#include "ops/op_kernels.hpp"

namespace graphstep::ops {
namespace {

constexpr int threads = 256;
constexpr int warp_size = 32;
constexpr int warps = threads / warp_size;
// The row slicing (layer_norm_problem::backward_slicing) keeps three slices per SM: the
// backward's register and shared memory budget (__launch_bounds__ below) keeps three of its
// blocks resident on an SM, so they run in one wave.
static_assert(layer_norm_problem::blocks_per_sm == 3, "__launch_bounds__ below keeps 3 per SM");
static_assert(layer_norm_problem::rows_per_block == warps, "the forward takes a row per warp");
// Packs per lane held in registers at most (see with_cached_packs for the counts compiled).
constexpr int max_cached = 8;
// Rows whose statistics one block of the wide backward keeps in shared memory (16 KiB).
constexpr std::int64_t max_rows_per_slice = layer_norm_problem::max_rows_per_slice;

using graphstep::detail::from_float;
using graphstep::detail::to_float;

// `width` elements of T loaded as one transaction (16 bytes when width = 16 / sizeof(T)).
template <typename T, int width>
struct alignas(sizeof(T) * width) pack {
  T v[width];
};

// The sum over the warp, the same bits in every lane (a + b = b + a exactly at each step).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = warp_size / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffU, v, offset);
  }
  return v;
}

// Calls f(i, p) for the packs p = lane + 32·i of a row of `packs` that this lane owns: unrolled
// over the `cached` slots held in registers, or a plain loop when the row is not held (0).
template <int cached, typename F>
__device__ __forceinline__ void for_lane_packs(std::int64_t packs, int lane, F&& f) {
  if constexpr (cached > 0) {
#pragma unroll
    for (int i = 0; i < cached; ++i) {
      std::int64_t const p = lane + std::int64_t{i} * warp_size;
      if (p < packs) f(i, p);
    }
  } else {
    for (std::int64_t p = lane; p < packs; p += warp_size) f(0, p);
  }
}

template <typename T, int width, int cached>
__global__ void __launch_bounds__(threads)
    forward_kernel(T* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd,
                   T const* __restrict__ x, T const* __restrict__ gamma, T const* __restrict__ beta,
                   std::int64_t m, std::int64_t n, float epsilon) {
  using P = pack<T, width>;
  std::int64_t const row = std::int64_t{blockIdx.x} * warps + threadIdx.x / warp_size;
  if (row >= m) return;  // whole warps leave: the shuffles below always see a full warp
  int const lane = static_cast<int>(threadIdx.x % warp_size);
  std::int64_t const packs = n / width;
  auto const* const in = reinterpret_cast<P const*>(x + row * n);
  P held[cached + (cached == 0 ? 1 : 0)]{};  // one unused slot when the row is not held
  auto const at = [&](int i, std::int64_t p) -> P {
    if constexpr (cached > 0) {
      return held[i];
    } else {
      return in[p];
    }
  };

  float sum = 0.0F;
  for_lane_packs<cached>(packs, lane, [&](int i, std::int64_t p) {
    P const v = in[p];
    if constexpr (cached > 0) held[i] = v;
#pragma unroll
    for (int k = 0; k < width; ++k) sum += to_float(v.v[k]);
  });
  float const mu = warp_sum(sum) / static_cast<float>(n);
  float squares = 0.0F;
  for_lane_packs<cached>(packs, lane, [&](int i, std::int64_t p) {
    P const v = at(i, p);
#pragma unroll
    for (int k = 0; k < width; ++k) {
      float const d = to_float(v.v[k]) - mu;
      squares += d * d;
    }
  });
  float const rs = rsqrtf(warp_sum(squares) / static_cast<float>(n) + epsilon);
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }

  auto* const out = reinterpret_cast<P*>(y + row * n);
  auto const* const scale = reinterpret_cast<P const*>(gamma);
  auto const* const shift = reinterpret_cast<P const*>(beta);
  for_lane_packs<cached>(packs, lane, [&](int i, std::int64_t p) {
    P const v = at(i, p);
    P const g = scale[p];
    P const b = shift[p];
    P o;
#pragma unroll
    for (int k = 0; k < width; ++k) {
      o.v[k] = from_float<T>((to_float(v.v[k]) - mu) * rs * to_float(g.v[k]) + to_float(b.v[k]));
    }
    out[p] = o;
  });
}

// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), added to the old dx with `accumulate`.
template <typename T>
__device__ __forceinline__ T input_gradient(float g, float normalized, float rs, float mean_g,
                                            float mean_gx, T const& old, bool accumulate) {
  float v = rs * (g - mean_g - normalized * mean_gx);
  if (accumulate) v += to_float(old);
  return from_float<T>(v);
}

// Warps per block of the backward that holds `cached` packs of `width` elements per lane: each
// warp sums dγ and dβ of its rows in 2·cached·32·width floats of shared memory, 48 KiB at most
// for the block (static shared memory). bf16 rows of 768 (3 packs): 8 warps; of 1024: 6.
template <int width, int cached>
struct backward_block {
  static constexpr int bytes_per_warp =
      static_cast<int>(sizeof(float)) * 2 * warp_size * width * cached;
  static constexpr int block_warps =
      49152 / bytes_per_warp < warps ? 49152 / bytes_per_warp : warps;
  static constexpr int threads = block_warps * warp_size;
};

// Rows held in registers: warp w of block s takes rows s·rows_per_slice + w, + warps, ...;
// writes dx and the slice's fp32 sums partial[s][0, N) (dγ) and partial[s][N, 2N) (dβ).
// dγ and dβ accumulate in shared memory, each lane on its own columns (registers would need 2·N/32
// floats per lane, too many for occupancy), at index (i·width + k)·32 + lane for element k of
// pack lane + 32·i, so that a warp's 32 lanes touch 32 consecutive floats. At least three blocks
// per SM: at most 80 registers a thread for bf16 rows of 768 (111 unbounded), without spills.
template <typename T, int width, int cached>
__global__ void __launch_bounds__(backward_block<width, cached>::threads, 3)
    backward_kernel(T* __restrict__ dx, float* __restrict__ partial, T const* __restrict__ dy,
                    T const* __restrict__ x, T const* __restrict__ gamma,
                    float const* __restrict__ mean, float const* __restrict__ rstd, std::int64_t m,
                    std::int64_t n, std::int64_t rows_per_slice, bool accumulate) {
  using P = pack<T, width>;
  constexpr int block_warps = backward_block<width, cached>::block_warps;
  constexpr int slots = cached * warp_size * width;
  __shared__ float sums[block_warps][2][slots];
  int const warp = static_cast<int>(threadIdx.x / warp_size);
  int const lane = static_cast<int>(threadIdx.x % warp_size);
  std::int64_t const packs = n / width;
  std::int64_t const first = std::int64_t{blockIdx.x} * rows_per_slice;
  std::int64_t const end = first + rows_per_slice < m ? first + rows_per_slice : m;
  auto const* const scale = reinterpret_cast<P const*>(gamma);

  for (int j = static_cast<int>(threadIdx.x); j < block_warps * 2 * slots;
       j += block_warps * warp_size) {
    (&sums[0][0][0])[j] = 0.0F;
  }
  __syncthreads();
  float* const dgamma = sums[warp][0];
  float* const dbeta = sums[warp][1];
  for (std::int64_t row = first + warp; row < end; row += block_warps) {
    auto const* const x_row = reinterpret_cast<P const*>(x + row * n);
    auto const* const dy_row = reinterpret_cast<P const*>(dy + row * n);
    auto* const dx_row = reinterpret_cast<P*>(dx + row * n);
    float const mu = mean[row];
    float const rs = rstd[row];
    P xs[cached];
    P dys[cached];
    float sum_g = 0.0F;
    float sum_gx = 0.0F;
    for_lane_packs<cached>(packs, lane, [&](int i, std::int64_t p) {
      xs[i] = x_row[p];
      dys[i] = dy_row[p];
      P const s = scale[p];
#pragma unroll
      for (int k = 0; k < width; ++k) {
        float const g = to_float(dys[i].v[k]) * to_float(s.v[k]);
        sum_g += g;
        sum_gx += g * ((to_float(xs[i].v[k]) - mu) * rs);
      }
    });
    float const mean_g = warp_sum(sum_g) / static_cast<float>(n);
    float const mean_gx = warp_sum(sum_gx) / static_cast<float>(n);
    for_lane_packs<cached>(packs, lane, [&](int i, std::int64_t p) {
      P const s = scale[p];
      P old{};
      if (accumulate) old = dx_row[p];
      P out;
#pragma unroll
      for (int k = 0; k < width; ++k) {
        float const d = to_float(dys[i].v[k]);
        float const normalized = (to_float(xs[i].v[k]) - mu) * rs;
        out.v[k] = input_gradient(d * to_float(s.v[k]), normalized, rs, mean_g, mean_gx, old.v[k],
                                  accumulate);
        int const at = (i * width + k) * warp_size + lane;
        dgamma[at] += d * normalized;
        dbeta[at] += d;
      }
      dx_row[p] = out;
    });
  }
  __syncthreads();

  // The warps' sums of each column, added in warp order.
  float* const slice = partial + std::int64_t{blockIdx.x} * 2 * n;
  for (int j = static_cast<int>(threadIdx.x); j < slots; j += block_warps * warp_size) {
    int const i = j / (warp_size * width);
    int const k = j / warp_size % width;
    std::int64_t const column = (std::int64_t{i} * warp_size + j % warp_size) * width + k;
    if (column >= n) continue;
    float total_gamma = 0.0F;
    float total_beta = 0.0F;
#pragma unroll
    for (int w = 0; w < block_warps; ++w) {
      total_gamma += sums[w][0][j];
      total_beta += sums[w][1][j];
    }
    slice[column] = total_gamma;
    slice[n + column] = total_beta;
  }
}

// Rows too wide for registers: the slice's row statistics go to shared memory first, then each
// thread walks the slice's rows in order for its packs of columns.
template <typename T, int width>
__global__ void __launch_bounds__(threads)
    backward_wide_kernel(T* __restrict__ dx, float* __restrict__ partial, T const* __restrict__ dy,
                         T const* __restrict__ x, T const* __restrict__ gamma,
                         float const* __restrict__ mean, float const* __restrict__ rstd,
                         std::int64_t m, std::int64_t n, std::int64_t rows_per_slice,
                         bool accumulate) {
  using P = pack<T, width>;
  __shared__ float row_mean[max_rows_per_slice];
  __shared__ float row_rstd[max_rows_per_slice];
  __shared__ float row_mean_g[max_rows_per_slice];
  __shared__ float row_mean_gx[max_rows_per_slice];
  int const warp = static_cast<int>(threadIdx.x / warp_size);
  int const lane = static_cast<int>(threadIdx.x % warp_size);
  std::int64_t const packs = n / width;
  std::int64_t const first = std::int64_t{blockIdx.x} * rows_per_slice;
  std::int64_t const rows = (first + rows_per_slice < m ? first + rows_per_slice : m) - first;
  auto const* const scale = reinterpret_cast<P const*>(gamma);

  for (std::int64_t r = warp; r < rows; r += warps) {
    auto const* const x_row = reinterpret_cast<P const*>(x + (first + r) * n);
    auto const* const dy_row = reinterpret_cast<P const*>(dy + (first + r) * n);
    float const mu = mean[first + r];
    float const rs = rstd[first + r];
    float sum_g = 0.0F;
    float sum_gx = 0.0F;
    for_lane_packs<0>(packs, lane, [&](int, std::int64_t p) {
      P const xv = x_row[p];
      P const dv = dy_row[p];
      P const s = scale[p];
#pragma unroll
      for (int k = 0; k < width; ++k) {
        float const g = to_float(dv.v[k]) * to_float(s.v[k]);
        sum_g += g;
        sum_gx += g * ((to_float(xv.v[k]) - mu) * rs);
      }
    });
    float const mean_g = warp_sum(sum_g) / static_cast<float>(n);
    float const mean_gx = warp_sum(sum_gx) / static_cast<float>(n);
    if (lane == 0) {
      row_mean[r] = mu;
      row_rstd[r] = rs;
      row_mean_g[r] = mean_g;
      row_mean_gx[r] = mean_gx;
    }
  }
  __syncthreads();

  float* const slice = partial + std::int64_t{blockIdx.x} * 2 * n;
  for (std::int64_t p = threadIdx.x; p < packs; p += threads) {
    P const s = scale[p];
    float dgamma[width] = {};
    float dbeta[width] = {};
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t const at = (first + r) * (n / width) + p;
      P const xv = reinterpret_cast<P const*>(x)[at];
      P const dv = reinterpret_cast<P const*>(dy)[at];
      P old{};
      if (accumulate) old = reinterpret_cast<P const*>(dx)[at];
      P out;
#pragma unroll
      for (int k = 0; k < width; ++k) {
        float const d = to_float(dv.v[k]);
        float const normalized = (to_float(xv.v[k]) - row_mean[r]) * row_rstd[r];
        out.v[k] = input_gradient(d * to_float(s.v[k]), normalized, row_rstd[r], row_mean_g[r],
                                  row_mean_gx[r], old.v[k], accumulate);
        dgamma[k] += d * normalized;
        dbeta[k] += d;
      }
      reinterpret_cast<P*>(dx)[at] = out;
    }
#pragma unroll
    for (int k = 0; k < width; ++k) {
      slice[p * width + k] = dgamma[k];
      slice[n + p * width + k] = dbeta[k];
    }
  }
}

// dγ[c] and dβ[c] = Σ_s partial[s][c] and partial[s][N + c], the slices in order: the 8 warps of
// a block each add every 8th slice of the same 32 columns, then warp 0 adds the 8 sums in order.
template <typename T>
__global__ void __launch_bounds__(threads)
    add_slices_kernel(T* __restrict__ dgamma, T* __restrict__ dbeta,
                      float const* __restrict__ partial, std::int64_t slices, std::int64_t n) {
  __shared__ float sums[warps][warp_size];
  int const group = static_cast<int>(threadIdx.x / warp_size);
  int const lane = static_cast<int>(threadIdx.x % warp_size);
  std::int64_t const column = std::int64_t{blockIdx.x} * warp_size + lane;  // of [dγ, dβ]
  float total = 0.0F;
  if (column < 2 * n) {
    for (std::int64_t s = group; s < slices; s += warps) total += partial[s * 2 * n + column];
  }
  sums[group][lane] = total;
  __syncthreads();
  if (group != 0 || column >= 2 * n) return;
  total = 0.0F;
#pragma unroll
  for (auto const& group_sums : sums) total += group_sums[lane];
  if (column < n) {
    dgamma[column] = from_float<T>(total);
  } else {
    dbeta[column - n] = from_float<T>(total);
  }
}

template <typename T>
__global__ void __launch_bounds__(threads)
    add_kernel(T* out, T const* a, T const* b, std::int64_t count, bool vectorized) {
  // No __restrict__: out may be a or b. Each element is read before the same thread writes it.
  using P = pack<T, 16 / sizeof(T)>;
  constexpr int width = 16 / sizeof(T);
  std::int64_t const stride = std::int64_t{gridDim.x} * blockDim.x;
  std::int64_t const first = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  std::int64_t done = 0;
  if (vectorized) {
    for (std::int64_t p = first; p < count / width; p += stride) {
      P const u = reinterpret_cast<P const*>(a)[p];
      P const v = reinterpret_cast<P const*>(b)[p];
      P o;
#pragma unroll
      for (int k = 0; k < width; ++k) o.v[k] = from_float<T>(to_float(u.v[k]) + to_float(v.v[k]));
      reinterpret_cast<P*>(out)[p] = o;
    }
    done = count / width * width;  // the scalar loop below finishes the tail
  }
  for (std::int64_t i = done + first; i < count; i += stride) {
    out[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
  }
}

// --- host side ---------------------------------------------------------------------------------

bool aligned16(void const* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// Calls launch(std::integral_constant<int, c>{}) with c the fewest packs per lane, of those
// compiled, that hold a row of `packs` packs in registers; c = 0 when none does.
template <typename Launch>
void with_cached_packs(std::int64_t packs, Launch&& launch) {
  static_assert(max_cached == 8, "the counts below end at max_cached");
  std::int64_t const per_lane = (packs + warp_size - 1) / warp_size;
  if (per_lane <= 1) {
    launch(std::integral_constant<int, 1>{});
  } else if (per_lane <= 2) {
    launch(std::integral_constant<int, 2>{});
  } else if (per_lane <= 3) {  // bf16 and fp16 rows of 768
    launch(std::integral_constant<int, 3>{});
  } else if (per_lane <= 4) {
    launch(std::integral_constant<int, 4>{});
  } else if (per_lane <= 6) {  // fp32 rows of 768
    launch(std::integral_constant<int, 6>{});
  } else if (per_lane <= 8) {
    launch(std::integral_constant<int, 8>{});
  } else {
    launch(std::integral_constant<int, 0>{});
  }
}

template <typename T, int width, int cached>
void forward_with(void* y, float* mean, float* rstd, void const* x, void const* gamma,
                  void const* beta, std::int64_t m, std::int64_t n, float epsilon,
                  cuda::stream_view stream) {
  auto const grid = static_cast<unsigned>((m + warps - 1) / warps);
  forward_kernel<T, width, cached><<<grid, threads, 0, stream.get()>>>(
      static_cast<T*>(y), mean, rstd, static_cast<T const*>(x), static_cast<T const*>(gamma),
      static_cast<T const*>(beta), m, n, epsilon);
}

template <typename T, int width>
void forward_of_width(void* y, float* mean, float* rstd, void const* x, void const* gamma,
                      void const* beta, std::int64_t m, std::int64_t n, float epsilon,
                      cuda::stream_view stream) {
  with_cached_packs(n / width, [&](auto cached) {
    forward_with<T, width, decltype(cached)::value>(y, mean, rstd, x, gamma, beta, m, n, epsilon,
                                                    stream);
  });
}

template <typename T>
void forward(void* y, float* mean, float* rstd, void const* x, void const* gamma, void const* beta,
             std::int64_t m, std::int64_t n, float epsilon, cuda::stream_view stream) {
  constexpr int width = 16 / sizeof(T);
  bool const vectorized =
      n % width == 0 && aligned16(y) && aligned16(x) && aligned16(gamma) && aligned16(beta);
  if (vectorized) {
    forward_of_width<T, width>(y, mean, rstd, x, gamma, beta, m, n, epsilon, stream);
  } else {
    forward_of_width<T, 1>(y, mean, rstd, x, gamma, beta, m, n, epsilon, stream);
  }
}

struct backward_arguments {
  void* dx{};
  void* dgamma{};
  void* dbeta{};
  void const* dy{};
  void const* x{};
  void const* gamma{};
  float const* mean{};
  float const* rstd{};
  std::int64_t m{};
  std::int64_t n{};
  bool accumulate{};
  float* partial{};
  layer_norm_slicing slicing;
};

template <typename T, int width, int cached>
void backward_with(backward_arguments const& a, cuda::stream_view stream) {
  auto const grid = static_cast<unsigned>(a.slicing.slices);
  if constexpr (cached > 0) {
    constexpr int block = backward_block<width, cached>::threads;
    backward_kernel<T, width, cached><<<grid, block, 0, stream.get()>>>(
        static_cast<T*>(a.dx), a.partial, static_cast<T const*>(a.dy), static_cast<T const*>(a.x),
        static_cast<T const*>(a.gamma), a.mean, a.rstd, a.m, a.n, a.slicing.rows_per_slice,
        a.accumulate);
  } else {
    backward_wide_kernel<T, width><<<grid, threads, 0, stream.get()>>>(
        static_cast<T*>(a.dx), a.partial, static_cast<T const*>(a.dy), static_cast<T const*>(a.x),
        static_cast<T const*>(a.gamma), a.mean, a.rstd, a.m, a.n, a.slicing.rows_per_slice,
        a.accumulate);
  }
}

template <typename T>
void backward(backward_arguments const& a, cuda::stream_view stream) {
  constexpr int width = 16 / sizeof(T);
  bool const vectorized = a.n % width == 0 && aligned16(a.dx) && aligned16(a.dy) &&
                          aligned16(a.x) && aligned16(a.gamma);
  if (vectorized) {
    with_cached_packs(a.n / width, [&](auto cached) {
      backward_with<T, width, decltype(cached)::value>(a, stream);
    });
  } else {
    with_cached_packs(
        a.n, [&](auto cached) { backward_with<T, 1, decltype(cached)::value>(a, stream); });
  }
  auto const columns_grid = static_cast<unsigned>((2 * a.n + warp_size - 1) / warp_size);
  add_slices_kernel<T><<<columns_grid, threads, 0, stream.get()>>>(
      static_cast<T*>(a.dgamma), static_cast<T*>(a.dbeta), a.partial, a.slicing.slices, a.n);
}

template <typename T>
void add_elements(void* out, void const* a, void const* b, std::int64_t count,
                  cuda::stream_view stream) {
  constexpr int width = 16 / sizeof(T);
  bool const vectorized = aligned16(out) && aligned16(a) && aligned16(b);
  std::int64_t const work = vectorized ? count / width + 1 : count;
  std::int64_t const blocks =
      std::min<std::int64_t>((work + threads - 1) / threads, std::int64_t{65535} * 8);
  add_kernel<T><<<static_cast<unsigned>(blocks), threads, 0, stream.get()>>>(
      static_cast<T*>(out), static_cast<T const*>(a), static_cast<T const*>(b), count, vectorized);
}

}  // namespace

namespace detail {

void layer_norm_forward(layer_norm_problem const& problem, dtype type, void* y, float* mean,
                        float* rstd, void const* x, void const* gamma, void const* beta,
                        float epsilon, cuda::stream_view stream) {
  std::int64_t const m = problem.m;
  std::int64_t const n = problem.n;
  switch (type) {
    case dtype::float32:
      forward<float>(y, mean, rstd, x, gamma, beta, m, n, epsilon, stream);
      break;
    case dtype::float16:
      forward<__half>(y, mean, rstd, x, gamma, beta, m, n, epsilon, stream);
      break;
    case dtype::bfloat16:
      forward<__nv_bfloat16>(y, mean, rstd, x, gamma, beta, m, n, epsilon, stream);
      break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("layer_norm_forward", type);
  }
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void layer_norm_backward(layer_norm_problem const& problem, dtype type,
                         layer_norm_slicing const& slicing, void* dx, void* dgamma, void* dbeta,
                         void const* dy, void const* x, void const* gamma, float const* mean,
                         float const* rstd, bool accumulate_dx, float* workspace,
                         cuda::stream_view stream) {
  backward_arguments const a{
      dx,        dgamma,    dbeta,         dy,        x,      gamma, mean, rstd,
      problem.m, problem.n, accumulate_dx, workspace, slicing};
  switch (type) {
    case dtype::float32: backward<float>(a, stream); break;
    case dtype::float16: backward<__half>(a, stream); break;
    case dtype::bfloat16: backward<__nv_bfloat16>(a, stream); break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("layer_norm_backward", type);
  }
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void add(dtype type, void* out, void const* a, void const* b, std::int64_t count,
         cuda::stream_view stream) {
  switch (type) {
    case dtype::float32: add_elements<float>(out, a, b, count, stream); break;
    case dtype::float16: add_elements<__half>(out, a, b, count, stream); break;
    case dtype::bfloat16: add_elements<__nv_bfloat16>(out, a, b, count, stream); break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("add: out", type);
  }
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace detail
}  // namespace graphstep::ops
