#pragma once

/// @file nccl/collective_log.hpp
/// @brief The sequence of collectives a rank captured, reduced to a hash that all ranks compare.
///
/// A graph launch that contains collectives is itself collective: every rank must have
/// captured the same collectives in the same order, or replays hang. Each rank logs what it
/// captures; after capture the hashes are exchanged once and a mismatch becomes an error that
/// names the ranks, instead of a hang. Plain C++.

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
  reduce_op op;      ///< sum for collectives that do not reduce
  int root;          ///< -1 for collectives without a root
};

/// @brief Records collectives in order and hashes them (FNV-1a, 64 bits).
class collective_log {
 public:
  void record(collective_record const& record);
  void clear() noexcept;
  [[nodiscard]] std::uint64_t hash() const noexcept { return hash_; }
  [[nodiscard]] std::vector<collective_record> const& records() const noexcept { return records_; }

 private:
  std::vector<collective_record> records_;
  std::uint64_t hash_{14695981039346656037ULL};
};

/// @brief "all_reduce(bfloat16 x 1048576, sum)".
[[nodiscard]] std::string describe(collective_record const& record);

/// @brief Checks the hashes of every rank (index = rank) against rank 0's.
/// @throws nccl_error naming the ranks whose captured sequence differs from rank 0's, and the
/// number of collectives this rank captured
void expect_same_sequence(std::vector<std::uint64_t> const& hashes_by_rank, int this_rank,
                          std::size_t this_rank_count);

}  // namespace graphstep::nccl
