#pragma once

// The device a stream belongs to, for checks that refuse another device's stream by name
// before CUDA refuses it with a bare error code.

#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <optional>

namespace graphstep::cuda::detail {

/// The device of `stream` (cudaStreamGetDevice: the legacy and per-thread default streams are
/// the current device's); nullopt where the runtime cannot tell, when built against a CUDA
/// older than 12.8, which lacks cudaStreamGetDevice.
/// @throws cuda_error (e.g. a destroyed stream)
[[nodiscard]] inline std::optional<int> stream_device(cudaStream_t stream) {
#if CUDART_VERSION >= 12080
  int device = -1;
  GRAPHSTEP_CUDA_TRY(cudaStreamGetDevice(stream, &device));
  return device;
#else
  static_cast<void>(stream);
  return std::nullopt;
#endif
}

}  // namespace graphstep::cuda::detail
