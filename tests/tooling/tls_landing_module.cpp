// A shared library with thread-local storage, loaded with dlopen by tls_landing_probe: glibc
// gives such a library's TLS block to each thread from malloc, on its first use.

namespace {
constexpr unsigned long block_bytes = 40;
}  // namespace

extern "C" {
// The probe allocates blocks of this size to steer where the TLS block lands.
extern const unsigned long tls_landing_block_size;
const unsigned long tls_landing_block_size = block_bytes;

char* tls_landing_touch() {
  thread_local char block[block_bytes];
  block[0] = 1;
  return block;
}
}
