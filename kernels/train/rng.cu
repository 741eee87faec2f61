// The capture-safe generator's device side: the offset advance, the fills and dropout.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/capture_safe_rng.hpp>
#include <graphstep/train/philox.hpp>
#include <graphstep/train/random_fill.hpp>
#include <string>
#include <utility>

#include "detail/element_conversion.cuh"
#include "detail/span_checks.hpp"
#include "train/rng_kernels.hpp"

namespace graphstep::train {
namespace detail {
namespace {

constexpr int threads = 256;

__global__ void advance_offset_kernel(std::uint64_t* state, std::uint64_t counters) {
  state[1] += counters;
}

// Thread t handles elements 4t..4t+3 from one Philox block at position offset + base + t.
__global__ void dropout_forward_kernel(float* y, std::uint8_t* mask, float const* x, std::size_t n,
                                       float p, philox_args rng) {
  std::uint64_t const seed = rng.state[0];
  std::uint64_t const offset = rng.state[1];
  float const scale = 1.0F / (1.0F - p);
  std::size_t const blocks = (n + 3) / 4;
  for (std::size_t t = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; t < blocks;
       t += std::size_t{gridDim.x} * blockDim.x) {
    train::philox_block const bits = train::philox_at(seed, offset + rng.base + t);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      std::size_t const i = 4 * t + j;
      if (i >= n) break;
      bool const keep = train::to_unit_float(bits.word[j]) >= p;
      mask[i] = keep ? 1 : 0;
      y[i] = keep ? x[i] * scale : 0.0F;
    }
  }
}

// Thread t writes elements 4t..4t+3 from the Philox block at position offset + base + t.
template <typename T, typename Transform>
__global__ void fill_kernel(T* out, std::size_t n, philox_args rng, Transform transform) {
  std::uint64_t const seed = rng.state[0];
  std::uint64_t const offset = rng.state[1];
  std::size_t const blocks = (n + 3) / 4;
  for (std::size_t t = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; t < blocks;
       t += std::size_t{gridDim.x} * blockDim.x) {
    T values[4];
    transform(train::philox_at(seed, offset + rng.base + t), values);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      std::size_t const i = 4 * t + j;
      if (i >= n) break;
      out[i] = values[j];
    }
  }
}

__global__ void dropout_backward_kernel(float* dx, std::uint8_t const* mask, float const* dy,
                                        std::size_t n, float scale) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    dx[i] = mask[i] != 0 ? dy[i] * scale : 0.0F;
  }
}

