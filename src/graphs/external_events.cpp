#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/external_events.hpp>

namespace graphstep::graphs {

namespace {
cudaEvent_t checked(cuda::event const& e) {
  GRAPHSTEP_EXPECTS(e.get() != nullptr, "this event was moved from: use the event it moved to");
  return e.get();
}
}  // namespace

// The external flags are "invalid when used outside of capture" (CU_EVENT_RECORD_EXTERNAL,
// CU_EVENT_WAIT_EXTERNAL in cuda.h): outside a capture the plain calls do the same thing.
void record_external(cuda::event const& e, cuda::stream_view stream) {
  cudaEvent_t handle = checked(e);
  unsigned const flags = stream.is_capturing() ? cudaEventRecordExternal : cudaEventRecordDefault;
  GRAPHSTEP_CUDA_TRY(cudaEventRecordWithFlags(handle, stream.get(), flags));
}

void wait_external(cuda::stream_view stream, cuda::event const& e) {
  cudaEvent_t handle = checked(e);
  unsigned const flags = stream.is_capturing() ? cudaEventWaitExternal : cudaEventWaitDefault;
  GRAPHSTEP_CUDA_TRY(cudaStreamWaitEvent(stream.get(), handle, flags));
}

}  // namespace graphstep::graphs
