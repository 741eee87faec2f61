// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <graphstep/error.hpp>
#include <graphstep/schedule/bucket_policy.hpp>
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
  GRAPHSTEP_EXPECTS(size > 0, "bucket_policy: size " + std::to_string(size) + " must be positive");
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
  return {*found, *found - size, static_cast<std::size_t>(found - buckets_.begin())};
}

std::vector<std::int64_t> bucket_policy::capture_order() const {
  return {buckets_.rbegin(), buckets_.rend()};
}

}  // namespace graphstep::schedule
