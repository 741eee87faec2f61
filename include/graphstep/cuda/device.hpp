#pragma once

/// @file cuda/device.hpp
/// @brief Device discovery that never crashes on machines without a GPU, and `device_guard`,
/// which makes a device current for a scope and restores the previous one.

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

/// @brief Sets the current device on construction and restores the previous one on
/// destruction. Not copyable or movable: it belongs to one scope of one thread.
class device_guard {
 public:
  /// @throws no_device_error, cuda_error (e.g. an out-of-range device)
  explicit device_guard(int device);
  ~device_guard();
  device_guard(device_guard const&) = delete;
  device_guard& operator=(device_guard const&) = delete;

 private:
  int previous_{0};
  bool changed_{false};
};

}  // namespace graphstep::cuda
