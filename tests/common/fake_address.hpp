#pragma once

// Device addresses for tests whose calls are checked and refused before any CUDA call (the ops'
// shell tests'), so never touched.

#include <cstdint>

namespace graphstep::testing {

/// A fake device address for operand `slot`: never null, aligned for every element type, and
/// 1 GiB from the next slot's, so that operands of up to 1 GiB never overlap.
inline void* fake_address(std::uintptr_t slot) {
  return reinterpret_cast<void*>((slot + 1) << 30);  // NOLINT(performance-no-int-to-ptr)
}

}  // namespace graphstep::testing
