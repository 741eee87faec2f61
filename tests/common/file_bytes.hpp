#pragma once

// Whole files as bytes, and random bytes to fill them, for the checkpoint tests of both formats.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace graphstep::testing {

using bytes = std::vector<unsigned char>;

inline bytes random_bytes(std::size_t size, std::uint32_t seed) {
  std::mt19937 generator{seed};
  bytes out(size);
  for (auto& byte : out) byte = static_cast<unsigned char>(generator());
  return out;
}

inline bytes read_file(std::string const& path) {
  std::ifstream in{path, std::ios::binary};
  return bytes{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

inline void write_file(std::string const& path, bytes const& content) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out.write(reinterpret_cast<char const*>(content.data()),
            static_cast<std::streamsize>(content.size()));
}

}  // namespace graphstep::testing
