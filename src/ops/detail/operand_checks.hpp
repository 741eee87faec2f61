#pragma once

// What the ops' problem types check besides graphstep::detail::expect_operand: alignment and
// overlap of raw device addresses, which are compared, never dereferenced.
// Plain C++: the core's problem types include it.

#include <cstddef>
#include <cstdint>

#include "detail/span_checks.hpp"

namespace graphstep::ops::detail {

inline bool aligned_to(void const* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
inline bool overlap(void const* a, std::size_t a_bytes, void const* b, std::size_t b_bytes) {
  auto const x = reinterpret_cast<std::uintptr_t>(a);
  auto const y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

}  // namespace graphstep::ops::detail
