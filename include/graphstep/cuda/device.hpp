#pragma once

/// @file cuda/device.hpp
/// @brief Device discovery that never crashes on machines without a GPU.

namespace graphstep::cuda {

/// @brief Number of visible CUDA devices; 0 when there is no GPU, no driver, or
/// `CUDA_VISIBLE_DEVICES` hides them all. Never throws.
[[nodiscard]] int device_count() noexcept;

/// @brief Throws `no_device_error`, with advice for a newcomer, when no device is visible.
/// @throws no_device_error
void require_device();

/// @brief The calling thread's current device.
/// @throws no_device_error, cuda_error
[[nodiscard]] int current_device();

}  // namespace graphstep::cuda
