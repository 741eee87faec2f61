#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/event.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/error.hpp>

namespace graphstep::cuda {

void stream_view::synchronize() const {
  GRAPHSTEP_CUDA_TRY(cudaStreamSynchronize(stream_));
}

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

}  // namespace graphstep::cuda
