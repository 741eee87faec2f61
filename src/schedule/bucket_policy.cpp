#include <graphstep/error.hpp>
#include <graphstep/schedule/bucket_policy.hpp>

#include <algorithm>
#include <string>

namespace graphstep::schedule {

bucket_policy::bucket_policy(std::vector<std::int64_t> buckets, bucket_match match)
    : buckets_{std::move(buckets)}, match_{match} {
  GRAPHSTEP_EXPECTS(!buckets_.empty(), "bucket_policy: no bucket was given");
  std::sort(buckets_.begin(), buckets_.end());
  buckets_.erase(std::unique(buckets_.begin(), buckets_.end()), buckets_.end());
  GRAPHSTEP_EXPECTS(buckets_.front() > 0, "bucket_policy: buckets must be positive, not " +
                                              std::to_string(buckets_.front()));
}

bucket_policy bucket_policy::powers_then_steps(std::int64_t largest, std::int64_t step) {
  GRAPHSTEP_EXPECTS(largest > 0 && step > 0,
                    "bucket_policy::powers_then_steps: largest and step must be positive");
  std::vector<std::int64_t> buckets;
  for (std::int64_t b : {1, 2, 4}) {
    if (b <= largest) buckets.push_back(b);
  }
  for (std::int64_t b = step; b <= largest; b += step) buckets.push_back(b);
  buckets.push_back(largest);
  return bucket_policy{std::move(buckets), bucket_match::pad_up};
}

bucket_choice bucket_policy::choose(std::int64_t size) const {
  GRAPHSTEP_EXPECTS(size > 0, "bucket_policy: size " + std::to_string(size) +
                                  " must be positive");
  GRAPHSTEP_EXPECTS(size <= buckets_.back(),
                    "bucket_policy: size " + std::to_string(size) +
                        " is larger than the largest bucket (" + std::to_string(buckets_.back()) +
                        "): split the batch, or add a bucket of at least that size");
  auto const found = std::lower_bound(buckets_.begin(), buckets_.end(), size);
  if (match_ == bucket_match::exact) {
    GRAPHSTEP_EXPECTS(*found == size, "bucket_policy: no bucket of exactly " +
                                          std::to_string(size) +
                                          " (exact matching): add it, or use pad_up");
  }
  return {*found, *found - size};
}

std::vector<std::int64_t> bucket_policy::capture_order() const {
  return {buckets_.rbegin(), buckets_.rend()};
}

void lru_budget::touch(std::int64_t bucket) {
  auto found = entries_.find(bucket);
  if (found == entries_.end()) return;
  recency_.splice(recency_.end(), recency_, found->second.position);
}

std::vector<std::int64_t> lru_budget::insert(std::int64_t bucket, std::size_t bytes) {
  GRAPHSTEP_EXPECTS(entries_.count(bucket) == 0,
                    "graph cache: bucket " + std::to_string(bucket) + " is already cached");
  GRAPHSTEP_EXPECTS(budget_ == 0 || bytes <= budget_,
                    "graph cache: the graph of bucket " + std::to_string(bucket) + " needs " +
                        std::to_string(bytes) + " bytes, more than the whole budget of " +
                        std::to_string(budget_) + ": raise the budget or drop that bucket");
  std::vector<std::int64_t> evicted;
  while (budget_ != 0 && total_ + bytes > budget_ && !recency_.empty()) {
    std::int64_t const victim = recency_.front();
    evicted.push_back(victim);
    erase(victim);
  }
  recency_.push_back(bucket);
  entries_.emplace(bucket, entry{bytes, std::prev(recency_.end())});
  total_ += bytes;
  return evicted;
}

void lru_budget::erase(std::int64_t bucket) {
  auto found = entries_.find(bucket);
  if (found == entries_.end()) return;
  total_ -= found->second.bytes;
  recency_.erase(found->second.position);
  entries_.erase(found);
}

std::vector<std::int64_t> lru_budget::order() const { return {recency_.begin(), recency_.end()}; }

}  // namespace graphstep::schedule
