#pragma once

/// @file schedule/bucket_policy.hpp
/// @brief Maps an actual size (batch, tokens, packed sequences) to the captured bucket that
/// serves it, and keeps the cache's accounting: least-recently-used order under a memory
/// budget, and statistics. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/schedule/detail/lru_budget.hpp>
#include <vector>

namespace graphstep::schedule {

/// @brief How a size finds its bucket.
enum class bucket_match {
  pad_up,  ///< the smallest bucket ≥ the size; the difference is padding
  exact,   ///< only a bucket equal to the size
};

/// @brief The bucket chosen for a size, and the padding it implies.
struct bucket_choice {
  std::int64_t bucket{};
  std::int64_t padding{};  ///< bucket - size
  /// The bucket's position in `buckets()`: a graph cache keeps its graphs by it.
  std::size_t slot{};
};

/// @brief The elements a bucket of one number processes: the number itself.
[[nodiscard]] constexpr std::int64_t bucket_elements(std::int64_t bucket) noexcept {
  return bucket;
}

/// @brief Buckets of one number (a batch size, a token count), and how a size finds its own.
class bucket_policy {
 public:
  using key_type = std::int64_t;
  using choice_type = bucket_choice;

  /// @throws usage_error (no bucket, a non-positive bucket)
  explicit bucket_policy(std::vector<std::int64_t> buckets,
                         bucket_match match = bucket_match::pad_up);

  /// @brief Inference runners' choice: 1, 2, 4, then every multiple of `step` up to `largest`
  /// (and `largest` itself).
  /// @throws usage_error (largest or step not positive)
  [[nodiscard]] static bucket_policy powers_then_steps(std::int64_t largest, std::int64_t step = 8);

  /// @throws usage_error: a size ≤ 0, larger than the largest bucket (naming it and what to
  /// do), or without an exact bucket in exact mode
  [[nodiscard]] bucket_choice choose(std::int64_t size) const;

  /// @brief Ascending.
  [[nodiscard]] std::vector<std::int64_t> const& buckets() const noexcept { return buckets_; }
  /// @brief Largest first: captures in this order let every smaller bucket reuse the memory
  /// the larger ones freed.
  [[nodiscard]] std::vector<std::int64_t> capture_order() const;
  [[nodiscard]] bucket_match match() const noexcept { return match_; }

 private:
  std::vector<std::int64_t> buckets_;
  bucket_match match_;
};

/// @brief Counters of a graph cache.
struct cache_statistics {
  std::uint64_t hits{};    ///< requests served by a replay
  std::uint64_t misses{};  ///< requests that ran eagerly (warm-up) or captured
  std::uint64_t captures{};
  std::uint64_t evictions{};
  std::uint64_t updates{};          ///< executables derived by update instead of instantiation
  std::uint64_t update_refusals{};  ///< updates CUDA refused; those buckets were instantiated
  std::uint64_t eager_runs{};       ///< warm-up runs (part of the misses)
  double capture_seconds{};         ///< in captures, each with its instantiation when it had one
  std::int64_t requested_elements{};
  std::int64_t padded_elements{};
  /// @brief Padding as a fraction of all elements processed.
  [[nodiscard]] double pad_ratio() const noexcept {
    std::int64_t const total = requested_elements + padded_elements;
    return total == 0 ? 0.0 : static_cast<double>(padded_elements) / static_cast<double>(total);
  }
};

}  // namespace graphstep::schedule
