#pragma once

/// @file dtype.hpp
/// @brief Element types of device buffers.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/error.hpp>
#include <string>

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

namespace detail {

/// @brief Refuses the buffer that `which` names ("loss_scaler: gradient 0") when its pointer is
/// null, its `type` is no dtype value, or its address is not aligned to an element.
/// @throws usage_error
inline void expect_typed_buffer(std::string const& which, void const* data, dtype type) {
  GRAPHSTEP_EXPECTS(data != nullptr, which + " is a null pointer");
  GRAPHSTEP_EXPECTS(type == dtype::float32 || type == dtype::float16 || type == dtype::bfloat16,
                    which + " has an unknown dtype (" + std::to_string(static_cast<int>(type)) +
                        "); use float32, float16 or bfloat16");
  GRAPHSTEP_EXPECTS(reinterpret_cast<std::uintptr_t>(data) % size_in_bytes(type) == 0,
                    which + " is not aligned to the " + std::to_string(size_in_bytes(type)) +
                        " bytes of its dtype " + name(type) +
                        "; pass the address of its first element");
}

}  // namespace detail
}  // namespace graphstep
