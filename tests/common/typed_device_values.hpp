#pragma once

// Device buffers and host helpers of the ops' GPU tests. Inputs are rounded to the storage type
// on upload and the rounded values returned, so that the fp64 reference sees exactly what the GPU
// sees; outputs start poisoned with NaN, so that an element the GPU never wrote shows up.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <graphstep/cuda/check.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/reference.hpp>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "common/gpu_test.hpp"

namespace graphstep::testing {

/// @brief Device memory of `count` elements of one storage type, `offset_bytes` past the 256-byte
/// boundary cudaMalloc returns (an offset that is no multiple of 16 takes the kernels' scalar
/// paths). Allocated to the byte: an access past the end faults as soon as it leaves the
/// allocation's alignment slack (on the simulated device; compute-sanitizer on a GPU).
class device_values {
 public:
  device_values(dtype type, std::size_t count, std::size_t offset_bytes = 0)
      : type_{type}, count_{count} {
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&base_, std::max<std::size_t>(bytes() + offset_bytes, 1)));
    data_ = static_cast<unsigned char*>(base_) + offset_bytes;
    poison();
  }
  ~device_values() { GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(base_)); }
  device_values(device_values const&) = delete;
  device_values& operator=(device_values const&) = delete;
  device_values(device_values&&) = delete;
  device_values& operator=(device_values&&) = delete;

  [[nodiscard]] void* get() const { return data_; }
  [[nodiscard]] device_span span() const { return {data_, type_, count_}; }
  /// The fp32 view, for buffers whose type is float32 (statistics, workspace).
  [[nodiscard]] float* floats() const { return static_cast<float*>(data_); }
  [[nodiscard]] std::size_t bytes() const { return count_ * size_in_bytes(type_); }

  /// All bits set: NaN in fp32, fp16 and bf16. cudaMemset runs on the legacy stream, which the
  /// tests' non-blocking streams do not wait for: it is waited for here.
  void poison() const {
    GRAPHSTEP_CUDA_TRY(cudaMemset(data_, 0xFF, bytes()));
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  }

  /// Rounds `values`, one per element, to the storage type (to nearest even), uploads them and
  /// returns them rounded.
  std::vector<double> upload(std::vector<double> values) const {
    std::vector<unsigned char> raw(bytes());
    std::size_t const size = size_in_bytes(type_);
    for (std::size_t i = 0; i < count_; ++i) values[i] = store(values[i], &raw[i * size]);
    copy_to_device(data_, raw.data(), raw.size());
    return values;
  }

  /// The bytes as stored, for comparisons bit for bit; waits for all device work first.
  [[nodiscard]] std::vector<unsigned char> raw() const {
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
    std::vector<unsigned char> raw(bytes());
    GRAPHSTEP_CUDA_TRY(cudaMemcpy(raw.data(), data_, raw.size(), cudaMemcpyDeviceToHost));
    return raw;
  }

  /// The values, exactly (every storage type converts to double without rounding).
  [[nodiscard]] std::vector<double> download() const {
    auto const raw_bytes = raw();
    std::size_t const size = size_in_bytes(type_);
    std::vector<double> values(count_);
    for (std::size_t i = 0; i < count_; ++i) values[i] = load(&raw_bytes[i * size]);
    return values;
  }

 private:
  // Writes `value` rounded to the storage type at `to` and returns the rounded value.
  [[nodiscard]] double store(double value, unsigned char* to) const {
    auto const f = static_cast<float>(value);
    switch (type_) {
      case dtype::float32: std::memcpy(to, &f, 4); return f;
      case dtype::float16: {
        __half const h = __float2half_rn(f);
        std::memcpy(to, &h, 2);
        return __half2float(h);
      }
      case dtype::bfloat16: {
        __nv_bfloat16 const h = __float2bfloat16_rn(f);
        std::memcpy(to, &h, 2);
        return __bfloat162float(h);
      }
      case dtype::int32:
      case dtype::uint8: break;  // the ops' tests hold floating values only
    }
    return std::numeric_limits<double>::quiet_NaN();
  }

  [[nodiscard]] double load(unsigned char const* from) const {
    switch (type_) {
      case dtype::float32: {
        float f = 0.0F;
        std::memcpy(&f, from, 4);
        return f;
      }
      case dtype::float16: {
        __half h{};
        std::memcpy(&h, from, 2);
        return __half2float(h);
      }
      case dtype::bfloat16: {
        __nv_bfloat16 h{};
        std::memcpy(&h, from, 2);
        return __bfloat162float(h);
      }
      case dtype::int32:
      case dtype::uint8: break;  // the ops' tests hold floating values only
    }
    return std::numeric_limits<double>::quiet_NaN();
  }

  dtype type_;
  std::size_t count_;
  void* base_{};
  void* data_{};
};

