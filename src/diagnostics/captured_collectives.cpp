#include "diagnostics/detail/captured_collectives.hpp"

#include <mutex>
#include <unordered_set>

namespace graphstep::diagnostics::detail {
namespace {

struct registry {
  std::mutex mutex;
  std::unordered_set<std::uint64_t> captures;
};

registry& captures_with_collectives() {
  static auto* const instance = new registry;  // NOLINT(cppcoreguidelines-owning-memory)
  return *instance;
}

}  // namespace

void note_captured_collective(std::uint64_t capture_sequence) {
  if (capture_sequence == 0) return;
  auto& noted = captures_with_collectives();
  std::lock_guard const lock{noted.mutex};
  noted.captures.insert(capture_sequence);
}

bool captured_a_collective(std::uint64_t capture_sequence) {
  if (capture_sequence == 0) return false;
  auto& noted = captures_with_collectives();
  std::lock_guard const lock{noted.mutex};
  return noted.captures.count(capture_sequence) != 0;
}

}  // namespace graphstep::diagnostics::detail
