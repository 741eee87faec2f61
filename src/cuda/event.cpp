#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/error.hpp>

namespace graphstep::cuda {

void detail::event_deleter::operator()(pointer handle) const noexcept {
  GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaEventDestroy(handle));
}

event::event() : event{static_cast<unsigned int>(cudaEventDisableTiming)} {}

event::event(unsigned int flags) {
  cudaEvent_t handle = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaEventCreateWithFlags(&handle, flags));
  handle_.reset(handle);
}

cudaEvent_t event::checked() const {
  GRAPHSTEP_EXPECTS(handle_ != nullptr, "this event was moved from: use the event it moved to");
  return handle_.get();
}

void event::record(stream_view stream) const {
  GRAPHSTEP_CUDA_TRY(cudaEventRecord(checked(), stream.get()));
}

void event::synchronize() const {
  GRAPHSTEP_CUDA_TRY(cudaEventSynchronize(checked()));
}

bool event::query() const {
  cudaError_t const status = cudaEventQuery(checked());
  if (status == cudaErrorNotReady) {
    static_cast<void>(cudaGetLastError());
    return false;
  }
  GRAPHSTEP_CUDA_TRY(status);
  return true;
}

timed_event::timed_event() : event{static_cast<unsigned int>(cudaEventDefault)} {}

float timed_event::elapsed_ms(timed_event const& start, timed_event const& end) {
  float ms = 0.0F;
  GRAPHSTEP_CUDA_TRY(cudaEventElapsedTime(&ms, start.checked(), end.checked()));
  return ms;
}

}  // namespace graphstep::cuda
