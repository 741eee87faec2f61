#pragma once

// The simulated device's symbol table (graphstep/sim/symbol.hpp): the variables the rewritten
// sources registered, looked up by the runtime's symbol functions.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace graphstep::sim::detail {

struct device_symbol {
  void const* address{};
  std::size_t bytes{};
  char const* name{};
};

// The variable registered at `address` (a symbol is named by its address, as `&variable`);
// false where none is.
bool find_symbol(void const* address, device_symbol& found);
// Whether [address, address + bytes) lies within one registered variable: device memory, as
// the address cudaGetSymbolAddress gives is on a GPU.
bool symbol_holds(void const* address, std::size_t bytes);
// Whether any registered variable overlaps [begin, end): the race checker records the
// accesses of kernels to such a page, as to a page of device memory.
bool symbol_overlaps(std::uintptr_t begin, std::uintptr_t end);

// The address `offset` bytes into `symbol`, for a copy of `count` bytes of `kind` to the symbol
// (`to_symbol`) or from it, as the symbol functions check one (runtime_api.cpp says which):
// cudaErrorInvalidSymbol, cudaErrorInvalidMemcpyDirection or cudaErrorInvalidValue.
cudaError_t symbol_copy_address(void const* symbol, std::size_t count, std::size_t offset,
                                cudaMemcpyKind kind, bool to_symbol, unsigned char*& at);

}  // namespace graphstep::sim::detail
