#pragma once

/// @file cuda/device_guard.hpp
/// @brief `device_guard`: makes a device current for a scope and restores the previous one.

namespace graphstep::cuda {

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
