#include <graphstep/error.hpp>
#include <graphstep/event.hpp>
#include <graphstep/stream_view.hpp>

namespace graphstep {

void stream_view::synchronize() const { GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(stream_)); }

void stream_view::wait(event const& e) const {
  GRAPHSTEP_EXPECTS(e.get() != nullptr,
                    "stream_view::wait was given a moved-from event: wait on a live event");
  GRAPHSTEP_CUDA_TRY(cudaStreamWaitEvent(stream_, e.get(), cudaEventWaitDefault));
}

bool stream_view::is_capturing() const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  GRAPHSTEP_CUDA_TRY(cudaStreamIsCapturing(stream_, &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace graphstep
