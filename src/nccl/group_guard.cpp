#include <nccl.h>

#include <cstdio>
#include <graphstep/error.hpp>
#include <graphstep/nccl/group_guard.hpp>

namespace graphstep::nccl {

group_guard::group_guard() {
  GRAPHSTEP_NCCL_TRY(ncclGroupStart());
}

group_guard::~group_guard() {
  if (!open_) return;
  if (ncclResult_t const status = ncclGroupEnd(); status != ncclSuccess) {
    static_cast<void>(
        std::fprintf(stderr, "graphstep: ncclGroupEnd failed: %s\n", ncclGetErrorString(status)));
  }
}

void group_guard::end() {
  GRAPHSTEP_EXPECTS(open_, "group_guard::end was called twice");
  open_ = false;
  GRAPHSTEP_NCCL_TRY(ncclGroupEnd());
}

}  // namespace graphstep::nccl
