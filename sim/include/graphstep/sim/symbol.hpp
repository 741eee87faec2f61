#pragma once

/// @file
/// @brief The symbol table of the simulated device: the `__device__`, `__constant__` and
/// `__managed__` variables that cudaMemcpyToSymbol, cudaGetSymbolAddress and the other symbol
/// functions name.
///
/// nvcc registers each such variable with the runtime when the module loads (the
/// `__cudaRegisterVar` calls of its generated host code); a function that names a variable the
/// runtime never registered fails with cudaErrorInvalidSymbol. graphstep::rewrite_launches adds
/// a registration after each definition of one at namespace scope, which registers the host
/// variable that stands for it (its address and size) while the program runs.

#include <cstddef>

namespace graphstep::sim {

/// @brief One variable's entry in the symbol table, from its construction to its destruction
/// (a library unloaded takes its variables out).
class symbol_registration {
 public:
  symbol_registration(void const* address, std::size_t bytes, char const* name) noexcept;
  symbol_registration(symbol_registration const&) = delete;
  symbol_registration& operator=(symbol_registration const&) = delete;
  symbol_registration(symbol_registration&&) = delete;
  symbol_registration& operator=(symbol_registration&&) = delete;
  ~symbol_registration();

 private:
  void const* address_;
};

}  // namespace graphstep::sim
