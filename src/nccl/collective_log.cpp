// graphstep_core: plain C++, includes no CUDA header.
#include "nccl/detail/collective_log.hpp"

#include <algorithm>
#include <cstdint>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/nccl/collective_log.hpp>
#include <optional>
#include <string>
#include <vector>

namespace graphstep::nccl {

namespace {
constexpr int invalid_usage = 5;  // ncclInvalidUsage
// Stands for "this rank captured no collective at this index" in the prefix exchange.
constexpr std::uint64_t no_collective = 0xFFFFFFFFFFFFFFFFULL;

void mix(std::uint64_t& hash, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    hash ^= (value >> (8 * i)) & 0xFF;
    hash *= 1099511628211ULL;
  }
}

char const* kind_name(collective_kind kind) {
  switch (kind) {
    case collective_kind::all_reduce: return "all_reduce";
    case collective_kind::reduce_scatter: return "reduce_scatter";
    case collective_kind::all_gather: return "all_gather";
    case collective_kind::broadcast: return "broadcast";
  }
  return "collective";
}

char const* op_name(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return "sum";
    case reduce_op::avg: return "avg";
    case reduce_op::max: return "max";
    case reduce_op::min: return "min";
  }
  return "op";
}
}  // namespace

void collective_log::record(collective_record const& r) {
  records_.push_back(r);
  mix(hash_, static_cast<std::uint64_t>(r.kind));
  mix(hash_, static_cast<std::uint64_t>(r.element_type));
  mix(hash_, r.count);
  mix(hash_, static_cast<std::uint64_t>(r.op));
  mix(hash_, static_cast<std::uint64_t>(static_cast<std::int64_t>(r.root)));
  mix(hash_, static_cast<std::uint64_t>(static_cast<std::int64_t>(r.slot)));
  prefixes_.push_back(hash_);
}

void collective_log::clear() noexcept {
  records_.clear();
  prefixes_.clear();
  hash_ = 14695981039346656037ULL;
}

std::string describe(collective_record const& r) {
  std::string const type = r.element_type >= 0 && r.element_type <= 2
                               ? name(static_cast<dtype>(r.element_type))
                               : "type " + std::to_string(r.element_type);
  std::string text = std::string{kind_name(r.kind)} + "(" + type + " x " + std::to_string(r.count);
  if (r.kind == collective_kind::all_reduce || r.kind == collective_kind::reduce_scatter) {
    text += std::string{", "} + op_name(r.op);
  }
  if (r.root >= 0) text += ", root " + std::to_string(r.root);
  return text + ", slot " + std::to_string(r.slot) + ")";
}

namespace detail {

std::vector<int> differing_ranks(std::vector<sequence_summary> const& by_rank) {
  std::vector<int> ranks;
  for (std::size_t r = 1; r < by_rank.size(); ++r) {
    if (by_rank[r].hash != by_rank[0].hash || by_rank[r].count != by_rank[0].count) {
      ranks.push_back(static_cast<int>(r));
    }
  }
  return ranks;
}

std::size_t prefixes_to_compare(std::vector<sequence_summary> const& by_rank, std::size_t limit) {
  std::uint64_t longest = 0;
  for (auto const& s : by_rank) longest = std::max(longest, s.count);
  return static_cast<std::size_t>(std::min<std::uint64_t>(longest, limit));
}

std::vector<std::uint64_t> padded_prefixes(collective_log const& log, std::size_t length) {
  std::vector<std::uint64_t> out(length, no_collective);
  auto const& mine = log.prefix_hashes();
  std::copy_n(mine.begin(), std::min(length, mine.size()), out.begin());
  return out;
}

std::optional<std::size_t> first_difference(std::vector<std::uint64_t> const& prefixes_by_rank,
                                            std::size_t ranks, std::size_t length) {
  GRAPHSTEP_EXPECTS(prefixes_by_rank.size() == ranks * length,
                    "first_difference: expected " + std::to_string(ranks) + " x " +
                        std::to_string(length) + " prefix hashes, got " +
                        std::to_string(prefixes_by_rank.size()));
  for (std::size_t i = 0; i < length; ++i) {
    for (std::size_t r = 1; r < ranks; ++r) {
      if (prefixes_by_rank[r * length + i] != prefixes_by_rank[i]) return i;
    }
  }
  return std::nullopt;
}

void expect_same_sequence(std::vector<sequence_summary> const& by_rank, int this_rank,
                          collective_log const& this_log, std::optional<std::size_t> first) {
  std::vector<int> const differing = differing_ranks(by_rank);
  if (differing.empty()) return;
  std::string ranks;
  std::string counts = "rank 0: " + std::to_string(by_rank[0].count);
  for (int r : differing) {
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    counts += ", rank " + std::to_string(r) + ": " +
              std::to_string(by_rank[static_cast<std::size_t>(r)].count);
  }
  std::string where = "; where they first differ is unknown (beyond the compared prefix)";
  if (first) {
    auto const& mine = this_log.records();
    where = "; they first differ at collective #" + std::to_string(*first) +
            " (counting from 0), where this rank (" + std::to_string(this_rank) + ") captured " +
            (*first < mine.size() ? describe(mine[*first]) : std::string{"nothing"});
  }
  throw nccl_error{invalid_usage,
                   "the captured collective sequences differ between ranks: rank(s) " + ranks +
                       " captured another sequence than rank 0 (collectives captured: " + counts +
                       ")" + where +
                       ". Replaying would hang; capture the same collectives, in the same "
                       "order, with the same sizes, on every rank"};
}

}  // namespace detail
}  // namespace graphstep::nccl
