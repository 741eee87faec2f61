#pragma once

/// @file schedule/detail/graph_cache_core.hpp
/// @brief The decisions of a graph cache, apart from CUDA: when a capture size runs eagerly, when
/// it is captured, which graphs the budget evicts, and whether a capture size replays its own
/// executable or the shared template's, switched to it by an update — with the fallback when
/// an update is refused. The work itself is done by injected functions. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <graphstep/error.hpp>
#include <graphstep/schedule/capture_sizes.hpp>
#include <graphstep/schedule/detail/lru_budget.hpp>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace graphstep::schedule::detail {

/// @brief What a graph cache asks of its graphs. Every function is required. A capture size is
/// named by its slot, its position in the cache's list of capture sizes, so that the work can keep
/// its graphs in arrays. `Context` is what one request hands down to the work it causes (the shell:
/// the caller's stream).
template <typename Context>
struct cache_actions {
  /// Runs the capture size's step eagerly (warm-up).
  std::function<void(Context const& context, std::size_t slot)> run_eager;
  /// Captures the capture size; instantiates it only when `instantiate` is true (otherwise it only
  /// holds the captured work, for updating the template). Returns the bytes to charge to the
  /// budget. On a throw the capture size must hold nothing.
  std::function<std::size_t(Context const& context, std::size_t slot, bool instantiate)> capture;
  /// Replays the capture size's own executable.
  std::function<void(Context const& context, std::size_t slot)> replay;
  /// Switches the executable of `template_slot` to `slot`'s captured work; false when refused
  /// (different topology), leaving the template as it was.
  std::function<bool(std::size_t template_slot, std::size_t slot)> update;
  /// Instantiates a captured but not instantiated capture size on its own.
  std::function<void(Context const& context, std::size_t slot)> instantiate;
  /// Drops the capture size's graph and returns its memory.
  std::function<void(std::size_t slot)> release;
  /// Waits until no graph runs (the template may run an evicted capture size's work).
  std::function<void()> wait_idle;
};

/// @brief How a request was served.
enum class served_by {
  eager,    ///< warm-up run
  capture,  ///< captured now, then replayed
  replay,   ///< replayed a graph captured before
};

/// @brief The graph cache's policy over a fixed list of capture sizes of type `Key` (`operator<`,
/// `describe`). A request names its capture size by slot (the policy's choice carries it), and
/// every per-size state sits in an array by slot: serving a request costs the same at 8 capture
/// sizes as at 512. Not thread-safe: one caller at a time.
template <typename Key, typename Context>
class graph_cache_core {
 public:
  /// @param sizes every capture size, ascending without repeats; a capture size's slot is its
  /// position
  /// @param share_template capture one template executable and switch it between capture sizes by
  /// update, instead of instantiating every capture size
  /// @throws usage_error (an action missing, negative warm-up, capture sizes not ascending)
  graph_cache_core(cache_actions<Context> actions, std::vector<Key> sizes, int warmup_runs,
                   std::size_t budget_bytes, bool share_template)
      : actions_{std::move(actions)},
        sizes_{std::move(sizes)},
        warmup_runs_{warmup_runs},
        share_template_{share_template},
        budget_{sizes_, budget_bytes},
        entries_(sizes_.size()) {
    GRAPHSTEP_EXPECTS(actions_.run_eager && actions_.capture && actions_.replay &&
                          actions_.update && actions_.instantiate && actions_.release &&
                          actions_.wait_idle,
                      "graph cache: every action (run_eager, capture, replay, update, "
                      "instantiate, release, wait_idle) must be given");
    GRAPHSTEP_EXPECTS(warmup_runs >= 0, "graph cache: warmup_runs must be >= 0");
    GRAPHSTEP_EXPECTS(
        std::adjacent_find(sizes_.begin(), sizes_.end(),
                           [](Key const& a, Key const& b) { return !(a < b); }) == sizes_.end(),
        "graph cache: the capture sizes must be ascending, without repeats");
  }

  /// @brief The slot of `size`.
  /// @throws usage_error (not one of the capture sizes)
  [[nodiscard]] std::size_t slot_of(Key const& size) const {
    std::optional<std::size_t> const slot = find(size);
    GRAPHSTEP_EXPECTS(slot.has_value(),
                      "graph cache: " + describe(size) + " is not one of its capture sizes");
    return *slot;
  }
  [[nodiscard]] std::vector<Key> const& sizes() const noexcept { return sizes_; }

  /// @brief Counts a request of `requested` elements served by a capture size of `size` elements.
  void count_request(std::int64_t requested, std::int64_t size) noexcept {
    stats_.requested_elements += requested;
    stats_.padded_elements += size - requested;
  }

  /// @brief Serves one request of the capture size in `slot`: eagerly while it warms up, then
  /// captures it once and replays it.
  /// @throws usage_error (slot out of range), what the actions throw; a failed capture leaves
  /// the capture size uncaptured (the next request tries again)
  served_by serve(std::size_t slot, Context const& context) {
    GRAPHSTEP_EXPECTS(slot < entries_.size(),
                      "graph cache: slot " + std::to_string(slot) + " is out of range; there are " +
                          std::to_string(entries_.size()) + " capture sizes");
    state& s = entries_[slot];
    if (s.captured) {
      ++stats_.hits;
      replay(context, slot, s);
      return served_by::replay;
    }
    ++stats_.misses;
    if (s.eager_runs < warmup_runs_) {
      ++s.eager_runs;
      ++stats_.eager_runs;
      actions_.run_eager(context, slot);
      return served_by::eager;
    }
    capture(context, slot, s);
    replay(context, slot, s);
    return served_by::capture;
  }

