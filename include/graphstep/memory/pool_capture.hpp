#pragma once

/// @file memory/pool_capture.hpp
/// @brief `pool_capture`: the pool's side of one capture. While it is open, allocations on the
/// capture's streams serve the graph being captured; its end hands that graph a lease on the
/// memory, or gives the memory back.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <memory>
#include <string>

namespace graphstep::memory {

namespace detail {
class pool_state;
class graph_lease;
}  // namespace detail

/// @brief A graph's hold on the pool memory its capture used, from `pool_capture::commit`.
///
/// Copies share one hold: every block the capture touched stays reserved for the graph until
/// the last copy dies (a graph and its executables keep one each). Replays of graphs that share
/// memory are ordered by it (`graphs::graph_exec::replay` calls `before_replay` and
/// `after_replay` around its launch, or only `replay_is_settled` when that says it may). A
/// default-constructed lease holds nothing.
class pool_lease {
 public:
  pool_lease() noexcept = default;

  /// @brief True when it holds pool memory.
  [[nodiscard]] explicit operator bool() const noexcept { return lease_ != nullptr; }
  /// @brief Before the graph is launched on `stream` (not a capturing one): `stream` waits for
  /// the launches of graphs sharing this memory on other streams. No-op when empty.
  void before_replay(cuda::stream_view stream) const;
  /// @brief After the graph was launched on `stream` by a launch that records `launch` as its
  /// last node (the graph's own completion event, alive as long as the graph): later launches
  /// of graphs sharing this memory on other streams wait for that event. Nothing is enqueued.
  /// No-op when empty.
  void after_replay(cuda::stream_view stream, cudaEvent_t launch) const;
  /// @brief True when a replay on `stream` whose launch records `launch` needs neither
  /// `before_replay` nor `after_replay`: the latest replay of this graph was on `stream` with
  /// `launch` and the pool's launches, captures and graphs have not changed since. Takes no
  /// lock. True when empty.
  [[nodiscard]] bool replay_is_settled(cuda::stream_view stream, cudaEvent_t launch) const noexcept;

 private:
  friend class pool_capture;  // makes them
  explicit pool_lease(std::shared_ptr<detail::graph_lease> lease) noexcept;
  std::shared_ptr<detail::graph_lease> lease_;
};

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
  [[nodiscard]] pool_lease commit();
  /// @brief As `commit`, for a capture given two pools: the lease returned also holds
  /// `other_lease` (the other pool's, from its `commit`), and the graph's replays are ordered
  /// by the memory of both.
  /// @throws usage_error (not open; `other_lease` empty)
  [[nodiscard]] pool_lease commit_with(pool_lease other_lease);
  /// @brief Ends a failed capture: its memory returns to the pool at once.
  void abandon() noexcept;

 private:
  friend class memory_pool;  // opens it
  pool_capture(std::shared_ptr<detail::pool_state> state, unsigned long long capture_id) noexcept;
  std::shared_ptr<detail::pool_state> state_;
  unsigned long long capture_id_{};
};

}  // namespace graphstep::memory
