// Puts a dlopen'd library's thread-local block at a chosen page offset, then exits, so that
// LeakSanitizer's check at exit scans it. GCC's sanitizer runtime (up to GCC 13, LLVM 16)
// takes a dynamic TLS block at page offset 16 for one with a glibc 2.19 header, reads a start
// and size from the 16 bytes before it, and its tracer then faults on that garbage ("Tracer
// caught signal 11"): the sanitize presets set intercept_tls_get_addr=0 to keep it from
// guessing. CUPTI, loaded by capture diagnostics, has such a block; where malloc puts it
// depends on every allocation before, so without the option the check fails now and then.
//
// Usage: tls_landing_probe <module> <k>: fills the allocator's size class until the k-th
// block of it from now sits at page offset 16, loads <module> and touches its TLS; prints the
// page offset the TLS block landed at.

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
// Kept, not leaked (a leak report would hide what the check at exit is for), in an array
// that no destructor empties before that check.
void* kept[1 << 16];
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <module> <k>\n", argv[0]);
    return 2;
  }
  std::size_t const ahead = std::stoul(argv[2]);
  void* module = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], ::dlerror());
    return 2;
  }
  auto const* block_size =
      static_cast<unsigned long const*>(::dlsym(module, "tls_landing_block_size"));
  auto* touch = reinterpret_cast<char* (*)()>(::dlsym(module, "tls_landing_touch"));
  if (block_size == nullptr || touch == nullptr) {
    std::fprintf(stderr, "%s lacks the probe's symbols\n", argv[1]);
    return 2;
  }
  // Blocks of one size class come out one chunk apart; find the stride, then stop where the
  // k-th next block is at page offset 16.
  std::uintptr_t previous = 0;
  for (void*& block : kept) {
    block = std::malloc(*block_size);
    auto const address = reinterpret_cast<std::uintptr_t>(block);
    if (previous != 0 && address > previous) {
      std::uintptr_t const stride = address - previous;
      if ((address + ahead * stride) % 4096 == 16) break;
    }
    previous = address;
  }
  char const* tls = touch();
  std::printf("tls block at page offset %lu\n",
              static_cast<unsigned long>(reinterpret_cast<std::uintptr_t>(tls) % 4096));
  std::fflush(stdout);
  return 0;
}