unsigned grid_for(std::size_t work) {
  std::size_t const blocks = (work + threads - 1) / threads;
  return static_cast<unsigned>(blocks == 0 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

template <typename T, typename Transform>
void launch_fill(T* out, std::size_t n, philox_args rng, Transform transform,
                 cuda::stream_view stream) {
  fill_kernel<T, Transform>
      <<<grid_for((n + 3) / 4), threads, 0, stream.get()>>>(out, n, rng, transform);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

// Round to nearest even with CUDA's conversions, as the other kernels store fp16 and bf16.
template <typename T>
struct nearest_even {
  using type = T;
  __device__ static T round(float x) { return graphstep::detail::from_float<T>(x); }
  __device__ static float widen(T x) { return graphstep::detail::to_float(x); }
};

// The fp32 transform `Transform` rounded to `type` (float16 or bfloat16, checked by the caller).
template <typename Transform>
void launch_rounded_fill(void* out, dtype type, std::size_t n, philox_args rng, Transform transform,
                         cuda::stream_view stream) {
  if (type == dtype::float16) {
    using rounding = nearest_even<__half>;
    launch_fill(static_cast<__half*>(out), n, rng,
                train::rounded_transform<rounding, Transform>{transform}, stream);
  } else {
    using rounding = nearest_even<__nv_bfloat16>;
    launch_fill(static_cast<__nv_bfloat16*>(out), n, rng,
                train::rounded_transform<rounding, Transform>{transform}, stream);
  }
}

}  // namespace

void launch_uniform(float* out, std::size_t n, float low, float high, philox_args rng,
                    cuda::stream_view stream) {
  launch_fill(out, n, rng, train::uniform_transform{low, high}, stream);
}

void launch_normal(float* out, std::size_t n, float mean, float stddev, philox_args rng,
                   cuda::stream_view stream) {
  launch_fill(out, n, rng, train::normal_transform{mean, stddev}, stream);
}

void launch_bernoulli(float* out, std::size_t n, float p, philox_args rng,
                      cuda::stream_view stream) {
  launch_fill(out, n, rng, train::bernoulli_transform<float>{p}, stream);
}

void launch_bernoulli(std::uint8_t* out, std::size_t n, float p, philox_args rng,
                      cuda::stream_view stream) {
  launch_fill(out, n, rng, train::bernoulli_transform<std::uint8_t>{p}, stream);
}

void launch_uniform(void* out, dtype type, std::size_t n, float low, float high, philox_args rng,
                    cuda::stream_view stream) {
  launch_rounded_fill(out, type, n, rng, train::uniform_transform{low, high}, stream);
}

void launch_normal(void* out, dtype type, std::size_t n, float mean, float stddev, philox_args rng,
                   cuda::stream_view stream) {
  launch_rounded_fill(out, type, n, rng, train::normal_transform{mean, stddev}, stream);
}

void launch_bernoulli(void* out, dtype type, std::size_t n, float p, philox_args rng,
                      cuda::stream_view stream) {
  launch_rounded_fill(out, type, n, rng, train::bernoulli_transform<float>{p}, stream);
}

void launch_advance_offset(std::uint64_t* state, std::uint64_t counters, cuda::stream_view stream) {
  advance_offset_kernel<<<1, 1, 0, stream.get()>>>(state, counters);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace detail

namespace {

// Refuses what a dropout cannot run on, naming the call and the span: float32 data of one count
// and a uint8 mask of as many elements.
void expect_dropout_spans(char const* what, char const* out_name, device_span out,
                          char const* in_name, device_span in, device_span mask, float p) {
  GRAPHSTEP_EXPECTS(p >= 0.0F && p < 1.0F, std::string{what} + ": p must lie in [0, 1)");
  graphstep::detail::expect_valid_span(what, out_name, out);
  graphstep::detail::expect_valid_span(what, in_name, in);
  graphstep::detail::expect_valid_span(what, "mask", mask);
  for (device_span const& span : {out, in}) {
    GRAPHSTEP_EXPECTS(
        span.type() == dtype::float32,
        std::string{what} + ": " + describe(span) + " is not float32; dropout runs on float32");
  }
  GRAPHSTEP_EXPECTS(
      mask.type() == dtype::uint8,
      std::string{what} + ": the mask is " + describe(mask) + "; it holds one uint8 per element");
  for (auto const& [name, span] : {std::pair{out_name, out}, std::pair{"mask", mask}}) {
    GRAPHSTEP_EXPECTS(span.count() == in.count(), std::string{what} + ": " + name + " is " +
                                                      describe(span) + " but " + in_name + " is " +
                                                      describe(in) + "; the spans need one count");
  }
}

}  // namespace

void dropout_forward(device_span y, device_span mask, device_span x, float p, philox_args rng,
                     cuda::stream_view stream) {
  expect_dropout_spans("dropout_forward", "y", y, "x", x, mask, p);
  GRAPHSTEP_EXPECTS(rng.state != nullptr, "dropout_forward: the generator state is a null pointer");
  if (x.empty()) return;
  std::size_t const n = x.count();
  detail::
      dropout_forward_kernel<<<detail::grid_for((n + 3) / 4), detail::threads, 0, stream.get()>>>(
          static_cast<float*>(y.data()), static_cast<std::uint8_t*>(mask.data()),
          static_cast<float const*>(x.data()), n, p, rng);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void dropout_backward(device_span dx, device_span mask, device_span dy, float p,
                      cuda::stream_view stream) {
  expect_dropout_spans("dropout_backward", "dx", dx, "dy", dy, mask, p);
  if (dy.empty()) return;
  std::size_t const n = dy.count();
  detail::dropout_backward_kernel<<<detail::grid_for(n), detail::threads, 0, stream.get()>>>(
      static_cast<float*>(dx.data()), static_cast<std::uint8_t const*>(mask.data()),
      static_cast<float const*>(dy.data()), n, 1.0F / (1.0F - p));
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace graphstep::train
