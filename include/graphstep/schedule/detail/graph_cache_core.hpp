#pragma once

/// @file schedule/detail/graph_cache_core.hpp
/// @brief The decisions of a graph cache, apart from CUDA: when a bucket runs eagerly, when it
/// is captured, which graphs the budget evicts, and whether a bucket replays its own
/// executable or the shared template's, switched to it by an update — with the fallback when
/// an update is refused. The work itself is done by injected functions. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <chrono>
#include <cstddef>
#include <functional>
#include <graphstep/error.hpp>
#include <graphstep/schedule/bucket_policy.hpp>
#include <graphstep/schedule/detail/lru_budget.hpp>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace graphstep::schedule::detail {

/// @brief What a graph cache asks of its graphs. Every function is required. `Context` is
/// what one request hands down to the work it causes (the shell: the caller's stream).
template <typename Key, typename Context>
struct cache_actions {
  /// Runs the bucket's step eagerly (warm-up).
  std::function<void(Context const& context, Key const& bucket)> run_eager;
  /// Captures the bucket; instantiates it only when `instantiate` is true (otherwise it only
  /// holds the captured work, for updating the template). Returns the bytes to charge to the
  /// budget. On a throw the bucket must hold nothing.
  std::function<std::size_t(Context const& context, Key const& bucket, bool instantiate)> capture;
  /// Replays the bucket's own executable.
  std::function<void(Context const& context, Key const& bucket)> replay;
  /// Switches the executable of `template_bucket` to `bucket`'s captured work; false when
  /// refused (different topology), leaving the template as it was.
  std::function<bool(Key const& template_bucket, Key const& bucket)> update;
  /// Instantiates a captured but not instantiated bucket on its own.
  std::function<void(Context const& context, Key const& bucket)> instantiate;
  /// Drops the bucket's graph and returns its memory.
  std::function<void(Key const& bucket)> release;
  /// Waits until no graph runs (the template may run an evicted bucket's work).
  std::function<void()> wait_idle;
};

/// @brief How a request was served.
enum class served_by {
  eager,    ///< warm-up run
  capture,  ///< captured now, then replayed
  replay,   ///< replayed a graph captured before
};

/// @brief The graph cache's policy over buckets of type `Key` (`operator<`, `key_name`).
/// Not thread-safe: one caller at a time.
template <typename Key, typename Context>
class graph_cache_core {
 public:
  /// @param share_template capture one template executable and switch it between buckets by
  /// update, instead of instantiating every bucket
  /// @throws usage_error (an action missing, negative warm-up)
  graph_cache_core(cache_actions<Key, Context> actions, int warmup_runs, std::size_t budget_bytes,
                   bool share_template)
      : actions_{std::move(actions)},
        warmup_runs_{warmup_runs},
        share_template_{share_template},
        budget_{budget_bytes} {
    GRAPHSTEP_EXPECTS(actions_.run_eager && actions_.capture && actions_.replay &&
                          actions_.update && actions_.instantiate && actions_.release &&
                          actions_.wait_idle,
                      "graph cache: every action (run_eager, capture, replay, update, "
                      "instantiate, release, wait_idle) must be given");
    GRAPHSTEP_EXPECTS(warmup_runs >= 0, "graph cache: warmup_runs must be >= 0");
  }

  /// @brief Counts a request of `requested` elements served by a bucket of `bucket` elements.
  void count_request(std::int64_t requested, std::int64_t bucket) noexcept {
    stats_.requested_elements += requested;
    stats_.padded_elements += bucket - requested;
  }

  /// @brief Serves one request of `bucket`: eagerly while it warms up, then captures it once
  /// and replays it.
  /// @throws what the actions throw; a failed capture leaves the bucket uncaptured (the next
  /// request tries again)
  served_by serve(Key const& bucket, Context const& context) {
    state& s = entries_[bucket];
    if (s.captured) {
      ++stats_.hits;
      replay(context, bucket, s);
      return served_by::replay;
    }
    ++stats_.misses;
    if (s.eager_runs < warmup_runs_) {
      ++s.eager_runs;
      ++stats_.eager_runs;
      actions_.run_eager(context, bucket);
      return served_by::eager;
    }
    capture(context, bucket, s);
    replay(context, bucket, s);
    return served_by::capture;
  }

  /// @brief Warms up every bucket of `order` not captured yet, then captures them, both in
  /// that order (largest first, so each capture reuses the memory of the larger ones). The
  /// warm-ups come first because they are eager: run between captures, each would need memory
  /// no graph pins, beside the graphs'; run first, they share it and the first capture takes
  /// it. Replays nothing.
  void precapture(std::vector<Key> const& order, Context const& context) {
    for (Key const& bucket : order) {
      state& s = entries_[bucket];
      if (s.captured) continue;
      for (; s.eager_runs < warmup_runs_; ++s.eager_runs) {
        ++stats_.eager_runs;
        actions_.run_eager(context, bucket);
      }
    }
    for (Key const& bucket : order) {
      state& s = entries_[bucket];
      if (!s.captured) capture(context, bucket, s);
    }
  }

