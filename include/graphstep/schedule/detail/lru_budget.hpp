#pragma once

/// @file schedule/detail/lru_budget.hpp
/// @brief Least-recently-used order of cached graphs and their memory, under a budget. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/error.hpp>
#include <iterator>
#include <list>
#include <string>
#include <vector>

namespace graphstep::schedule::detail {

/// @brief How a capture size of one number is named in messages.
[[nodiscard]] inline std::string describe(std::int64_t size) {
  return std::to_string(size);
}

/// @brief Least-recently-used order of cached capture sizes and the memory each holds, under a
/// budget. A capture size is named by its slot, its position in the list of capture sizes given at
/// construction, so that every operation costs the same however many capture sizes there are (a
/// replay touches the order on every request). `Key` needs a `describe(Key)` found by lookup.
template <typename Key>
class basic_lru_budget {
 public:
  /// @param sizes every capture size, by slot; named in messages
  /// @param budget_bytes 0 means no budget
  explicit basic_lru_budget(std::vector<Key> sizes, std::size_t budget_bytes = 0)
      : sizes_{std::move(sizes)}, budget_{budget_bytes}, entries_(sizes_.size()) {}

  /// @brief Marks `slot` as just used. Capture sizes not held are ignored.
  void touch(std::size_t slot) {
    entry& e = at(slot);
    if (e.held) recency_.splice(recency_.end(), recency_, e.position);
  }

  /// @brief Adds `slot` holding `bytes`, as the most recent, and returns the slots to evict
  /// (least recent first) so that the total fits the budget; never the new one.
  /// @throws usage_error (a slot out of range or already held; a single capture size larger than
  /// the budget)
  [[nodiscard]] std::vector<std::size_t> insert(std::size_t slot, std::size_t bytes) {
    entry& e = at(slot);
    GRAPHSTEP_EXPECTS(!e.held,
                      "graph cache: capture size " + describe(sizes_[slot]) + " is already cached");
    GRAPHSTEP_EXPECTS(budget_ == 0 || bytes <= budget_,
                      "graph cache: the graph of capture size " + describe(sizes_[slot]) +
                          " needs " + std::to_string(bytes) +
                          " bytes, more than the whole budget of " + std::to_string(budget_) +
                          ": raise the budget or drop that capture size");
    std::vector<std::size_t> evicted;
    while (budget_ != 0 && total_ + bytes > budget_ && !recency_.empty()) {
      std::size_t const victim = recency_.front();
      evicted.push_back(victim);
      erase(victim);
    }
    recency_.push_back(slot);
    e = entry{true, bytes, std::prev(recency_.end())};
    total_ += bytes;
    return evicted;
  }

  /// @brief Forgets `slot`. Capture sizes not held are ignored.
  void erase(std::size_t slot) {
    entry& e = at(slot);
    if (!e.held) return;
    total_ -= e.bytes;
    recency_.erase(e.position);
    e = entry{};
  }

  [[nodiscard]] bool contains(std::size_t slot) const {
    return slot < entries_.size() && entries_[slot].held;
  }
  [[nodiscard]] std::size_t total_bytes() const noexcept { return total_; }
  [[nodiscard]] std::size_t budget() const noexcept { return budget_; }
  /// @brief The capture sizes held, least recent first.
  [[nodiscard]] std::vector<Key> order() const {
    std::vector<Key> keys;
    keys.reserve(recency_.size());
    for (std::size_t slot : recency_) keys.push_back(sizes_[slot]);
    return keys;
  }

 private:
  struct entry {
    bool held{};
    std::size_t bytes{};
    std::list<std::size_t>::iterator position{};
  };

  entry& at(std::size_t slot) {
    GRAPHSTEP_EXPECTS(slot < entries_.size(),
                      "graph cache: slot " + std::to_string(slot) + " is out of range; there are " +
                          std::to_string(entries_.size()) + " capture sizes");
    return entries_[slot];
  }

  std::vector<Key> sizes_;
  std::size_t budget_;
  std::size_t total_{};
  std::list<std::size_t> recency_;  // front = least recent
  std::vector<entry> entries_;      // by slot
};

/// @brief The budget of a cache keyed by one number.
using lru_budget = basic_lru_budget<std::int64_t>;

}  // namespace graphstep::schedule::detail
