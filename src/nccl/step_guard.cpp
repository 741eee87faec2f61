#include <graphstep/error.hpp>
#include <graphstep/nccl/step_guard.hpp>
#include <utility>

namespace graphstep::nccl {
namespace {

watchdog_options background(step_guard_options const& options) {
  options.step_timeout.validate("step_guard");
  GRAPHSTEP_EXPECTS(options.sequence_timeout.count() > 0,
                    "step_guard: the sequence check's timeout must be positive");
  watchdog_options watch;
  watch.timeout = options.step_timeout;
  watch.background = true;
  return watch;
}

}  // namespace

step_guard::step_guard(nccl_comm_view comm, step_guard_options const& options)
    : comm_{std::move(comm)},
      sequence_timeout_{options.sequence_timeout},
      watchdog_{comm_, background(options)} {}

void step_guard::replay(graphs::graph_exec& graph, cuda::stream_view stream) {
  step(stream, [&] { graph.replay(stream); });
}

void step_guard::end_failed_step(cuda::stream_view stream) noexcept {
  try {
    watchdog_.launched(stream, steps_);
  } catch (...) {  // NOLINT(bugprone-empty-catch): the step's own exception is the one to report
  }
}

void step_guard::captured(cuda::stream_view stream) {
  watchdog_.check();
  verify_captured_sequence(comm_, stream, sequence_timeout_);
}

void step_guard::wait() {
  watchdog_.wait();
}

}  // namespace graphstep::nccl
