#include "detail/refusal.hpp"

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "detail/runtime_state.hpp"

namespace graphstep::sim::detail {

cudaError_t refuse(char const* function, char const* reason) noexcept {
  static std::mutex mutex;
  static std::set<std::string> said;
  try {
    std::lock_guard<std::mutex> const lock{mutex};
    if (said.insert(function).second) {
      static_cast<void>(
          std::fprintf(stderr,
                       "graphstep simulated device: %s is %s: it returns cudaErrorNotSupported "
                       "(sim/docs/runtime_coverage.md lists what the simulator implements)\n",
                       function, reason));
    }
  } catch (...) {  // the message is a courtesy; the error code is the answer
  }
  return fail(cudaErrorNotSupported);
}

}  // namespace graphstep::sim::detail
