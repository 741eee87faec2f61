#pragma once

/// @file graphs/graph_exec.hpp
/// @brief `graph_exec`: an executable graph, replayed in one launch. It exists only from a
/// capture or from `graph::instantiate`.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/graphs/output_guard.hpp>
#include <memory>
#include <optional>
#include <string>

namespace graphstep::graphs {

namespace detail {
struct graph_exec_deleter {
  using pointer = cudaGraphExec_t;
  void operator()(pointer handle) const noexcept;
};
}  // namespace detail

/// @brief An executable graph (`cudaGraphExec_t`) and the captured work it runs.
///
/// Made by a capture into it (`capture_scope`, `capture()`) or by `graph::instantiate`; a
/// default-constructed or moved-from `graph_exec` is empty and refuses to replay. It keeps the
/// pool memory of the work it runs, at the same addresses, for as long as it lives, whatever
/// happens to the `memory_pool` handle or the `graph` it was made from.
///
/// Stream ordering: `replay(s)` enqueues the whole graph on `s`; it runs after the work issued
/// to `s` before it, and work issued after it waits for it. One executable runs one replay at
/// a time: replays on two streams are serialized by CUDA. A captured graph's replay enqueues
/// nothing but the launch: the event that marks its end is the graph's own last node, so an
/// event the work records last means that its stream is done (PyTorch's semantics). Move-only.
class graph_exec {
 public:
  /// @brief An empty executable, to be captured into or assigned.
  graph_exec() noexcept;
  graph_exec(graph_exec&& other) noexcept;
  graph_exec& operator=(graph_exec&& other) noexcept;
  graph_exec(graph_exec const&) = delete;
  graph_exec& operator=(graph_exec const&) = delete;
  /// @brief Destroys the executable and gives up its memory. If it was replayed, it first waits
  /// for the latest replay (`synchronize()`), so no replay still in flight can touch memory that
  /// is handed out again. It waits for nothing else: a capture under way on another thread, in
  /// any mode, is left intact.
  ~graph_exec();

  /// @brief True when there is nothing to replay (default-constructed or moved-from).
  [[nodiscard]] bool empty() const noexcept { return exec_ == nullptr; }
  /// @brief Destroys the executable as the destructor does (waiting for its latest replay) and
  /// leaves it empty, to capture into again (PyTorch's `CUDAGraph.reset()`). Output guards
  /// taken from it stay valid and fail their check from now on.
  /// @post `empty()`
  void reset() noexcept;
  /// @brief Enqueues the whole graph on `stream`, a stream of the device the graph was captured
  /// on (`device()`), which must also be current. The stream's device is asked once per
  /// stream in a row (it cannot change); the current device at every replay.
  /// @throws usage_error (empty executable, legacy default stream, a stream of another device,
  /// another device current), cuda_error
  void replay(cuda::stream_view stream);
  /// @brief Blocks the host until the latest replay (and so every earlier one) has finished;
  /// returns at once if it never replayed. It waits on the event that marks the end of each
  /// replay (the graph's last node), in relaxed capture mode, so a capture under way on another
  /// thread is left intact. Two executables of one graph share that event: each then waits for
  /// the latest replay of either.
  /// @throws cuda_error
  void synchronize() const;
  /// @brief Loads the graph onto the device ahead of the first replay, so that replay is not
  /// slower than the others. A capture into a `graph_exec` does this unless told not to.
  /// @throws usage_error (empty executable), cuda_error
  void upload(cuda::stream_view stream) const;
  /// @brief Makes this executable run `source`'s work from the next replay on, without a new
  /// instantiation (`cudaGraphExecUpdate`): kernel arguments, grid sizes and copy sizes may
  /// differ, the topology may not. Returns false, leaving the executable as it was, when CUDA
  /// refuses; the caller then instantiates `source` instead. `source` keeps the memory that
  /// work touches: keep it alive for as long as this executable may run that work (a graph
  /// cache keeps every bucket's graph), and let it die only once such replays have finished.
  /// Replays are then ordered by `source`'s pool memory (see `memory::memory_pool`), and refused
  /// once `source` is gone, until the next update.
  /// @throws usage_error (this executable or `source` is empty)
  [[nodiscard]] bool update(graph const& source);

  /// @brief The captured work this executable was made from (shared: counting nodes, DOT
  /// export; an update keeps the topology, so the counts hold for updated work too).
  /// @throws usage_error (empty executable)
  [[nodiscard]] graph const& source() const;
  /// @brief Shorthand for `source().node_counts()`.
  [[nodiscard]] graph_node_counts node_counts() const { return source().node_counts(); }
  /// @brief Shorthand for `source().write_dot(path, verbose)`.
  void write_dot(std::string const& path, bool verbose = false) const {
    source().write_dot(path, verbose);
  }
  /// @brief The name given to the capture, used in error messages ("graph" when empty).
  [[nodiscard]] std::string const& name() const noexcept;
  /// @brief The device the graph was captured on, where it must be replayed (-1 when empty).
  [[nodiscard]] int device() const noexcept;
  /// @brief The id of the graph it was made from (0 when empty); the pool tags that graph's
  /// memory with it.
  [[nodiscard]] std::uint64_t id() const noexcept;
  /// @brief Number of replays so far.
  [[nodiscard]] std::uint64_t replay_count() const noexcept { return replays_; }
  /// @brief A guard for the outputs of the latest replay, named `what` in its error: its
  /// `check()` throws once this executable has replayed again (the outputs were overwritten).
  [[nodiscard]] output_guard guard_output(std::string const& what) const;
  [[nodiscard]] cudaGraphExec_t get() const noexcept { return exec_.get(); }

 private:
  friend class graph;  // graph::instantiate is the one place an executable is made
  graph_exec(cudaGraphExec_t handle, graph source) noexcept;
  void release() noexcept;
  // Refusals of replay(), out of its way.
  void expect_stream_of_device(cuda::stream_view stream);
  void expect_device_current(int current) const;

  graph source_;
  // After an update to another graph's work: that graph, not kept alive (its owner keeps it);
  // a replay orders itself by its memory, and refuses once it is gone.
  std::optional<std::weak_ptr<detail::graph_state const>> updated_from_;
  std::uint64_t replays_{};
  // The last stream found to be of the graph's device: a stream's device never changes.
  cudaStream_t checked_stream_{};
  // Created on first use, so construction and moves stay noexcept.
  mutable replay_generation generation_;
  std::unique_ptr<cudaGraphExec_t, detail::graph_exec_deleter> exec_;
};

}  // namespace graphstep::graphs
