#pragma once

// What a `graph` and every executable made of it share: the captured work, who it is, and the
// pool memory its nodes use. Destroyed with the last of them.

#include <cuda_runtime_api.h>

#include <graphstep/cuda/event.hpp>
#include <graphstep/graphs/graph.hpp>
#include <graphstep/memory/pool_capture.hpp>
#include <memory>

namespace graphstep::graphs::detail {

struct graph_deleter {
  using pointer = cudaGraph_t;
  void operator()(pointer handle) const noexcept;
};

struct graph_state {
  graph_state() = default;
  graph_state(graph_state const&) = delete;
  graph_state& operator=(graph_state const&) = delete;
  graph_state(graph_state&&) = delete;
  graph_state& operator=(graph_state&&) = delete;
  // The last launch of this work ends before its memory goes back to the pool.
  ~graph_state();

  graph_identity identity;
  // Recorded at the end of every launch of this work: by the graph's own last node when
  // `completion_in_graph` (a capture puts it there), so a replay enqueues nothing after its
  // launch; else by graph_exec::replay right after the launch. Declared before the memory, so
  // it outlives the pool's notes of it.
  cuda::event completion;
  bool completion_in_graph{};
  // Declared before the handle, so it is released after it: the memory outlives the work.
  memory::pool_lease memory;
  std::unique_ptr<cudaGraph_t, graph_deleter> handle;
};

}  // namespace graphstep::graphs::detail
