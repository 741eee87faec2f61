#include "graphs/detail/legacy_stream_guard.hpp"

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device.hpp>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace graphstep::graphs::detail {
namespace {

struct spare_guards {
  std::mutex mutex;
  std::map<int, std::vector<std::pair<cudaStream_t, cudaEvent_t>>> by_device;
};

// Never destroyed: streams and events outlive static destruction, when CUDA may be gone.
spare_guards& spares() {
  static auto* const instance = new spare_guards;  // NOLINT(cppcoreguidelines-owning-memory)
  return *instance;
}

}  // namespace

legacy_stream_guard::legacy_stream_guard(int device) : device_{device} {
  {
    spare_guards& s = spares();
    std::lock_guard const lock{s.mutex};
    auto& spare = s.by_device[device];
    if (!spare.empty()) {
      std::tie(stream_, event_) = spare.back();
      spare.pop_back();
      return;
    }
  }
  cuda::device_guard const on_device{device};
  // Blocking on purpose: only a blocking stream makes the legacy stream unusable.
  GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault));
  cudaError_t const made = cudaEventCreateWithFlags(&event_, cudaEventDisableTiming);
  if (made != cudaSuccess) {
    static_cast<void>(cudaStreamDestroy(stream_));
    GRAPHSTEP_CUDA_TRY(made);
  }
}

legacy_stream_guard::~legacy_stream_guard() {
  spare_guards& s = spares();
  std::lock_guard const lock{s.mutex};
  try {
    s.by_device[device_].emplace_back(stream_, event_);
  } catch (...) {
    // Not kept for reuse: the handles stay with CUDA until the process ends.
  }
}

void legacy_stream_guard::enter(cudaStream_t origin) {
  GRAPHSTEP_CUDA_TRY(cudaEventRecord(event_, origin));
  GRAPHSTEP_CUDA_TRY(cudaStreamWaitEvent(stream_, event_, 0));
}

void legacy_stream_guard::leave(cudaStream_t origin) noexcept {
  if (cudaEventRecord(event_, stream_) != cudaSuccess ||
      cudaStreamWaitEvent(origin, event_, 0) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
  }
}

}  // namespace graphstep::graphs::detail