/// @brief Device memory of plain values (token ids, targets, a loss, a workspace), poisoned like
/// device_values until written, `offset_bytes` past the 256-byte boundary (4 with int32 ids: the
/// scalar id scan). Allocated to the byte.
template <typename T>
class device_array {
 public:
  explicit device_array(std::size_t count) : count_{count} { allocate(0); }
  explicit device_array(std::vector<T> const& values, std::size_t offset_bytes = 0)
      : count_{values.size()} {
    allocate(offset_bytes);
    copy_to_device(data_, values.data(), bytes());
  }
  ~device_array() { GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaFree(base_)); }
  device_array(device_array const&) = delete;
  device_array& operator=(device_array const&) = delete;
  device_array(device_array&&) = delete;
  device_array& operator=(device_array&&) = delete;

  [[nodiscard]] T* get() const { return data_; }
  [[nodiscard]] std::size_t bytes() const { return count_ * sizeof(T); }
  [[nodiscard]] device_span span() const {
    static_assert(std::is_same_v<T, std::int32_t> || std::is_same_v<T, float>,
                  "a span of int32 ids or float32 values");
    return {data_, std::is_same_v<T, float> ? dtype::float32 : dtype::int32, count_};
  }

  /// All bits set (NaN for floats), waited for as in device_values::poison.
  void poison() const {
    GRAPHSTEP_CUDA_TRY(cudaMemset(data_, 0xFF, bytes()));
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
  }

  /// The values; waits for all device work first.
  [[nodiscard]] std::vector<T> download() const {
    GRAPHSTEP_CUDA_TRY(cudaDeviceSynchronize());
    std::vector<T> values(count_);
    GRAPHSTEP_CUDA_TRY(cudaMemcpy(values.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    return values;
  }

 private:
  void allocate(std::size_t offset_bytes) {
    GRAPHSTEP_CUDA_TRY(cudaMalloc(&base_, bytes() + offset_bytes));
    data_ = reinterpret_cast<T*>(static_cast<unsigned char*>(base_) + offset_bytes);
    poison();
  }

  std::size_t count_;
  void* base_{};
  T* data_{};
};

/// @brief `count` values drawn uniformly from [low, high).
inline std::vector<double> random_values(std::size_t count, std::mt19937& rng, double low,
                                         double high) {
  std::uniform_real_distribution<double> dist{low, high};
  std::vector<double> values(count);
  for (auto& x : values) x = dist(rng);
  return values;
}

/// @brief `count` values drawn uniformly from [-1, 1).
inline std::vector<double> random_values(std::size_t count, std::mt19937& rng) {
  return random_values(count, rng, -1.0, 1.0);
}

/// @brief The unit roundoff u = 2^-p of the storage type (p = 24, 11, 8 significant bits): one
/// rounding to it is off by at most u relative to the result.
inline double unit_roundoff(dtype type) {
  switch (type) {
    case dtype::float32: return std::ldexp(1.0, -24);
    case dtype::float16: return std::ldexp(1.0, -11);
    case dtype::bfloat16: return std::ldexp(1.0, -8);
    case dtype::int32:
    case dtype::uint8: break;  // the ops' tests hold floating values only
  }
  return 1.0;
}

/// @brief Half the spacing of the subnormals: the absolute rounding error near zero (fp16's
/// spacing of 2^-24 matters for small probabilities and for sums that cancel).
inline double underflow(dtype type) {
  switch (type) {
    case dtype::float32: return std::ldexp(1.0, -150);
    case dtype::float16: return std::ldexp(1.0, -25);
    case dtype::bfloat16: return std::ldexp(1.0, -134);
    case dtype::int32:
    case dtype::uint8: break;  // the ops' tests hold floating values only
  }
  return 0.0;
}

/// @brief The relative Frobenius error of `got` against `want`, or infinity when `got` holds a
/// NaN or an infinity (a poisoned element the GPU never wrote, an overflow).
inline double error_of(std::vector<double> const& got, std::vector<double> const& want) {
  if (std::any_of(got.begin(), got.end(), [](double x) { return !std::isfinite(x); })) {
    return std::numeric_limits<double>::infinity();
  }
  return ops::reference::relative_error(got, want);
}

}  // namespace graphstep::testing
