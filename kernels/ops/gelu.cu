// GELU forward and backward and bias + GELU for the unfused path, for fp32, fp16 and bf16
// storage with fp32 math. The tanh form matches cuBLASLt's epilogue; the erf form is the exact
// GELU. 16-byte loads and stores where the pointers allow, a scalar loop for the tail. The bias
// gradient is in bias_grad.cu.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/dtype.hpp>
#include <type_traits>

#include "detail/element_conversion.cuh"
#include "ops/op_kernels.hpp"

namespace graphstep::ops {
namespace {

constexpr int threads = 256;

using graphstep::detail::from_float;
using graphstep::detail::to_float;

// Beyond |x| = 10 both forms have saturated in fp32: tanhf(√(2/π)(x + 0.044715x³)) and
// erff(x/√2) round to ±1, and x·exp(−x²/2) is below 1e-21, so the formulas give x or −0 and
// 1 or 0 there (to within 1e-21). Returning those directly keeps them where the formulas turn into
// NaN: ±inf meets a zero factor (inf·0), and in GELU′ x·x overflows for |x| above ~1.8e19. NaN
// falls through to the formula and stays NaN.
constexpr float saturation = 10.0F;

__device__ __forceinline__ float gelu(float x, bool erf_form) {
  if (x > saturation) return x;
  if (x < -saturation) return -0.0F;
  if (erf_form) return 0.5F * x * (1.0F + erff(x * 0.70710678118654752F));
  float const inner = 0.79788456080286536F * (x + 0.044715F * x * x * x);
  return 0.5F * x * (1.0F + tanhf(inner));
}

__device__ __forceinline__ float gelu_derivative(float x, bool erf_form) {
  if (x > saturation) return 1.0F;
  if (x < -saturation) return 0.0F;
  if (erf_form) {
    return 0.5F * (1.0F + erff(x * 0.70710678118654752F)) +
           x * expf(-0.5F * x * x) * 0.39894228040143268F;
  }
  float const c = 0.79788456080286536F;
  float const t = tanhf(c * (x + 0.044715F * x * x * x));
  return 0.5F * (1.0F + t) + 0.5F * x * (1.0F - t * t) * c * (1.0F + 0.134145F * x * x);
}

// 16 bytes of T, loaded and stored as one transaction.
template <typename T>
struct alignas(16) pack {
  static constexpr int size = 16 / sizeof(T);
  T v[size];
};

// z = y + bias[column] (bias optional), saved to `pre` (optional); y = GELU(z) or z. Works on
// the flat storage, so 16-byte packs may straddle rows: each element finds its own column.
template <typename T>
__device__ __forceinline__ void bias_gelu_element(T& y, T* pre, T const* bias, std::int64_t col,
                                                  bool apply_gelu, bool erf_form) {
  float z = to_float(y);
  if (bias != nullptr) z += to_float(bias[col]);
  if (pre != nullptr) *pre = from_float<T>(z);
  y = from_float<T>(apply_gelu ? gelu(z, erf_form) : z);
}

template <typename T>
__global__ void bias_gelu_kernel(T* y, T* pre, T const* bias, std::int64_t total, std::int64_t cols,
                                 bool apply_gelu, bool erf_form, bool vectorized) {
  std::int64_t const stride = std::int64_t{gridDim.x} * blockDim.x;
  std::int64_t const first = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  std::int64_t done = 0;
  if (vectorized) {
    constexpr int width = pack<T>::size;
    for (std::int64_t p = first; p < total / width; p += stride) {
      pack<T> values = reinterpret_cast<pack<T> const*>(y)[p];
      pack<T> saved;
      std::int64_t col = (p * width) % cols;
#pragma unroll
      for (int i = 0; i < width; ++i) {
        bias_gelu_element(values.v[i], pre != nullptr ? &saved.v[i] : nullptr, bias, col,
                          apply_gelu, erf_form);
        if (++col == cols) col = 0;
      }
      if (pre != nullptr) reinterpret_cast<pack<T>*>(pre)[p] = saved;
      reinterpret_cast<pack<T>*>(y)[p] = values;
    }
    done = total / width * width;  // the scalar loop below finishes the tail
  }
  for (std::int64_t i = done + first; i < total; i += stride) {
    bias_gelu_element(y[i], pre != nullptr ? pre + i : nullptr, bias, i % cols, apply_gelu,
                      erf_form);
  }
}

template <typename T>
__global__ void gelu_backward_kernel(T* dz, T const* dy, T const* pre, std::int64_t total,
                                     bool erf_form, bool vectorized) {
  std::int64_t const stride = std::int64_t{gridDim.x} * blockDim.x;
  std::int64_t const first = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  std::int64_t done = 0;
  if (vectorized) {
    constexpr int width = pack<T>::size;
    for (std::int64_t p = first; p < total / width; p += stride) {
      pack<T> const g = reinterpret_cast<pack<T> const*>(dy)[p];
      pack<T> const z = reinterpret_cast<pack<T> const*>(pre)[p];
      pack<T> out;
#pragma unroll
      for (int i = 0; i < width; ++i) {
        out.v[i] = from_float<T>(to_float(g.v[i]) * gelu_derivative(to_float(z.v[i]), erf_form));
      }
      reinterpret_cast<pack<T>*>(dz)[p] = out;
    }
    done = total / width * width;  // the scalar loop below finishes the tail
  }
  for (std::int64_t i = done + first; i < total; i += stride) {
    dz[i] = from_float<T>(to_float(dy[i]) * gelu_derivative(to_float(pre[i]), erf_form));
  }
}

unsigned grid_for(std::int64_t work) {
  std::int64_t const blocks = (work + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

bool aligned(void const* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

template <typename T>
void bias_gelu_of(void* y, void* pre, void const* bias, std::int64_t m, std::int64_t n,
                  bool apply_gelu, bool erf_form, cuda::stream_view stream) {
  bool const vectorized = aligned(y) && (pre == nullptr || aligned(pre));
  std::int64_t const work = vectorized ? m * n / pack<T>::size + 1 : m * n;
  bias_gelu_kernel<T><<<grid_for(work), threads, 0, stream.get()>>>(
      static_cast<T*>(y), static_cast<T*>(pre), static_cast<T const*>(bias), m * n, n, apply_gelu,
      erf_form, vectorized);
}

}  // namespace

namespace detail {

void bias_gelu(dtype type, void* y, void* pre_activation, void const* bias, std::int64_t m,
               std::int64_t n, bool apply_gelu, gelu_form form, cuda::stream_view stream) {
  bool const erf_form = form == gelu_form::erf;
  switch (type) {
    case dtype::float32:
      bias_gelu_of<float>(y, pre_activation, bias, m, n, apply_gelu, erf_form, stream);
      break;
    case dtype::float16:
      bias_gelu_of<__half>(y, pre_activation, bias, m, n, apply_gelu, erf_form, stream);
      break;
    case dtype::bfloat16:
      bias_gelu_of<__nv_bfloat16>(y, pre_activation, bias, m, n, apply_gelu, erf_form, stream);
      break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("bias_gelu", type);
  }
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

void gelu_backward(dtype type, void* dz, void const* dy, void const* pre_activation, std::int64_t m,
                   std::int64_t n, gelu_form form, cuda::stream_view stream) {
  bool const erf_form = form == gelu_form::erf;
  bool const vectorized = aligned(dz) && aligned(dy) && aligned(pre_activation);
  auto launch = [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    std::int64_t const work = vectorized ? m * n / pack<T>::size + 1 : m * n;
    gelu_backward_kernel<T><<<grid_for(work), threads, 0, stream.get()>>>(
        static_cast<T*>(dz), static_cast<T const*>(dy), static_cast<T const*>(pre_activation),
        m * n, erf_form, vectorized);
  };
  switch (type) {
    case dtype::float32: launch(static_cast<float*>(nullptr)); break;
    case dtype::float16: launch(static_cast<__half*>(nullptr)); break;
    case dtype::bfloat16: launch(static_cast<__nv_bfloat16*>(nullptr)); break;
    case dtype::int32:
    case dtype::uint8: graphstep::detail::refuse_integer("gelu_backward", type);
  }
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
}

}  // namespace detail
}  // namespace graphstep::ops
