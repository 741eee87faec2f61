// Runs a libFuzzer target as a plain program (any compiler, no libFuzzer): each file named on
// the command line is one input, e.g. to replay a crash or a corpus:
//   block_allocator_fuzz_standalone crash-1234 corpus/*

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size);

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream file{argv[i], std::ios::binary};
    if (!file) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[i]);
      return 2;
    }
    std::vector<std::uint8_t> const bytes{std::istreambuf_iterator<char>{file},
                                          std::istreambuf_iterator<char>{}};
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    std::printf("%s: ok (%zu bytes)\n", argv[i], bytes.size());
  }
  return 0;
}
