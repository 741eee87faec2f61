// The checkpoint form of the capture-safe generator's state: one value, seed first, whose
// restore continues the same stream of numbers; a value of another size is refused.

#include "train/detail/rng_state.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <graphstep/error.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/philox.hpp>
#include <string>

namespace gr = graphstep::train;

TEST(rng_state, is_saved_as_one_value_with_the_seed_first) {
  gr::checkpoint saved;
  saved.add_value("rng", gr::detail::rng_state{0x0123456789abcdefULL, 0xfedcba9876543210ULL});
  auto const& entry = saved.entries().front();
  ASSERT_EQ(entry.bytes.size(), 16U);
  std::uint64_t seed = 0;
  std::memcpy(&seed, entry.bytes.data(), sizeof seed);
  EXPECT_EQ(seed, 0x0123456789abcdefULL);
  auto const back = saved.value<gr::detail::rng_state>("rng");
  EXPECT_EQ(back.offset, 0xfedcba9876543210ULL);
}

TEST(rng_state, a_restored_state_continues_the_same_stream) {
  // What a restore promises: the numbers after it are those after the save.
  gr::detail::rng_state const state{42, 1000};
  gr::checkpoint saved;
  saved.add_value("rng", state);
  auto const restored = saved.value<gr::detail::rng_state>("rng");
  for (std::uint64_t k = 0; k < 16; ++k) {
    auto const a = gr::philox_at(state.seed, state.offset + k);
    auto const b = gr::philox_at(restored.seed, restored.offset + k);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(a.word[w], b.word[w]);
  }
}

TEST(rng_state, a_value_of_another_size_is_refused) {
  gr::checkpoint saved;
  saved.add_value("rng", std::uint64_t{7});
  EXPECT_THROW(static_cast<void>(saved.value<gr::detail::rng_state>("rng")),
               graphstep::usage_error);
}
