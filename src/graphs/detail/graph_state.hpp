#pragma once

// What a `graph` and every executable made of it share: the captured work, who it is, and the
// pool memory its nodes use. Destroyed with the last of them.

#include <cuda_runtime_api.h>

#include <graphstep/graphs/graph.hpp>
#include <graphstep/memory/pool_capture.hpp>
#include <memory>

namespace graphstep::graphs::detail {

struct graph_deleter {
  using pointer = cudaGraph_t;
  void operator()(pointer handle) const noexcept;
};

struct graph_state {
  graph_identity identity;
  // Declared before the handle, so it is released after it: the memory outlives the work.
  memory::pool_lease memory;
  std::unique_ptr<cudaGraph_t, graph_deleter> handle;
};

}  // namespace graphstep::graphs::detail
