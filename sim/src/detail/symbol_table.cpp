#include "detail/symbol_table.hpp"

#include <cstdint>
#include <iterator>
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

// The variable with the highest address below `end`, the only one that can reach past an
// address below `end` (variables are disjoint, kept by address); null where none starts there.
device_symbol const* last_starting_before(symbol_table const& t, std::uintptr_t end) {
  auto const it = t.symbols.lower_bound(reinterpret_cast<void const*>(end));
  return it == t.symbols.begin() ? nullptr : &std::prev(it)->second;
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
  auto const at = reinterpret_cast<std::uintptr_t>(address);
  device_symbol const* variable = last_starting_before(t, at + 1);
  if (variable == nullptr) return false;
  std::uintptr_t const offset = at - reinterpret_cast<std::uintptr_t>(variable->address);
  return offset < variable->bytes && bytes <= variable->bytes - offset;
}

bool symbol_overlaps(std::uintptr_t begin, std::uintptr_t end) {
  symbol_table& t = table();
  std::lock_guard<std::mutex> const lock{t.mutex};
  device_symbol const* variable = last_starting_before(t, end);
  return variable != nullptr &&
         reinterpret_cast<std::uintptr_t>(variable->address) + variable->bytes > begin;
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
