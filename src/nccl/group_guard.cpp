#include <nccl.h>

#include <exception>
#include <graphstep/error.hpp>
#include <graphstep/log.hpp>
#include <graphstep/nccl/collectives.hpp>
#include <string>

#include "detail/comm_state.hpp"
#include "detail/logger.hpp"

namespace graphstep::nccl {

namespace {

// ncclGroupEnd, and the wait for every member when a non-blocking group answers ncclInProgress
// (NCCL then launches on a thread of its own: src/group.cc, groupLaunchNonBlocking).
void end_group(char const* what) {
  ncclResult_t const status = ncclGroupEnd();
  auto const members = detail::group_members::close();
  if (status == ncclInProgress) {
    for (auto const& member : members) member->wait_until_ready(what, "ncclGroupEnd");
    return;
  }
  GRAPHSTEP_NCCL_TRY(status);
}

}  // namespace

group_guard::group_guard() : exceptions_at_start_{std::uncaught_exceptions()} {
  GRAPHSTEP_NCCL_TRY(ncclGroupStart());
  detail::group_members::open();
}

group_guard::~group_guard() {
  if (!open_) return;
  if (std::uncaught_exceptions() > exceptions_at_start_) {
    // An exception leaves the group half issued. Launching that half would pair this rank's
    // collectives with the peers' in another order; a call that fails inside a group makes
    // ncclGroupEnd drop the whole group instead (NCCL's ncclGroupErrCheck, src/include/group.h,
    // and ncclGroupEndInternal, src/group.cc), and a collective on no communicator fails at once
    // (CommCheck in ncclEnqueueCheck). Its ncclInvalidArgument is the expected answer.
    static_cast<void>(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, nullptr, nullptr));
    static_cast<void>(ncclGroupEnd());
    static_cast<void>(detail::group_members::close());
    graphstep::log(log_level::warning,
        "an exception left a group_guard's scope: the group's collectives were dropped, not "
        "launched");
    return;
  }
  try {
    end_group("~group_guard");
  } catch (std::exception const& e) {
    graphstep::detail::log_lazily(log_level::error, [&] {
      return std::string{"ending a group failed: "} + e.what();
    });
  }
}

void group_guard::end() {
  GRAPHSTEP_EXPECTS(open_, "group_guard::end was called twice");
  open_ = false;
  end_group("group_guard::end");
}

}  // namespace graphstep::nccl
