#pragma once

/// @file nccl/detail/collective_log.hpp
/// @brief The steps of `verify_captured_sequence`: what each rank contributes to the two rounds
/// of the exchange, and the check that names the ranks whose captured sequence differs.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/nccl/collective_log.hpp>
#include <optional>
#include <vector>

namespace graphstep::nccl::detail {

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

}  // namespace graphstep::nccl::detail
