// graphstep_core: plain C++, includes no CUDA header.
#include "graphs/detail/backtrace.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>

#include <cstdlib>
#include <memory>

namespace graphstep::graphs::detail {

__attribute__((noinline)) std::vector<std::uintptr_t> current_backtrace(std::size_t max_frames) {
  std::vector<void*> raw(max_frames + 1);
  int const depth = ::backtrace(raw.data(), static_cast<int>(raw.size()));
  std::vector<std::uintptr_t> frames;
  frames.reserve(raw.size());
  for (int i = 1; i < depth; ++i) frames.push_back(reinterpret_cast<std::uintptr_t>(raw[i]));
  return frames;
}

frame symbolize(std::uintptr_t address) {
  frame result;
  result.address = address;
  Dl_info info{};
  ElfW(Sym)* symbol = nullptr;
  // A return address points after the call; one byte back lies inside the calling function.
  std::uintptr_t const inside_call = address - 1;
  if (::dladdr1(reinterpret_cast<void const*>(inside_call), &info,
                reinterpret_cast<void**>(&symbol), RTLD_DL_SYMENT) == 0) {
    return result;
  }
  if (info.dli_fname != nullptr) result.module = info.dli_fname;
  result.module_offset = address - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
  // dladdr names the nearest exported symbol below the address, which is another function
  // when the caller is not exported (static, anonymous namespace): keep a name only if its
  // symbol spans the address.
  auto const start = reinterpret_cast<std::uintptr_t>(info.dli_saddr);
  bool const spans = symbol != nullptr && inside_call >= start &&
                     inside_call < start + static_cast<std::uintptr_t>(symbol->st_size);
  if (info.dli_sname != nullptr && spans) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> demangled{
        abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status), std::free};
    result.symbol = status == 0 && demangled ? demangled.get() : info.dli_sname;
  }
  return result;
}

}  // namespace graphstep::graphs::detail
