#pragma once

/// @file schedule/graph_cache.hpp
/// @brief One graph per shape bucket, captured on first use into one shared pool, replayed on
/// every later request of that bucket.
///
/// A step whose shapes vary (batch size, sequence length, number of packed sequences) cannot be
/// one graph. `graph_cache` maps each request's size to a bucket (`bucket_policy`), runs the
/// first requests of a bucket eagerly (warm-up), then captures it and replays it from then on.
/// All buckets capture into one pool, largest first when pre-captured, so their memory is about
/// that of the largest. A memory budget evicts the least recently used graphs.
///
/// With `bucket_instantiation::update_template`, buckets that share one topology (the same
/// kernels with other arguments, grids or copy sizes) are captured but not instantiated: one
/// executable graph, the template, is switched between them with `cudaGraphExecUpdate`, so
/// instantiation time and executable memory grow with the number of topologies instead of
/// buckets. A bucket whose update CUDA refuses is instantiated on its own, and counted.
///
/// Every graph of a cache runs on the caller's stream, one at a time (they share a pool).

#include <graphstep/capture_scope.hpp>
#include <graphstep/graph.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/schedule/bucket_policy.hpp>
#include <graphstep/stream_view.hpp>

#include <functional>
#include <map>
#include <string>

namespace graphstep::schedule {

enum class bucket_instantiation { each_bucket, update_template };

struct graph_cache_options {
  /// Eager runs of a bucket before it is captured (lazy initialization of libraries, NCCL
  /// connections and algorithm choice happen there, not in the capture).
  int warmup_runs{1};
  /// Total memory of cached graphs (their growth of the pool and their outputs); 0: no budget.
  std::size_t budget_bytes{0};
  bucket_instantiation instantiation{bucket_instantiation::each_bucket};
  capture_mode mode{capture_mode::this_thread};
  std::string name{"graph_cache"};
};

class graph_cache {
 public:
  /// @brief The step for one bucket: issues everything to `stream`, sized for `bucket`.
  using step_function = std::function<void(std::int64_t bucket, stream_view stream)>;

  /// @throws usage_error (no step, negative warm-up)
  graph_cache(bucket_policy policy, step_function step, memory_pool& pool,
              graph_cache_options options = {});
  /// @brief In template mode, waits for the device first: the shared executable may still run
  /// work whose memory belongs to another bucket's graph.
  ~graph_cache();
  graph_cache(graph_cache const&) = delete;
  graph_cache& operator=(graph_cache const&) = delete;

  /// @brief Serves one request of `size`: eagerly while its bucket warms up, then by replay.
  /// Returns the bucket and the padding used.
  /// @throws usage_error (size outside the buckets), capture_error, and what the step throws
  bucket_choice run(std::int64_t size, stream_view stream);

  /// @brief Warms up and captures every bucket now, largest first.
  void precapture(stream_view stream);

  [[nodiscard]] cache_statistics const& statistics() const noexcept { return stats_; }
  [[nodiscard]] bool is_captured(std::int64_t bucket) const;
  [[nodiscard]] std::size_t captured_count() const;
  /// @brief Memory charged to a bucket's graph (0 when it is not captured).
  [[nodiscard]] std::size_t bytes_of(std::int64_t bucket) const;
  [[nodiscard]] bucket_policy const& policy() const noexcept { return policy_; }

 private:
  struct entry {
    graph captured;
    int eager_runs{};
    std::size_t bytes{};
  };
  void capture_bucket(std::int64_t bucket, entry& e, stream_view stream);
  void replay_bucket(std::int64_t bucket, entry& e, stream_view stream);
  void evict(std::int64_t bucket);

  bucket_policy policy_;
  step_function step_;
  memory_pool& pool_;
  graph_cache_options options_;
  std::map<std::int64_t, entry> entries_;
  lru_budget budget_;
  cache_statistics stats_;
  std::int64_t template_bucket_{-1};  // update_template: the bucket whose executable is shared
  std::int64_t template_holds_{-1};   // the bucket whose work that executable runs now
};

}  // namespace graphstep::schedule
