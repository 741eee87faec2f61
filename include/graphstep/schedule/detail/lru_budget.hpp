#pragma once

/// @file schedule/detail/lru_budget.hpp
/// @brief Least-recently-used order of cached graphs and their memory, under a budget. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/error.hpp>
#include <iterator>
#include <list>
#include <map>
#include <string>
#include <vector>

namespace graphstep::schedule::detail {

/// @brief How a bucket of one number is named in messages.
[[nodiscard]] inline std::string key_name(std::int64_t bucket) {
  return std::to_string(bucket);
}

/// @brief Least-recently-used order of cached buckets and the memory each holds, under a
/// budget. `Key` needs `operator<` and a `key_name(Key)` found by lookup.
template <typename Key>
class basic_lru_budget {
 public:
  /// @param budget_bytes 0 means no budget
  explicit basic_lru_budget(std::size_t budget_bytes = 0) : budget_{budget_bytes} {}

  /// @brief Marks `bucket` as just used. Unknown buckets are ignored.
  void touch(Key const& bucket) {
    auto found = entries_.find(bucket);
    if (found == entries_.end()) return;
    recency_.splice(recency_.end(), recency_, found->second.position);
  }

  /// @brief Adds `bucket` holding `bytes`, as the most recent, and returns the buckets to evict
  /// (least recent first) so that the total fits the budget; never the new one.
  /// @throws usage_error (bucket already present; a single bucket larger than the budget)
  [[nodiscard]] std::vector<Key> insert(Key const& bucket, std::size_t bytes) {
    GRAPHSTEP_EXPECTS(entries_.count(bucket) == 0,
                      "graph cache: bucket " + key_name(bucket) + " is already cached");
    GRAPHSTEP_EXPECTS(budget_ == 0 || bytes <= budget_,
                      "graph cache: the graph of bucket " + key_name(bucket) + " needs " +
                          std::to_string(bytes) + " bytes, more than the whole budget of " +
                          std::to_string(budget_) + ": raise the budget or drop that bucket");
    std::vector<Key> evicted;
    while (budget_ != 0 && total_ + bytes > budget_ && !recency_.empty()) {
      Key const victim = recency_.front();
      evicted.push_back(victim);
      erase(victim);
    }
    recency_.push_back(bucket);
    entries_.emplace(bucket, entry{bytes, std::prev(recency_.end())});
    total_ += bytes;
    return evicted;
  }

  /// @brief Forgets `bucket`. Unknown buckets are ignored.
  void erase(Key const& bucket) {
    auto found = entries_.find(bucket);
    if (found == entries_.end()) return;
    total_ -= found->second.bytes;
    recency_.erase(found->second.position);
    entries_.erase(found);
  }

  [[nodiscard]] bool contains(Key const& bucket) const { return entries_.count(bucket) != 0; }
  [[nodiscard]] std::size_t total_bytes() const noexcept { return total_; }
  [[nodiscard]] std::size_t budget() const noexcept { return budget_; }
  /// @brief Least recent first.
  [[nodiscard]] std::vector<Key> order() const { return {recency_.begin(), recency_.end()}; }

 private:
  struct entry {
    std::size_t bytes;
    typename std::list<Key>::iterator position;
  };
  std::size_t budget_;
  std::size_t total_{};
  std::list<Key> recency_;  // front = least recent
  std::map<Key, entry> entries_;
};

/// @brief The budget of a cache keyed by one number.
using lru_budget = basic_lru_budget<std::int64_t>;

}  // namespace graphstep::schedule::detail
