#pragma once

/// @file nccl/step_guard.hpp
/// @brief `step_guard`: what every data-parallel training loop needs so that a rank that dies,
/// stops or issues other collectives ends the others with an error instead of a silent hang.

#include <chrono>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/nccl/collectives.hpp>
#include <graphstep/nccl/nccl_comm_view.hpp>
#include <graphstep/nccl/step_deadline.hpp>
#include <graphstep/nccl/watchdog.hpp>
#include <utility>

namespace graphstep::nccl {

/// @brief How long a guarded loop waits before it gives up on the other ranks.
struct step_guard_options {
  /// How long one step (eager or replayed, collectives included) may take: past it the
  /// communicator is aborted and the loop's next guard call throws. By default the limit adapts
  /// to the steps measured (10 minutes until one has finished, then the larger of 60 s and 20
  /// times the median step; see `step_deadline`); a duration gives a fixed limit, which must
  /// then be long enough for the slowest step, the first (NCCL connects then) included.
  step_deadline step_timeout{};
  /// How long `captured`'s check waits for the other ranks to compare their captures.
  std::chrono::milliseconds sequence_timeout{default_sequence_check_timeout};
};

/// @brief Guards a data-parallel training loop on one communicator: a background watchdog
/// over every step it runs (eager steps and replays alike), and, after each capture, the check
/// that every rank captured the same collectives. A peer whose process ends (killed, crashed)
/// is reported within a second by the communicator's peer watch (communicators from
/// `communicator_from_environment`), or when NCCL reports it; a peer that stops answering
/// (stopped, deadlocked, or issuing other collectives: another model size or bucket size) at
/// the step deadline, which adapts to the steps measured unless fixed (`step_deadline`). Either
/// way the communicator is aborted, so no kernel waits for the peer any more, and every call of
/// the guard from then on throws `nccl_error` naming the rank, the step and the cause. The
/// communicator's initialization has its own timeout (`bootstrap_options::init_timeout`).
///
/// ```cpp
/// nccl::step_guard guard{comm.view()};  // or {comm.view(), {std::chrono::minutes{2}}}: fixed
/// guard.step(stream, [&] { train_step(); });   // eager warm-up, NCCL connects
/// graphs::capture(step, stream, pool, train_step);
/// guard.captured(stream);                        // every rank captured the same collectives
/// for (...) { guard.replay(step, stream); guard.wait(); read_loss(); }
/// ```
/// Call `wait` before the host waits for the stream (a loss read back, a synchronization): a
/// host blocked in CUDA on a hung collective would only be released by the background abort,
/// and then with a CUDA error that says less. Must not outlive the communicator. Not copyable
/// or movable (its watchdog thread refers to it).
class step_guard {
 public:
  /// @throws usage_error (a non-positive timeout), cuda_error
  explicit step_guard(nccl_comm_view comm, step_guard_options const& options = {});

  /// @brief One step: throws what the watchdog found, starts the step's deadline, and calls
  /// `issue()` to enqueue the step on `stream` (eager work, a replay). A call in `issue` that
  /// blocks on a peer is released at the deadline, when the communicator is aborted.
  /// @throws nccl_error (the communicator was aborted: the message says why), usage_error
  /// (`stream` is capturing), whatever `issue` throws, cuda_error
  template <typename Issue>
  void step(cuda::stream_view stream, Issue&& issue) {
    watchdog_.starting(steps_ + 1);  // the deadline also covers a call that blocks in `issue`
    ++steps_;
    try {
      std::forward<Issue>(issue)();
    } catch (...) {
      end_failed_step(stream);
      throw;
    }
    watchdog_.launched(stream, steps_);
  }
  /// @brief `step(stream, [&] { graph.replay(stream); })`.
  void replay(graphs::graph_exec& graph, cuda::stream_view stream);
  /// @brief After a capture of collectives on this communicator: checks that every rank
  /// captured the same sequence (`verify_captured_sequence`), within `sequence_timeout`.
  /// @throws nccl_error (the sequences differ, naming the ranks and the first difference; a
  /// rank did not come), usage_error (called during a capture)
  void captured(cuda::stream_view stream);
  /// @brief Waits until every step run so far has finished, polling the deadline.
  /// @throws nccl_error (an asynchronous NCCL error, a CUDA error on the stream, a step past
  /// its deadline: the communicator is then aborted)
  void wait();
  /// @brief Steps run so far (a step refused because the communicator was aborted is not).
  [[nodiscard]] std::int64_t steps() const noexcept { return steps_; }

 private:
  // What `issue` enqueued before it threw still runs: the step is watched until it finishes.
  void end_failed_step(cuda::stream_view stream) noexcept;

  nccl_comm_view comm_;
  std::chrono::milliseconds sequence_timeout_;
  watchdog watchdog_;
  std::int64_t steps_{0};
};

}  // namespace graphstep::nccl
