#pragma once

/// @file nccl/collective_log.hpp
/// @brief The sequence of collectives a rank captured, reduced to a hash that all ranks compare.
///
/// A graph launch that contains collectives is itself collective: every rank must have
/// captured the same collectives in the same order, or replays hang. Each rank logs what it
/// captures; after capture the hashes are exchanged once and a mismatch becomes an error that
/// names the ranks and the first collective where they part, instead of a hang. Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <optional>
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

/// @brief What each rank contributes to the first round of the exchange.
struct sequence_summary {
  std::uint64_t hash;
  std::uint64_t count;
};

/// @brief The ranks whose summary differs from rank 0's (empty when all agree).
[[nodiscard]] std::vector<int> differing_ranks(std::vector<sequence_summary> const& by_rank);

/// @brief How many prefix hashes the second round exchanges: the longest sequence, capped at
/// `limit` (beyond it the first difference is reported as unknown).
[[nodiscard]] std::size_t prefixes_to_compare(std::vector<sequence_summary> const& by_rank,
                                              std::size_t limit = 4096);

/// @brief This rank's contribution to the second round: its first `length` prefix hashes,
/// padded with a marker that stands for "no collective here".
[[nodiscard]] std::vector<std::uint64_t> padded_prefixes(collective_log const& log,
                                                         std::size_t length);

/// @brief The first index at which some rank's prefix hash differs from rank 0's, given each
/// rank's `padded_prefixes` back to back (`length` each); none when they agree throughout.
[[nodiscard]] std::optional<std::size_t> first_difference(
    std::vector<std::uint64_t> const& prefixes_by_rank, std::size_t ranks, std::size_t length);

/// @brief Checks every rank's summary (index = rank) against rank 0's.
/// @param first where the sequences part, when the second round found it
/// @throws nccl_error (ncclInvalidUsage) naming the ranks whose captured sequence differs from
/// rank 0's, each rank's count, and the first differing collective with what this rank
/// captured there
void expect_same_sequence(std::vector<sequence_summary> const& by_rank, int this_rank,
                          collective_log const& this_log, std::optional<std::size_t> first);

}  // namespace graphstep::nccl
