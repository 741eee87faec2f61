#pragma once

/// @file cuda/event.hpp
/// @brief `event`: an owning, move-only CUDA event without timing, for ordering streams, and
/// `timed_event`, one that records time, for measuring GPU work.

#include <cuda_runtime_api.h>

#include <graphstep/cuda/stream_view.hpp>
#include <memory>

namespace graphstep::cuda {

namespace detail {
struct event_deleter {
  using pointer = cudaEvent_t;  // unique_ptr holds the handle itself
  void operator()(pointer handle) const noexcept;
};
}  // namespace detail

/// @brief An owning CUDA event created with `cudaEventDisableTiming` (cheaper to record and
/// wait on). Use `timed_event` to measure time. Move-only; a moved-from event holds no handle.
class event {
 public:
  /// @throws no_device_error, cuda_error
  event();

  /// @brief Takes ownership of an existing event handle.
  [[nodiscard]] static event adopt(cudaEvent_t handle) noexcept { return event{handle}; }

  event(event&&) noexcept = default;
  event& operator=(event&&) noexcept = default;
  event(event const&) = delete;
  event& operator=(event const&) = delete;
  ~event() = default;

  /// @brief Records the event at the current end of `stream`.
  /// @throws cuda_error; usage_error on a moved-from event
  void record(stream_view stream) const;
  /// @brief Blocks the host until the last record has completed.
  /// @throws cuda_error
  void synchronize() const;
  /// @brief True when the last record has completed (or the event was never recorded).
  /// @throws cuda_error
  [[nodiscard]] bool query() const;

  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_.get(); }
  /// @post get() == nullptr
  [[nodiscard]] cudaEvent_t release() noexcept { return handle_.release(); }

 protected:
  explicit event(unsigned int flags);
  explicit event(cudaEvent_t handle) noexcept : handle_{handle} {}
  [[nodiscard]] cudaEvent_t checked() const;

 private:
  std::unique_ptr<cudaEvent_t, detail::event_deleter> handle_;
};

/// @brief An owning CUDA event with timing enabled. Move-only.
class timed_event : public event {
 public:
  /// @throws no_device_error, cuda_error
  timed_event();

  /// @brief Milliseconds of GPU time between two completed records.
  /// @throws cuda_error (cudaErrorNotReady when a record has not completed yet)
  [[nodiscard]] static float elapsed_ms(timed_event const& start, timed_event const& end);
};

}  // namespace graphstep::cuda
