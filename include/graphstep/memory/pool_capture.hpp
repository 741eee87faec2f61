#pragma once

/// @file memory/pool_capture.hpp
/// @brief `pool_capture`: the pool's side of one capture. While it is open, allocations on the
/// capture's streams serve the graph being captured; its end hands that graph a lease on the
/// memory, or gives the memory back.

#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <memory>
#include <string>

namespace graphstep::memory {

namespace detail {
class pool_state;
}  // namespace detail

/// @brief The pool's side of one capture, from `memory_pool::open_capture`.
///
/// End it with `commit()` when the capture succeeded, or `abandon()` (or destruction) when it
/// failed. Move-only; the capture side of graphstep (`graphs::capture_scope`) drives it, and a
/// program that captures with CUDA's own calls may drive it the same way.
class pool_capture {
 public:
  pool_capture() noexcept = default;
  pool_capture(pool_capture&& other) noexcept;
  pool_capture& operator=(pool_capture&& other) noexcept;
  pool_capture(pool_capture const&) = delete;
  pool_capture& operator=(pool_capture const&) = delete;
  /// @brief Abandons the capture when it was neither committed nor abandoned.
  ~pool_capture();

  /// @brief True until `commit` or `abandon`.
  [[nodiscard]] bool open() const noexcept { return state_ != nullptr; }
  /// @brief `side`, a stream of this capture, was joined into `into`, which now waits for all
  /// of `side`'s work: blocks the capture freed on `side` may serve `into` from now on
  /// (`graphs::capture_scope::join` says so; a join made with CUDA's events alone leaves them
  /// to `side` until the capture ends).
  /// @throws usage_error (not open)
  void join(cuda::stream_view side, cuda::stream_view into);
  /// @brief Empty when the captured graph may be kept; else why not (a planned capture that
  /// made fewer allocations than its warm-up).
  /// @throws usage_error (not open)
  [[nodiscard]] std::string problem() const;
  /// @brief Ends a successful capture. The lease returned keeps every block the capture
  /// touched reserved for its graph until the last holder of the lease dies (hold it as long
  /// as the graph and its executables live); blocks still allocated are the graph's outputs.
  /// @throws usage_error (not open)
  [[nodiscard]] std::shared_ptr<void> commit();
  /// @brief As `commit`, for a capture given two pools: the lease returned also holds
  /// `other_lease` (the other pool's, from its `commit`), and the graph's replays are ordered
  /// by the memory of both.
  /// @throws usage_error (not open; `other_lease` not a pool's lease)
  [[nodiscard]] std::shared_ptr<void> commit_with(std::shared_ptr<void> other_lease);
  /// @brief Ends a failed capture: its memory returns to the pool at once.
  void abandon() noexcept;

 private:
  friend class memory_pool;  // opens it
  pool_capture(std::shared_ptr<detail::pool_state> state, unsigned long long capture_id) noexcept;
  std::shared_ptr<detail::pool_state> state_;
  unsigned long long capture_id_{};
};

}  // namespace graphstep::memory
