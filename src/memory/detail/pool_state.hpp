#pragma once

// The shared state behind a memory_pool handle: the pool's engine driven by CUDA. Graphs
// captured into the pool hold it through a lease, so it lives until the last of them and the
// handle are gone.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <graphstep/cuda/event.hpp>
#include <graphstep/memory/allocation_plan.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory/detail/memory_backing.hpp"
#include "memory/detail/pool_engine.hpp"

namespace graphstep::memory::detail {

class graph_lease;

// The engine's device on CUDA: memory from a backing, events recorded on the pool's device.
class cuda_pool_device final : public pool_device {
 public:
  cuda_pool_device(int device, std::unique_ptr<memory_backing> backing);

  growth_status grow(std::size_t bytes, growth& out) override;
  std::size_t shrink(std::uintptr_t base, std::size_t region_bytes,
                     std::size_t free_bytes) override;
  [[nodiscard]] std::size_t granularity() const override { return backing_->granularity(); }
  [[nodiscard]] std::size_t reserved_bytes() const override { return backing_->reserved_bytes(); }
  [[nodiscard]] std::size_t mapped_bytes() const override { return backing_->mapped_bytes(); }
  void record(event_id event, stream_id stream) override;
  [[nodiscard]] bool complete(event_id event) override;
  void wait(stream_id stream, event_id event) override;
  void forget(event_id event) noexcept override;
  // A launch's own completion event (the cudaEvent_t itself), which the graph owns.
  [[nodiscard]] bool launch_complete(event_id launch) override;
  void wait_for_launch(stream_id stream, event_id launch) override;
  void synchronize(event_id event) override;
  [[nodiscard]] pool_backing kind() const noexcept { return backing_->kind(); }
  /// Keeps the memory mapped for the life of the process: it is never given back.
  void keep_mapped_forever() noexcept;

 private:
  int device_;
  std::unique_ptr<memory_backing> backing_;
  std::unordered_map<event_id, cuda::event> events_;
  std::vector<cuda::event> spare_events_;
};

class pool_state : public std::enable_shared_from_this<pool_state> {
 public:
  explicit pool_state(pool_options const& options);
  /// Waits for the frees still in flight, then gives the memory back; memory with blocks never
  /// deallocated stays mapped.
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
  void join(unsigned long long capture_id, cudaStream_t side, cudaStream_t into);
  /// Empty when the capture may be kept; else what went wrong (a planned capture that made
  /// fewer allocations than its warm-up).
  [[nodiscard]] std::string capture_problem(unsigned long long capture_id) const;
  /// Ends the capture. On success the graph gets a lease that keeps its memory until the graph
  /// dies; on failure its memory is returned at once and the result is empty.
  std::shared_ptr<graph_lease> finish_capture(unsigned long long capture_id, bool success);
  void release_graph(std::uint64_t graph) noexcept;
  void keep_after_graph(void* output);
  void record_use(void* pointer, cudaStream_t stream);
  std::size_t trim();
  /// Orders launches of graphs that share memory (pool_engine::before_replay, after_replay).
  void before_replay(std::uint64_t graph, cudaStream_t stream);
  void after_replay(std::uint64_t graph, cudaStream_t stream, cudaEvent_t launch,
                    replay_memo& memo);
  [[nodiscard]] bool replay_is_settled(replay_memo const& memo, cudaStream_t stream,
                                       cudaEvent_t launch) const noexcept {
    return engine_->replay_is_settled(memo, reinterpret_cast<std::uintptr_t>(stream),
                                      reinterpret_cast<std::uintptr_t>(launch));
  }

  [[nodiscard]] pool_statistics statistics() const;
  [[nodiscard]] std::vector<pool_segment> snapshot() const;
  [[nodiscard]] std::size_t bytes_held_by(std::uint64_t graph) const;
  [[nodiscard]] std::size_t bytes_pinned_by(std::uint64_t graph) const;
  [[nodiscard]] pool_backing backing() const noexcept { return device_->kind(); }
  [[nodiscard]] int device() const noexcept { return device_id_; }
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }

  void begin_trace();
  memory::allocation_trace end_trace();
  memory::allocation_plan plan_next_capture(memory::allocation_trace trace);

  void begin_timeline(std::size_t max_allocations);
  [[nodiscard]] pool_timeline timeline() const;
  pool_timeline end_timeline();
  void name_allocation(void* address, std::string name);

 private:
  // Refuses, by name, a stream of another device than the pool's: the pool records its events
  // on the streams it serves, and "event and stream must be on the same CUDA context"
  // (cudaEventRecord).
  void expect_own_device(cudaStream_t stream, char const* call) const;

  std::uint64_t id_{};
  int device_id_{};
  std::unique_ptr<cuda_pool_device> device_;  // outlives the engine, which forgets its events
  std::unique_ptr<pool_engine> engine_;
};

}  // namespace graphstep::memory::detail
