#pragma once

/// @file dtype.hpp
/// @brief Element types of device buffers.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>

namespace graphstep {

/// @brief Element type of a device buffer.
enum class dtype { float32, float16, bfloat16 };

/// @brief Bytes of one element.
[[nodiscard]] constexpr std::size_t size_in_bytes(dtype type) noexcept {
  return type == dtype::float32 ? 4 : 2;
}

/// @brief "float32", "float16" or "bfloat16".
[[nodiscard]] constexpr char const* name(dtype type) noexcept {
  switch (type) {
    case dtype::float32: return "float32";
    case dtype::float16: return "float16";
    case dtype::bfloat16: return "bfloat16";
  }
  return "unknown";
}

}  // namespace graphstep
