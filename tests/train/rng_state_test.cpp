// The checkpoint form of the capture-safe generator's state: round trip, layout, size check.

#include <gtest/gtest.h>

#include <cstring>
#include <graphstep/error.hpp>
#include <graphstep/train/detail/rng_state.hpp>
#include <graphstep/train/philox.hpp>
#include <string>

namespace gr = graphstep::train;

TEST(rng_state, round_trips_and_keeps_the_seed_first) {
  gr::detail::rng_state const state{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  auto const bytes = gr::detail::to_bytes(state);
  ASSERT_EQ(bytes.size(), gr::detail::rng_state_bytes);
  std::uint64_t seed = 0;
  std::memcpy(&seed, bytes.data(), sizeof seed);
  EXPECT_EQ(seed, state.seed);
  auto const back = gr::detail::from_bytes(bytes);
  EXPECT_EQ(back.seed, state.seed);
  EXPECT_EQ(back.offset, state.offset);
}

TEST(rng_state, a_restored_state_continues_the_same_stream) {
  // What a restore promises: the numbers after it are those after the save.
  gr::detail::rng_state const saved{42, 1000};
  auto const restored = gr::detail::from_bytes(gr::detail::to_bytes(saved));
  for (std::uint64_t k = 0; k < 16; ++k) {
    auto const a = gr::philox_at(saved.seed, saved.offset + k);
    auto const b = gr::philox_at(restored.seed, restored.offset + k);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(a.word[w], b.word[w]);
  }
}

TEST(rng_state, a_wrong_size_is_a_usage_error_that_names_both_sizes) {
  for (std::size_t size :
       {std::size_t{0}, std::size_t{8}, std::size_t{15}, std::size_t{17}, std::size_t{32}}) {
    try {
      static_cast<void>(gr::detail::from_bytes(std::vector<std::byte>(size)));
      FAIL() << "no error for " << size << " bytes";
    } catch (graphstep::usage_error const& e) {
      std::string const what = e.what();
      EXPECT_NE(what.find("has " + std::to_string(size) + " bytes, not 16"), std::string::npos)
          << what;
    }
  }
}
