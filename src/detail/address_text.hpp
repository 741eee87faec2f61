#pragma once

// Addresses as the library's messages write them. Plain C++, for the core and the shell alike.

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>

namespace graphstep::detail {

/// "0x7f3a5c000000" (and "0x0").
inline std::string hex_text(std::uintptr_t address) {
  std::array<char, 2 + 2 * sizeof(std::uintptr_t) + 1> text{};
  static_cast<void>(
      std::snprintf(text.data(), text.size(), "0x%llx", static_cast<unsigned long long>(address)));
  return text.data();
}

/// As printf's %p writes it: "0x7f3a5c000000", and "(nil)" for a null pointer.
inline std::string pointer_text(void const* pointer) {
  std::array<char, 32> text{};
  static_cast<void>(std::snprintf(text.data(), text.size(), "%p", pointer));
  return text.data();
}

}  // namespace graphstep::detail
