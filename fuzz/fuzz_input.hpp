#pragma once

// What every libFuzzer target here shares: the fuzzer's bytes read as bounded numbers, and a
// failure libFuzzer reports as a crash.

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace graphstep::fuzz {

class reader {
 public:
  reader(std::uint8_t const* data, std::size_t size) : data_{data}, size_{size} {}
  [[nodiscard]] bool done() const { return at_ >= size_; }
  /// The next value in [0, bound) (0 when bound is 0), from up to three bytes.
  std::uint32_t next(std::uint32_t bound) {
    std::uint32_t value = 0;
    for (int i = 0; i < 3 && at_ < size_; ++i) value = value << 8 | data_[at_++];
    return bound == 0 ? 0 : value % bound;
  }

 private:
  std::uint8_t const* data_;
  std::size_t size_;
  std::size_t at_{};
};

[[noreturn]] inline void fail() { std::abort(); }

}  // namespace graphstep::fuzz
