// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <graphstep/error.hpp>
#include <graphstep/schedule/capture_sizes.hpp>
#include <string>

namespace graphstep::schedule {

capture_sizes::capture_sizes(std::vector<std::int64_t> sizes, size_match match)
    : sizes_{std::move(sizes)}, match_{match} {
  GRAPHSTEP_EXPECTS(!sizes_.empty(), "capture_sizes: no capture size was given");
  std::sort(sizes_.begin(), sizes_.end());
  sizes_.erase(std::unique(sizes_.begin(), sizes_.end()), sizes_.end());
  GRAPHSTEP_EXPECTS(sizes_.front() > 0, "capture_sizes: capture sizes must be positive, not " +
                                            std::to_string(sizes_.front()));
}

capture_sizes capture_sizes::powers_then_steps(std::int64_t largest, std::int64_t step) {
  GRAPHSTEP_EXPECTS(largest > 0 && step > 0,
                    "capture_sizes::powers_then_steps: largest and step must be positive");
  std::vector<std::int64_t> sizes;
  for (std::int64_t b : {1, 2, 4}) {
    if (b <= largest) sizes.push_back(b);
  }
  for (std::int64_t b = step; b <= largest; b += step) sizes.push_back(b);
  sizes.push_back(largest);
  return capture_sizes{std::move(sizes), size_match::pad_up};
}

size_choice capture_sizes::choose(std::int64_t size) const {
  GRAPHSTEP_EXPECTS(size > 0, "capture_sizes: size " + std::to_string(size) + " must be positive");
  GRAPHSTEP_EXPECTS(size <= sizes_.back(),
                    "capture_sizes: size " + std::to_string(size) +
                        " is larger than the largest capture size (" +
                        std::to_string(sizes_.back()) +
                        "): split the batch, or add a capture size of at least that size");
  auto const found = std::lower_bound(sizes_.begin(), sizes_.end(), size);
  if (match_ == size_match::exact) {
    GRAPHSTEP_EXPECTS(*found == size, "capture_sizes: no capture size of exactly " +
                                          std::to_string(size) +
                                          " (exact matching): add it, or use pad_up");
  }
  return {*found, *found - size, static_cast<std::size_t>(found - sizes_.begin())};
}

std::vector<std::int64_t> capture_sizes::capture_order() const {
  return {sizes_.rbegin(), sizes_.rend()};
}

}  // namespace graphstep::schedule
