#include "detail/symbol_table.hpp"

#include <cstdint>
#include <map>
#include <mutex>

#include "graphstep/sim/symbol.hpp"

namespace graphstep::sim::detail {

namespace {

// Registrations run during static initialization, before or after the runtime's own state is
// made: the table is a function-local static with a mutex of its own (never held while another
// lock is taken).
struct symbol_table {
  std::mutex mutex;
  std::map<void const*, device_symbol> symbols;
};

symbol_table& table() {
  static auto* const instance = new symbol_table;  // outlives every registration
  return *instance;
}

}  // namespace

bool find_symbol(void const* address, device_symbol& found) {
  symbol_table& t = table();
  std::lock_guard<std::mutex> const lock{t.mutex};
  auto const it = t.symbols.find(address);
  if (it == t.symbols.end()) return false;
  found = it->second;
  return true;
}

bool symbol_holds(void const* address, std::size_t bytes) {
  symbol_table& t = table();
  std::lock_guard<std::mutex> const lock{t.mutex};
  auto it = t.symbols.upper_bound(address);
  if (it == t.symbols.begin()) return false;
  --it;
  std::uintptr_t const offset = reinterpret_cast<std::uintptr_t>(address) -
                                reinterpret_cast<std::uintptr_t>(it->second.address);
  return offset < it->second.bytes && bytes <= it->second.bytes - offset;
}

bool symbol_overlaps(std::uintptr_t begin, std::uintptr_t end) {
  symbol_table& t = table();
  std::lock_guard<std::mutex> const lock{t.mutex};
  // Variables are disjoint and kept by address: only the last one starting before `end` can.
  auto it = t.symbols.lower_bound(reinterpret_cast<void const*>(end));
  if (it == t.symbols.begin()) return false;
  --it;
  return reinterpret_cast<std::uintptr_t>(it->second.address) + it->second.bytes > begin;
}

cudaError_t symbol_copy_address(void const* symbol, std::size_t count, std::size_t offset,
                                cudaMemcpyKind kind, bool to_symbol, unsigned char*& at) {
  device_symbol found;
  if (!find_symbol(symbol, found)) return cudaErrorInvalidSymbol;
  bool const direction_valid =
      kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDefault ||
      kind == (to_symbol ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
  if (!direction_valid) return cudaErrorInvalidMemcpyDirection;
  if (offset > found.bytes || count > found.bytes - offset) return cudaErrorInvalidValue;
  // The host variable that stands for the symbol is written as a GPU writes a symbol's memory
  // (one declared const may lie in read-only pages here, and a copy to it faults).
  at = static_cast<unsigned char*>(const_cast<void*>(found.address)) + offset;
  return cudaSuccess;
}

}  // namespace graphstep::sim::detail

namespace graphstep::sim {

symbol_registration::symbol_registration(void const* address, std::size_t bytes,
                                         char const* name) noexcept
    : address_{address} {
  detail::symbol_table& t = detail::table();
  std::lock_guard<std::mutex> const lock{t.mutex};
  t.symbols[address] = detail::device_symbol{address, bytes, name};
}

symbol_registration::~symbol_registration() {
  detail::symbol_table& t = detail::table();
  std::lock_guard<std::mutex> const lock{t.mutex};
  t.symbols.erase(address_);
}

}  // namespace graphstep::sim
