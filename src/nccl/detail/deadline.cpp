// graphstep_core: plain C++, includes no CUDA header.
#include <graphstep/error.hpp>
#include <graphstep/nccl/detail/deadline.hpp>
#include <string>
#include <utility>

namespace graphstep::nccl::detail {

deadline_tracker::deadline_tracker(step_deadline deadline, watchdog_clock now)
    : deadline_{deadline}, now_{std::move(now)} {
  deadline_.validate("watchdog");
}

void deadline_tracker::started(std::int64_t step) {
  GRAPHSTEP_EXPECTS(outstanding_.empty() || step > outstanding_.back().step,
                    "watchdog: step " + std::to_string(step) + " was launched after step " +
                        std::to_string(outstanding_.back().step) +
                        ": number steps in increasing order");
  outstanding_.push_back(pending{step, now_()});
}

void deadline_tracker::finished(std::int64_t step) {
  auto const now = now_();
  while (!outstanding_.empty() && outstanding_.front().step <= step) {
    if (measured_.size() < static_cast<std::size_t>(deadline_.measured_steps)) {
      measured_.push_back(
          std::chrono::duration_cast<std::chrono::milliseconds>(now - outstanding_.front().since));
    }
    outstanding_.pop_front();
  }
}

void deadline_tracker::finished() {
  if (!outstanding_.empty()) finished(outstanding_.back().step);
}

std::string deadline_tracker::limit_text() const {
  return "deadline " + std::to_string(timeout().count()) + " ms, " + deadline_.describe(measured_);
}

void deadline_tracker::call_in_progress(bool in_progress) {
  if (!in_progress) {
    in_progress_since_.reset();
  } else if (!in_progress_since_) {
    in_progress_since_ = now_();
  }
}

std::optional<std::string> deadline_tracker::overdue(int rank) const {
  if (in_progress_since_) {
    auto const waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(now_() - *in_progress_since_);
    if (waited >= timeout()) {
      return "rank " + std::to_string(rank) + ": an NCCL call has been in progress for " +
             std::to_string(waited.count()) + " ms (" + limit_text() +
             "): it waits for a peer that has not issued the same collective (it failed, is "
             "stuck, or issues collectives in another order)";
    }
  }
  if (outstanding_.empty()) return std::nullopt;
  auto const waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(now_() - outstanding_.front().since);
  if (waited < timeout()) return std::nullopt;
  std::size_t const behind = outstanding_.size() - 1;
  return "rank " + std::to_string(rank) + ": step " + std::to_string(outstanding_.front().step) +
         " has not finished after " + std::to_string(waited.count()) + " ms (" + limit_text() +
         (behind > 0 ? ", " + std::to_string(behind) + " later step(s) queued behind it"
                     : std::string{}) +
         "): a collective is hung, most likely because another rank failed, is stuck, or "
         "replays a different graph";
}

std::string watchdog_verdict(watchdog_observation const& seen) {
  std::string const rank = "rank " + std::to_string(seen.rank);
  if (seen.stream_error_step) {
    return rank + ", step " + std::to_string(*seen.stream_error_step) +
           ": CUDA reported an error on the watched stream: " + seen.stream_error;
  }
  std::string const outstanding =
      std::to_string(seen.outstanding) + " step(s) outstanding" +
      (seen.oldest_outstanding ? ", oldest step " + std::to_string(*seen.oldest_outstanding)
                               : std::string{});
  if (seen.async == async_state::failed) {
    return rank + ": NCCL reported " + seen.async_result + " asynchronously; " + outstanding;
  }
  if (seen.overdue) {
    return *seen.overdue + "; NCCL's asynchronous state: " +
           (seen.async == async_state::in_progress ? "ncclInProgress" : "ncclSuccess") + "; " +
           outstanding;
  }
  return {};
}

}  // namespace graphstep::nccl::detail
