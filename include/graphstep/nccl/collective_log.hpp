#pragma once

/// @file nccl/collective_log.hpp
/// @brief The sequence of collectives a rank captured, reduced to a hash that all ranks compare.
///
/// A graph launch that contains collectives is itself collective: every rank must have
/// captured the same collectives in the same order, or replays hang. Each rank logs what it
/// captures; after capture the hashes are exchanged once and a mismatch becomes an error that
/// names the ranks and the first collective where they part, instead of a hang (the exchange's
/// steps are internal: nccl/detail/collective_log.hpp). Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace graphstep::nccl {

enum class collective_kind : std::uint8_t { all_reduce, reduce_scatter, all_gather, broadcast };
enum class reduce_op : std::uint8_t { sum, avg, max, min };

/// @brief One collective as far as matching across ranks is concerned.
struct collective_record {
  collective_kind kind;
  int element_type;  ///< graphstep::dtype as an integer
  std::size_t count;
  reduce_op op;  ///< sum for collectives that do not reduce
  int root;      ///< -1 for collectives without a root
  int slot;      ///< which of the rank's communicators (`nccl_comm_options::slot`)
};

/// @brief Records collectives in order and hashes them (FNV-1a, 64 bits), keeping the hash
/// after each record so the first differing collective can be found.
class collective_log {
 public:
  void record(collective_record const& record);
  void clear() noexcept;
  /// @brief The hash of the whole sequence; equal logs have equal hashes.
  [[nodiscard]] std::uint64_t hash() const noexcept { return hash_; }
  /// @brief prefix_hashes()[i] is the hash of records [0, i].
  [[nodiscard]] std::vector<std::uint64_t> const& prefix_hashes() const noexcept {
    return prefixes_;
  }
  [[nodiscard]] std::vector<collective_record> const& records() const noexcept { return records_; }

 private:
  std::vector<collective_record> records_;
  std::vector<std::uint64_t> prefixes_;
  std::uint64_t hash_{14695981039346656037ULL};
};

/// @brief "all_reduce(bfloat16 x 1048576, sum, slot 0)".
[[nodiscard]] std::string describe(collective_record const& record);

}  // namespace graphstep::nccl
