#include "detail/refusal.hpp"

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "detail/runtime_state.hpp"

namespace graphstep::sim::detail {

void announce_refusal(char const* function, char const* reason, char const* answer,
                      char const* coverage_page) noexcept {
  static std::mutex mutex;
  static std::set<std::string> said;
  try {
    std::lock_guard<std::mutex> const lock{mutex};
    if (said.insert(function).second) {
      static_cast<void>(std::fprintf(stderr,
                                     "graphstep simulated device: %s is %s: it returns %s (%s "
                                     "lists what the simulator implements)\n",
                                     function, reason, answer, coverage_page));
    }
  } catch (...) {  // the message is a courtesy; the returned status is the answer
  }
}

cudaError_t refuse(char const* function, char const* reason) noexcept {
  announce_refusal(function, reason, "cudaErrorNotSupported", "sim/docs/runtime_coverage.md");
  return fail(cudaErrorNotSupported);
}

cublasStatus_t refuse_cublaslt(char const* function, char const* reason) noexcept {
  announce_refusal(function, reason, "CUBLAS_STATUS_NOT_SUPPORTED",
                   "sim/docs/cublaslt_coverage.md");
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

}  // namespace graphstep::sim::detail
