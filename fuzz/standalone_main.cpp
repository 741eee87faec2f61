// Runs a libFuzzer target as a plain program (any compiler, no libFuzzer). Each file named on
// the command line is one input, e.g. to replay a crash or a corpus:
//   block_allocator_fuzz_replay crash-1234 corpus/*
// or `--random N SEED` runs N pseudo-random inputs of up to 4096 bytes, the same for the same
// seed: how ctest runs every target's checks in every build (tests/CMakeLists.txt).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size);

namespace {

int run_random(char const* program, char const* count_text, char const* seed_text) {
  char* end = nullptr;
  unsigned long const count = std::strtoul(count_text, &end, 10);
  if (*end != '\0' || count == 0) {
    std::fprintf(stderr, "%s: --random needs a positive count, not '%s'\n", program, count_text);
    return 2;
  }
  unsigned long const seed = std::strtoul(seed_text, &end, 10);
  if (*end != '\0') {
    std::fprintf(stderr, "%s: --random needs a numeric seed, not '%s'\n", program, seed_text);
    return 2;
  }
  std::mt19937_64 random{seed};
  std::uniform_int_distribution<std::size_t> length{0, 4096};
  std::uniform_int_distribution<int> byte{0, 255};
  std::vector<std::uint8_t> bytes;
  for (unsigned long i = 0; i < count; ++i) {
    bytes.resize(length(random));
    for (auto& b : bytes) b = static_cast<std::uint8_t>(byte(random));
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("%s: %lu random inputs (seed %lu) ok\n", program, count, seed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string{argv[1]} == "--random") {
    if (argc != 4) {
      std::fprintf(stderr, "usage: %s --random COUNT SEED | %s FILE...\n", argv[0], argv[0]);
      return 2;
    }
    return run_random(argv[0], argv[2], argv[3]);
  }
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
