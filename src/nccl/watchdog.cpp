#include <graphstep/error.hpp>
#include <graphstep/nccl/watchdog.hpp>

#include <thread>

namespace graphstep::nccl {

watchdog::watchdog(nccl_comm& comm, std::chrono::milliseconds timeout, watchdog_clock now)
    : comm_{comm}, deadline_{timeout, std::move(now)} {}

void watchdog::launched(stream_view stream, std::int64_t step) {
  finished_.record(stream);
  deadline_.started(step);
}

bool watchdog::poll() {
  nccl_comm_view const view = comm_.view();
  std::string const step =
      deadline_.outstanding_step() ? std::to_string(*deadline_.outstanding_step()) : "none";
  ncclResult_t async_error = ncclSuccess;
  GRAPHSTEP_NCCL_TRY(ncclCommGetAsyncError(view.get(), &async_error));
  if (async_error != ncclSuccess && async_error != ncclInProgress) {
    comm_.abort();
    throw nccl_error{static_cast<int>(async_error),
                     "watchdog: rank " + std::to_string(view.rank()) + ", step " + step +
                         ": NCCL reported " + ncclGetErrorString(async_error) +
                         "; the communicator was aborted"};
  }
  if (!deadline_.outstanding_step()) return true;
  if (finished_.query()) {
    deadline_.finished();
    return true;
  }
  if (auto const late = deadline_.overdue(view.rank())) {
    comm_.abort();
    throw nccl_error{static_cast<int>(ncclSystemError),
                     "watchdog: " + *late + "; the communicator was aborted"};
  }
  return false;
}

void watchdog::wait() {
  while (!poll()) std::this_thread::sleep_for(std::chrono::microseconds{200});
}

}  // namespace graphstep::nccl
