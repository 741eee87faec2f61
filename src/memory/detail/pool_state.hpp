#pragma once

// The shared state behind a memory_pool handle. Graphs captured into the pool hold it through
// a lease, so it lives until the last of them and the handle are gone.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <graphstep/cuda/event.hpp>
#include <graphstep/memory/allocation_plan.hpp>
#include <graphstep/memory/detail/block_allocator.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory/detail/memory_backing.hpp"

namespace graphstep::memory::detail {

class pool_state : public std::enable_shared_from_this<pool_state> {
 public:
  explicit pool_state(pool_options const& options);
  /// Waits for the work that may still use the pool's memory, then gives the memory back.
  ~pool_state();
  pool_state(pool_state const&) = delete;
  pool_state& operator=(pool_state const&) = delete;
  pool_state(pool_state&&) = delete;
  pool_state& operator=(pool_state&&) = delete;

  void* allocate(std::size_t bytes, cudaStream_t stream);
  void deallocate(void* pointer, cudaStream_t stream);

  /// A capture with CUDA id `capture_id` into graph `graph` has begun.
  void begin_capture(unsigned long long capture_id, std::uint64_t graph, std::string name,
                     cudaStream_t origin);
  /// Empty when the capture may be kept; else what went wrong (a planned capture that made
  /// fewer allocations than its warm-up).
  [[nodiscard]] std::string capture_problem(unsigned long long capture_id) const;
  /// Ends the capture. On success the graph gets a lease that keeps its memory until the graph
  /// dies; on failure its memory is returned at once and the result is empty.
  std::shared_ptr<void> finish_capture(unsigned long long capture_id, bool success);
  void release_graph(std::uint64_t graph) noexcept;

  [[nodiscard]] pool_statistics statistics() const;
  [[nodiscard]] std::size_t bytes_held_by(std::uint64_t graph) const;
  [[nodiscard]] pool_backing backing() const noexcept { return backing_->kind(); }
  [[nodiscard]] int device() const noexcept { return device_; }

  void begin_trace();
  memory::allocation_trace end_trace();
  memory::allocation_plan plan_next_capture(memory::allocation_trace trace);

 private:
  struct capture_state {
    std::uint64_t graph{};
    std::string name;
    cudaStream_t origin{};
    std::set<cudaStream_t> streams;
    std::optional<memory::planned_sequence> plan;
    std::uintptr_t slab{};
  };

  std::uintptr_t allocate_block(std::size_t bytes, cudaStream_t stream, std::uint64_t owner);
  [[nodiscard]] bool grow(std::size_t bytes, std::size_t requested);
  [[nodiscard]] bool release_other_streams(cudaStream_t stream);
  [[noreturn]] void throw_out_of_memory(std::size_t requested, std::string const& reason) const;
  capture_state* capture_of(cudaStream_t stream);

  mutable std::mutex mutex_;
  pool_options options_;
  int device_{};
  std::unique_ptr<memory_backing> backing_;
  detail::block_allocator blocks_;
  std::size_t growths_{};
  std::unordered_map<unsigned long long, capture_state> captures_;
  std::set<std::uint64_t> live_graphs_;
  // Last eager free on each stream, so a block freed there can be reused from another stream
  // once that event has completed.
  std::map<cudaStream_t, cuda::event> free_events_;
  std::optional<memory::allocation_trace> trace_;
  std::unordered_map<std::uintptr_t, std::size_t> traced_ids_;
  std::optional<memory::allocation_trace> next_plan_;
};

}  // namespace graphstep::memory::detail