  /// @brief Warms up every capture size of `order` not captured yet, then captures them, both in
  /// that order (largest first, so each capture reuses the memory of the larger ones). The
  /// warm-ups come first because they are eager: run between captures, each would need memory
  /// no graph pins, beside the graphs'; run first, they share it and the first capture takes
  /// it. Replays nothing.
  /// @throws usage_error (a key that is not a capture size), what the actions throw
  void precapture(std::vector<Key> const& order, Context const& context) {
    std::vector<std::size_t> slots;
    slots.reserve(order.size());
    for (Key const& size : order) slots.push_back(slot_of(size));
    for (std::size_t slot : slots) {
      state& s = entries_[slot];
      if (s.captured) continue;
      for (; s.eager_runs < warmup_runs_; ++s.eager_runs) {
        ++stats_.eager_runs;
        actions_.run_eager(context, slot);
      }
    }
    for (std::size_t slot : slots) {
      state& s = entries_[slot];
      if (!s.captured) capture(context, slot, s);
    }
  }

  [[nodiscard]] cache_statistics const& statistics() const noexcept { return stats_; }
  /// @brief False for a key that is not a capture size.
  [[nodiscard]] bool is_captured(Key const& size) const {
    std::optional<std::size_t> const slot = find(size);
    return slot && entries_[*slot].captured;
  }
  [[nodiscard]] std::size_t captured_count() const {
    std::size_t n = 0;
    for (state const& s : entries_) n += s.captured ? 1 : 0;
    return n;
  }
  /// @brief Bytes charged to a capture size's graph (0 when it is not captured, or not a capture
  /// size).
  [[nodiscard]] std::size_t bytes_of(Key const& size) const {
    std::optional<std::size_t> const slot = find(size);
    return slot && entries_[*slot].captured ? entries_[*slot].bytes : 0;
  }
  /// @brief Bytes of every captured size's graph.
  [[nodiscard]] std::map<Key, std::size_t> bytes_by_size() const {
    std::map<Key, std::size_t> bytes;
    for (std::size_t slot = 0; slot < entries_.size(); ++slot) {
      if (entries_[slot].captured) bytes.emplace(sizes_[slot], entries_[slot].bytes);
    }
    return bytes;
  }
  /// @brief The capture size whose executable is shared (template mode, once one is captured).
  [[nodiscard]] std::optional<Key> template_size() const {
    if (!template_) return std::nullopt;
    return sizes_[*template_];
  }
  /// @brief Capture sizes whose update was refused and that were instantiated on their own.
  [[nodiscard]] std::set<Key> const& refused_sizes() const noexcept { return refused_; }
  /// @brief Capture sizes charged to the budget, least recently used first (not the template).
  [[nodiscard]] std::vector<Key> recency() const { return budget_.order(); }

 private:
  struct state {
    int eager_runs{};
    bool captured{};
    bool own_executable{};  // instantiated on its own (not through the template)
    std::size_t bytes{};
  };

  [[nodiscard]] std::optional<std::size_t> find(Key const& size) const {
    auto const found = std::lower_bound(sizes_.begin(), sizes_.end(), size);
    if (found == sizes_.end() || size < *found) return std::nullopt;
    return static_cast<std::size_t>(found - sizes_.begin());
  }

  void capture(Context const& context, std::size_t slot, state& s) {
    // In template mode only the first capture size is instantiated; the others lend it their work.
    bool const instantiate = !share_template_ || !template_;
    auto const start = std::chrono::steady_clock::now();
    std::size_t const bytes = actions_.capture(context, slot, instantiate);
    stats_.capture_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++stats_.captures;
    s.captured = true;
    s.own_executable = instantiate;
    s.bytes = bytes;
    if (share_template_ && !template_) {
      // Every other capture size runs through this executable: never evicted, not charged.
      template_ = slot;
      template_holds_ = slot;
      return;
    }
    std::vector<std::size_t> victims;
    try {
      victims = budget_.insert(slot, bytes);
    } catch (...) {
      drop(slot, s);  // refused: else the next request would replay it uncharged
      throw;
    }
    for (std::size_t victim : victims) evict(victim);
  }

  void replay(Context const& context, std::size_t slot, state& s) {
    budget_.touch(slot);
    if (s.own_executable && template_ != slot) {
      actions_.replay(context, slot);
      return;
    }
    if (template_holds_ != slot) {
      if (actions_.update(*template_, slot)) {
        ++stats_.updates;
        template_holds_ = slot;
      } else {
        // Another topology: this capture size gets an executable of its own from now on.
        ++stats_.update_refusals;
        refused_.insert(sizes_[slot]);
        actions_.instantiate(context, slot);
        s.own_executable = true;
        actions_.replay(context, slot);
        return;
      }
    }
    actions_.replay(context, *template_);
  }

  void evict(std::size_t slot) {
    state& s = entries_[slot];
    if (!s.captured) return;
    ++stats_.evictions;
    if (template_) {
      // The template may still be running this capture size's work; its memory must not be reused
      // before that ends, and that work must not run again.
      actions_.wait_idle();
      if (template_holds_ == slot) template_holds_.reset();
    }
    drop(slot, s);
  }

  // The graph of `slot` goes: released, uncharged, captured again on its next request.
  void drop(std::size_t slot, state& s) {
    actions_.release(slot);
    s.captured = false;
    s.own_executable = false;
    s.bytes = 0;
    budget_.erase(slot);
  }

  cache_actions<Context> actions_;
  std::vector<Key> sizes_;
  int warmup_runs_;
  bool share_template_;
  basic_lru_budget<Key> budget_;
  std::vector<state> entries_;  // by slot
  cache_statistics stats_;
  std::optional<std::size_t> template_;        // the slot whose executable is shared
  std::optional<std::size_t> template_holds_;  // the slot whose work that executable runs now
  std::set<Key> refused_;
};

}  // namespace graphstep::schedule::detail
