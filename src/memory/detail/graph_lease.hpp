#pragma once

// A graph's hold on its pool memory: keeps the memory until the graph and its executables are
// gone, and orders the graph's replays after those of graphs that share the memory.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "memory/detail/pool_engine.hpp"

namespace graphstep::memory::detail {

class pool_state;

class graph_lease {
 public:
  graph_lease(std::shared_ptr<pool_state> pool, std::uint64_t graph) noexcept;
  ~graph_lease();
  graph_lease(graph_lease const&) = delete;
  graph_lease& operator=(graph_lease const&) = delete;
  graph_lease(graph_lease&&) = delete;
  graph_lease& operator=(graph_lease&&) = delete;

  /// Before the graph is launched on `stream` (not a capturing one): `stream` waits for launches
  /// of graphs sharing its memory on other streams.
  void before_replay(cudaStream_t stream) const;
  /// After the graph was launched on `stream` by a launch that records `launch` itself.
  void after_replay(cudaStream_t stream, cudaEvent_t launch) const;
  /// Without a lock: whether this replay needs nothing of any of the graph's pools
  /// (pool_engine::replay_is_settled).
  [[nodiscard]] bool replay_is_settled(cudaStream_t stream, cudaEvent_t launch) const noexcept;
  /// The graph holds memory of a second pool too (a capture given two): that lease lives as
  /// long as this one, and the graph's replays are ordered by both pools.
  void hold_also(std::shared_ptr<graph_lease> other) noexcept;

 private:
  std::shared_ptr<pool_state> pool_;
  std::uint64_t graph_;
  std::shared_ptr<graph_lease> also_;
  // What the latest replay of the graph left in this pool (written under the pool's lock).
  mutable replay_memo memo_;
};

}  // namespace graphstep::memory::detail
