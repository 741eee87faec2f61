// The plain C++ parts of the NCCL support: the collective log, bucket planning, deadlines.

#include <graphstep/error.hpp>
#include <graphstep/nccl/bucket_plan.hpp>
#include <graphstep/nccl/collective_log.hpp>
#include <graphstep/nccl/deadline.hpp>

#include <algorithm>

namespace graphstep::nccl {

namespace {
constexpr int invalid_usage = 5;   // ncclInvalidUsage

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
}

void collective_log::clear() noexcept {
  records_.clear();
  hash_ = 14695981039346656037ULL;
}

std::string describe(collective_record const& r) {
  std::string text = std::string{kind_name(r.kind)} + "(type " + std::to_string(r.element_type) +
                     " x " + std::to_string(r.count);
  if (r.kind == collective_kind::all_reduce || r.kind == collective_kind::reduce_scatter) {
    text += std::string{", "} + op_name(r.op);
  }
  if (r.root >= 0) text += ", root " + std::to_string(r.root);
  return text + ")";
}

void expect_same_sequence(std::vector<std::uint64_t> const& hashes_by_rank, int this_rank,
                          std::size_t this_rank_count) {
  if (hashes_by_rank.empty()) return;
  std::string differing;
  for (std::size_t r = 1; r < hashes_by_rank.size(); ++r) {
    if (hashes_by_rank[r] != hashes_by_rank[0]) {
      differing += (differing.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  if (differing.empty()) return;
  throw nccl_error{invalid_usage,
                   "the captured collective sequences differ between ranks: rank(s) " +
                       differing + " captured another sequence than rank 0 (this is rank " +
                       std::to_string(this_rank) + ", which captured " +
                       std::to_string(this_rank_count) +
                       " collectives). Replaying would hang; capture the same collectives, in "
                       "the same order, with the same sizes, on every rank"};
}

bucket_plan plan_buckets(std::vector<std::size_t> const& gradient_bytes, std::size_t bucket_bytes,
                         std::size_t first_bucket_bytes, std::size_t alignment) {
  GRAPHSTEP_EXPECTS(!gradient_bytes.empty(), "plan_buckets: no gradient was given");
  GRAPHSTEP_EXPECTS(bucket_bytes > 0 && first_bucket_bytes > 0,
                    "plan_buckets: bucket sizes must be positive");
  GRAPHSTEP_EXPECTS(alignment > 0 && (alignment & (alignment - 1)) == 0,
                    "plan_buckets: the alignment must be a power of two");
  bucket_plan plan;
  plan.offsets.resize(gradient_bytes.size());
  std::size_t cursor = 0;
  bucket current{0, 0, 0, 0};
  auto limit = [&] { return plan.buckets.empty() ? first_bucket_bytes : bucket_bytes; };
  for (std::size_t i = 0; i < gradient_bytes.size(); ++i) {
    std::size_t const bytes = gradient_bytes[i];
    GRAPHSTEP_EXPECTS(bytes > 0, "plan_buckets: gradient " + std::to_string(i) + " is empty");
    std::size_t const aligned = (bytes + alignment - 1) / alignment * alignment;
    if (current.last > current.first && current.bytes + aligned > limit()) {
      plan.buckets.push_back(current);
      current = {i, i, cursor, 0};
    }
    plan.offsets[i] = cursor;
    cursor += aligned;
    current.last = i + 1;
    current.bytes += aligned;
  }
  plan.buckets.push_back(current);
  plan.buffer_bytes = cursor;
  return plan;
}

deadline_tracker::deadline_tracker(std::chrono::milliseconds timeout, watchdog_clock now)
    : timeout_{timeout}, now_{std::move(now)} {
  GRAPHSTEP_EXPECTS(timeout.count() > 0, "watchdog: the timeout must be positive");
}

void deadline_tracker::started(std::int64_t step) { outstanding_ = pending{step, now_()}; }

std::optional<std::string> deadline_tracker::overdue(int rank) const {
  if (!outstanding_) return std::nullopt;
  auto const waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(now_() - outstanding_->since);
  if (waited < timeout_) return std::nullopt;
  return "rank " + std::to_string(rank) + ": step " + std::to_string(outstanding_->step) +
         " has not finished after " + std::to_string(waited.count()) + " ms (deadline " +
         std::to_string(timeout_.count()) +
         " ms): a collective is hung, most likely because another rank failed, is stuck, or "
         "replays a different graph";
}

}  // namespace graphstep::nccl