  [[nodiscard]] cache_statistics const& statistics() const noexcept { return stats_; }
  [[nodiscard]] bool is_captured(Key const& bucket) const {
    auto found = entries_.find(bucket);
    return found != entries_.end() && found->second.captured;
  }
  [[nodiscard]] std::size_t captured_count() const {
    std::size_t n = 0;
    for (auto const& [key, s] : entries_) n += s.captured ? 1 : 0;
    return n;
  }
  /// @brief Bytes charged to a bucket's graph (0 when it is not captured).
  [[nodiscard]] std::size_t bytes_of(Key const& bucket) const {
    auto found = entries_.find(bucket);
    return found == entries_.end() || !found->second.captured ? 0 : found->second.bytes;
  }
  /// @brief Bytes of every captured bucket's graph.
  [[nodiscard]] std::map<Key, std::size_t> bytes_by_bucket() const {
    std::map<Key, std::size_t> bytes;
    for (auto const& [key, s] : entries_) {
      if (s.captured) bytes.emplace(key, s.bytes);
    }
    return bytes;
  }
  /// @brief The bucket whose executable is shared (template mode, once one is captured).
  [[nodiscard]] std::optional<Key> template_bucket() const { return template_; }
  /// @brief Buckets whose update was refused and that were instantiated on their own.
  [[nodiscard]] std::set<Key> const& refused_buckets() const noexcept { return refused_; }
  /// @brief Buckets charged to the budget, least recently used first (not the template).
  [[nodiscard]] std::vector<Key> recency() const { return budget_.order(); }

 private:
  struct state {
    int eager_runs{};
    bool captured{};
    bool own_executable{};  // instantiated on its own (not through the template)
    std::size_t bytes{};
  };

  void capture(Context const& context, Key const& bucket, state& s) {
    // In template mode only the first bucket is instantiated; the others lend it their work.
    bool const instantiate = !share_template_ || !template_;
    auto const start = std::chrono::steady_clock::now();
    std::size_t const bytes = actions_.capture(context, bucket, instantiate);
    stats_.capture_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++stats_.captures;
    s.captured = true;
    s.own_executable = instantiate;
    s.bytes = bytes;
    if (share_template_ && !template_) {
      // Every other bucket runs through this executable: never evicted, not charged.
      template_ = bucket;
      template_holds_ = bucket;
      return;
    }
    std::vector<Key> victims;
    try {
      victims = budget_.insert(bucket, bytes);
    } catch (...) {
      drop(bucket, s);  // refused: else the next request would replay it uncharged
      throw;
    }
    for (Key const& victim : victims) evict(victim);
  }

  void replay(Context const& context, Key const& bucket, state& s) {
    budget_.touch(bucket);
    if (s.own_executable && !(template_ && bucket == *template_)) {
      actions_.replay(context, bucket);
      return;
    }
    if (template_holds_ != bucket) {
      if (actions_.update(*template_, bucket)) {
        ++stats_.updates;
        template_holds_ = bucket;
      } else {
        // Another topology: this bucket gets an executable of its own from now on.
        ++stats_.update_refusals;
        refused_.insert(bucket);
        actions_.instantiate(context, bucket);
        s.own_executable = true;
        actions_.replay(context, bucket);
        return;
      }
    }
    actions_.replay(context, *template_);
  }

  void evict(Key const& bucket) {
    auto found = entries_.find(bucket);
    if (found == entries_.end() || !found->second.captured) return;
    ++stats_.evictions;
    if (template_) {
      // The template may still be running this bucket's work; its memory must not be reused
      // before that ends, and that work must not run again.
      actions_.wait_idle();
      if (template_holds_ == bucket) template_holds_.reset();
    }
    drop(bucket, found->second);
  }

  // The graph of `bucket` goes: released, uncharged, captured again on its next request.
  void drop(Key const& bucket, state& s) {
    actions_.release(bucket);
    s.captured = false;
    s.own_executable = false;
    s.bytes = 0;
    budget_.erase(bucket);
  }

  cache_actions<Key, Context> actions_;
  int warmup_runs_;
  bool share_template_;
  basic_lru_budget<Key> budget_;
  std::map<Key, state> entries_;
  cache_statistics stats_;
  std::optional<Key> template_;        // the bucket whose executable is shared
  std::optional<Key> template_holds_;  // the bucket whose work that executable runs now
  std::set<Key> refused_;
};

}  // namespace graphstep::schedule::detail
