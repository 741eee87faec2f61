#pragma once

/// @file graphs/graph.hpp
/// @brief `graph`: a captured CUDA graph and its executable instance, replayed in one launch.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/graphs/output_guard.hpp>
#include <memory>
#include <string>

namespace graphstep::graphs {

class capture_scope;

namespace detail {
struct graph_deleter {
  using pointer = cudaGraph_t;
  void operator()(pointer handle) const noexcept;
};
struct graph_exec_deleter {
  using pointer = cudaGraphExec_t;
  void operator()(pointer handle) const noexcept;
};
}  // namespace detail

/// @brief Node counts of a captured graph, by node type.
struct graph_node_counts {
  std::size_t kernel{};
  std::size_t memcpy{};
  std::size_t memset{};
  std::size_t host{};
  std::size_t child_graph{};
  std::size_t empty{};
  std::size_t event_record{};
  std::size_t event_wait{};
  std::size_t memory_alloc{};
  std::size_t memory_free{};
  std::size_t conditional{};
  std::size_t other{};
  std::size_t total{};
};

/// @brief A captured CUDA graph (`cudaGraph_t`) with its executable instance
/// (`cudaGraphExec_t`).
///
/// A `graph` starts empty and is filled only by a capture (`capture_scope` or `capture()`),
/// which also ties to it the pool memory its kernels use: that memory stays valid, at the same
/// addresses, for as long as the graph lives, whatever happens to the `memory_pool` handle.
///
/// Stream ordering: `replay(s)` enqueues the whole graph on `s`; it runs after the work issued
/// to `s` before it, and work issued after it waits for it. One graph runs one replay at a
/// time: replays on two streams are serialized by CUDA. Move-only; a moved-from graph is empty.
class graph {
 public:
  /// @brief An empty graph, ready to be captured into.
  graph() noexcept;
  graph(graph&& other) noexcept;
  graph& operator=(graph&& other) noexcept;
  graph(graph const&) = delete;
  graph& operator=(graph const&) = delete;
  /// @brief Destroys the executable graph and returns its pool memory. If it was replayed, the
  /// device is synchronized first, so no replay still in flight can touch memory that is
  /// handed out again.
  ~graph();

  /// @brief True when there is nothing to replay: before a successful capture, after a move,
  /// or when the capture was made with `capture_options::instantiate` off.
  [[nodiscard]] bool empty() const noexcept { return exec_ == nullptr; }
  /// @brief True when a captured graph is held (instantiated or not).
  [[nodiscard]] bool captured() const noexcept { return graph_ != nullptr; }

  /// @brief Instantiates a graph captured with `capture_options::instantiate` off.
  /// @throws usage_error (nothing captured, already instantiated), capture_error
  void instantiate(unsigned long long flags = 0);

  /// @brief Makes this graph's executable run `source`'s captured work instead, without a new
  /// instantiation (`cudaGraphExecUpdate`): kernel arguments, grid sizes and copy sizes may
  /// differ, the topology may not. Returns false, leaving this graph as it was, when CUDA
  /// refuses the update; the caller then instantiates `source` instead. `source` must stay
  /// alive while this graph replays its work (its pool memory is what the work touches).
  /// @throws usage_error (this graph is empty, or `source` holds no captured graph)
  [[nodiscard]] bool update_from(graph const& source);

  /// @brief Enqueues the whole graph on `stream`.
  /// @throws usage_error (empty or moved-from graph, legacy default stream, wrong device),
  /// cuda_error
  void replay(cuda::stream_view stream);

  /// @brief Loads the graph onto the device ahead of the first replay, so that replay is not
  /// slower than the others. Capture does this already unless told not to.
  /// @throws usage_error (empty graph), cuda_error
  void upload(cuda::stream_view stream) const;

  /// @brief Counts the captured nodes by type.
  /// @throws usage_error (empty graph), cuda_error
  [[nodiscard]] graph_node_counts node_counts() const;

  /// @brief Writes the graph in Graphviz DOT form (`cudaGraphDebugDotPrint`), for debugging.
  /// @param verbose include kernel parameters, memcpy sizes and other details
  /// @throws usage_error (empty graph), cuda_error (e.g. the file cannot be written)
  void write_dot(std::string const& path, bool verbose = false) const;

  /// @brief The name given to the capture ("graph" unless set), used in error messages.
  [[nodiscard]] std::string const& name() const noexcept { return name_; }
  /// @brief The device the graph was captured on, where it must be replayed.
  [[nodiscard]] int device() const noexcept { return device_; }
  /// @brief A process-unique identity, stable across moves; the pool tags memory with it.
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  /// @brief Number of replays so far.
  [[nodiscard]] std::uint64_t replay_count() const noexcept { return replays_; }

  /// @brief A guard for the outputs of the latest replay, named `what` in its error: its
  /// `check()` throws once this graph has replayed again (the outputs were overwritten).
  [[nodiscard]] output_guard guard_output(std::string const& what) const;

  [[nodiscard]] cudaGraph_t native_graph() const noexcept { return graph_.get(); }
  [[nodiscard]] cudaGraphExec_t native_exec() const noexcept { return exec_.get(); }

 private:
  friend class capture_scope;
  void release() noexcept;

  std::uint64_t id_;
  std::string name_{"graph"};
  int device_{-1};
  std::uint64_t replays_{};
  // Created on first use, so construction and moves stay noexcept.
  mutable replay_generation generation_;
  // Declared before the handles, so it is destroyed after them: the memory outlives the exec.
  std::shared_ptr<void> memory_lease_;
  std::unique_ptr<cudaGraph_t, detail::graph_deleter> graph_;
  std::unique_ptr<cudaGraphExec_t, detail::graph_exec_deleter> exec_;
};

}  // namespace graphstep::graphs
