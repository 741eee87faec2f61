#pragma once

/// @file schedule/capture_sizes.hpp
/// @brief The sizes a graph cache captures (capture sizes: batch sizes, token counts), how a
/// request's actual size finds the one that serves it, and the cache's statistics. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/schedule/detail/lru_budget.hpp>
#include <vector>

namespace graphstep::schedule {

/// @brief How a request's size finds its capture size.
enum class size_match {
  pad_up,  ///< the smallest capture size ≥ the request's; the difference is padding
  exact,   ///< only a capture size equal to the request's
};

/// @brief The capture size chosen for a request's size, and the padding it implies.
struct size_choice {
  std::int64_t captured{};
  std::int64_t padding{};  ///< captured - requested
  /// The capture size's position in `sizes()`: a graph cache keeps its graphs by it.
  std::size_t slot{};
};

/// @brief The elements a size of one number processes: the number itself.
[[nodiscard]] constexpr std::int64_t elements_of(std::int64_t size) noexcept {
  return size;
}

/// @brief The capture sizes of one number (a batch size, a token count), ascending, and how a
/// request's size finds its own.
class capture_sizes {
 public:
  using key_type = std::int64_t;
  using choice_type = size_choice;

  /// @throws usage_error (no capture size, a non-positive capture size)
  explicit capture_sizes(std::vector<std::int64_t> sizes, size_match match = size_match::pad_up);

  /// @brief Inference runners' choice: 1, 2, 4, then every multiple of `step` up to `largest`
  /// (and `largest` itself).
  /// @throws usage_error (largest or step not positive)
  [[nodiscard]] static capture_sizes powers_then_steps(std::int64_t largest, std::int64_t step = 8);

  /// @throws usage_error: a size ≤ 0, larger than the largest capture size (naming it and what to
  /// do), or without an exact capture size in exact mode
  [[nodiscard]] size_choice choose(std::int64_t size) const;

  /// @brief Ascending.
  [[nodiscard]] std::vector<std::int64_t> const& sizes() const noexcept { return sizes_; }
  /// @brief Largest first: captures in this order let every smaller size reuse the memory the
  /// larger ones freed.
  [[nodiscard]] std::vector<std::int64_t> capture_order() const;
  [[nodiscard]] size_match match() const noexcept { return match_; }

 private:
  std::vector<std::int64_t> sizes_;
  size_match match_;
};

/// @brief Counters of a graph cache.
struct cache_statistics {
  std::uint64_t hits{};    ///< requests served by a replay
  std::uint64_t misses{};  ///< requests that ran eagerly (warm-up) or captured
  std::uint64_t captures{};
  std::uint64_t evictions{};
  std::uint64_t updates{};          ///< executables derived by update instead of instantiation
  std::uint64_t update_refusals{};  ///< updates CUDA refused; those capture sizes were instantiated
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
