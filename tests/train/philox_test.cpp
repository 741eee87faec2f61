// Philox-4x32-10 against the published known-answer vectors (Random123's kat_vectors), and the
// statistics of the unit floats drawn from it.

#include <gtest/gtest.h>

#include <graphstep/train/philox.hpp>

namespace gr = graphstep::train;

TEST(philox, known_answer_vectors) {
  struct vector {
    gr::philox_block counter;
    std::uint32_t key0, key1;
    gr::philox_block expected;
  };
  vector const vectors[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (auto const& v : vectors) {
    auto const out = gr::philox4x32_10(v.counter, v.key0, v.key1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.word[i], v.expected.word[i]) << "word " << i;
  }
}

TEST(philox, positions_and_seeds_give_different_streams) {
  auto const a = gr::philox_at(1, 0);
  auto const b = gr::philox_at(1, 1);
  auto const c = gr::philox_at(2, 0);
  EXPECT_NE(a.word[0], b.word[0]);
  EXPECT_NE(a.word[0], c.word[0]);
  auto const again = gr::philox_at(1, 0);
  EXPECT_EQ(a.word[0], again.word[0]);
  // High bits of the position and the seed matter too.
  EXPECT_NE(gr::philox_at(1, std::uint64_t{1} << 40).word[0], a.word[0]);
  EXPECT_NE(gr::philox_at(std::uint64_t{1} << 40, 0).word[0], gr::philox_at(0, 0).word[0]);
}

TEST(philox, unit_floats_are_uniform) {
  double sum = 0.0;
  int below_quarter = 0;
  int const blocks = 100000;
  for (int t = 0; t < blocks; ++t) {
    auto const bits = gr::philox_at(42, static_cast<std::uint64_t>(t));
    for (std::uint32_t w : bits.word) {
      float const u = gr::to_unit_float(w);
      ASSERT_GE(u, 0.0F);
      ASSERT_LT(u, 1.0F);
      sum += u;
      below_quarter += u < 0.25F;
    }
  }
  double const n = 4.0 * blocks;
  EXPECT_NEAR(sum / n, 0.5, 0.002);
  EXPECT_NEAR(below_quarter / n, 0.25, 0.002);
  EXPECT_EQ(gr::to_unit_float(0), 0.0F);
  EXPECT_LT(gr::to_unit_float(0xffffffffU), 1.0F);
}
