#pragma once

/// @file dtype.hpp
/// @brief Element types of device buffers.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/error.hpp>
#include <string>
#include <string_view>

namespace graphstep {

/// @brief Element type of a device buffer: the three floating types of the kernels, and the
/// integers of ids (`int32`: token ids, targets) and masks (`uint8`: dropout's keep bytes). The
/// values of the first three are stable (checkpoints and collective logs store them).
enum class dtype { float32, float16, bfloat16, int32, uint8 };

/// @brief Bytes of one element.
[[nodiscard]] constexpr std::size_t size_in_bytes(dtype type) noexcept {
  switch (type) {
    case dtype::float32:
    case dtype::int32: return 4;
    case dtype::float16:
    case dtype::bfloat16: return 2;
    case dtype::uint8: return 1;
  }
  return 1;
}

/// @brief "float32", "float16", "bfloat16", "int32" or "uint8".
[[nodiscard]] constexpr char const* name(dtype type) noexcept {
  switch (type) {
    case dtype::float32: return "float32";
    case dtype::float16: return "float16";
    case dtype::bfloat16: return "bfloat16";
    case dtype::int32: return "int32";
    case dtype::uint8: return "uint8";
  }
  return "unknown";
}

/// @brief float32, float16 or bfloat16: a type the kernels compute in fp32 from.
[[nodiscard]] constexpr bool is_floating(dtype type) noexcept {
  return type == dtype::float32 || type == dtype::float16 || type == dtype::bfloat16;
}

namespace detail {

/// @brief Whether `type` is one of dtype's values (a cast integer may be none).
[[nodiscard]] constexpr bool is_known(dtype type) noexcept {
  return is_floating(type) || type == dtype::int32 || type == dtype::uint8;
}

/// @brief Refuses a `type` that is no dtype value (a cast integer), naming `which`
/// ("checkpoint: tensor \"w\"").
/// @throws usage_error
inline void expect_known(std::string_view which, dtype type) {
  GRAPHSTEP_EXPECTS(is_known(type), std::string{which} + " has an unknown dtype (" +
                                        std::to_string(static_cast<int>(type)) +
                                        "); use float32, float16, bfloat16, int32 or uint8");
}

/// @brief Whether `expect_typed_buffer` lets a buffer pass: a pointer that is not null, a `type`
/// that is a dtype value, an address aligned to an element.
[[nodiscard]] inline bool is_typed_buffer(void const* data, dtype type) noexcept {
  return data != nullptr && is_known(type) &&
         reinterpret_cast<std::uintptr_t>(data) % size_in_bytes(type) == 0;
}

/// @brief Refuses the buffer that `which` names ("loss_scaler: gradient 0") when its pointer is
/// null, its `type` is no dtype value, or its address is not aligned to an element.
/// @throws usage_error
inline void expect_typed_buffer(std::string const& which, void const* data, dtype type) {
  if (is_typed_buffer(data, type)) return;
  GRAPHSTEP_EXPECTS(data != nullptr, which + " is a null pointer");
  expect_known(which, type);
  GRAPHSTEP_EXPECTS(reinterpret_cast<std::uintptr_t>(data) % size_in_bytes(type) == 0,
                    which + " is not aligned to the " + std::to_string(size_in_bytes(type)) +
                        " bytes of its dtype " + name(type) +
                        "; pass the address of its first element");
}

/// @brief Refuses a `type` that is not float32, float16 or bfloat16 where `which` ("add: out",
/// "layer_norm_forward") computes in floating point.
/// @throws usage_error
inline void expect_floating(std::string_view which, dtype type) {
  GRAPHSTEP_EXPECTS(is_floating(type),
                    std::string{which} +
                        (is_known(type) ? std::string{" is "} + name(type)
                                        : " has an unknown dtype (" +
                                              std::to_string(static_cast<int>(type)) + ")") +
                        "; it takes float32, float16 or bfloat16");
}

/// @brief The integer cases of a switch over a type that `expect_floating` let through: throws
/// its error, so that a path that skipped the check still refuses instead of doing nothing.
/// @throws usage_error, always
[[noreturn]] inline void refuse_integer(std::string_view which, dtype type) {
  expect_floating(which, type);
  throw usage_error{std::string{which} + ": " + name(type) + " is not a floating type"};
}

}  // namespace detail
}  // namespace graphstep
