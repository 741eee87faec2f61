// The fp64 reference of the token + position embedding: values worked by hand, bad ids, and the
// backward against central finite differences of the forward.

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <graphstep/ops/reference.hpp>
#include <random>
#include <vector>

namespace ref = graphstep::ops::reference;

namespace {

std::vector<double> random(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist{-1.0, 1.0};
  std::vector<double> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace

TEST(embedding_reference, forward_by_hand) {
  // B = 2, T = 2, vocab = 3, C = 2.
  std::vector<double> const tokens_table{1, 2, 10, 20, 100, 200};
  std::vector<double> const positions{0.5, -0.5, 0.25, 0.75};
  std::vector<std::int32_t> const tokens{2, 0, 1, 2};
  auto const out = ref::embedding(tokens, tokens_table, positions, 2, 2, 3, 2);
  // row 0: token 2 + t 0 = (100.5, 199.5); row 1: token 0 + t 1 = (1.25, 2.75);
  // row 2: token 1 + t 0 = (10.5, 19.5);   row 3: token 2 + t 1 = (100.25, 200.75).
  EXPECT_EQ(out, (std::vector<double>{100.5, 199.5, 1.25, 2.75, 10.5, 19.5, 100.25, 200.75}));
}

TEST(embedding_reference, ids_outside_the_vocabulary_give_nan_rows_and_no_gradient) {
  std::vector<double> const tokens_table{1, 2, 10, 20};
  std::vector<double> const positions{0, 0, 0, 0, 0, 0};
  // vocab = 2: ids -1 and 2 are outside it.
  std::vector<std::int32_t> const tokens{1, -1, 2};
  auto const out = ref::embedding(tokens, tokens_table, positions, 1, 3, 2, 2);
  EXPECT_EQ(out[0], 10.0);
  EXPECT_EQ(out[1], 20.0);
  for (std::size_t i = 2; i < 6; ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
  std::vector<double> const dout{1, 2, 3, 4, 5, 6};
  auto const g = ref::embedding_backward(dout, tokens, 1, 3, 2, 2);
  EXPECT_EQ(g.token, (std::vector<double>{0, 0, 1, 2}));
  // The position gradient still takes every row.
  EXPECT_EQ(g.position, (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(embedding_reference, backward_by_hand) {
  // B = 2, T = 3, vocab = 4, C = 1; id 1 at positions 0, 2 and 4, id 3 at 1, id 0 at 3 and 5.
  std::vector<std::int32_t> const tokens{1, 3, 1, 0, 1, 0};
  std::vector<double> const dout{1, 2, 4, 8, 16, 32};
  auto const g = ref::embedding_backward(dout, tokens, 2, 3, 4, 1);
  EXPECT_EQ(g.token, (std::vector<double>{8 + 32, 1 + 4 + 16, 0, 2}));
  EXPECT_EQ(g.position, (std::vector<double>{1 + 8, 2 + 16, 4 + 32}));
}

// The scalar L = Σ w ⊙ embedding(...) has the gradients embedding_backward(w): each entry
// against a central difference of L.
TEST(embedding_reference, backward_matches_finite_differences) {
  std::size_t const batch = 2;
  std::size_t const sequence = 3;
  std::size_t const vocab = 5;
  std::size_t const channels = 3;
  std::mt19937 rng{7};  // NOLINT(cert-msc32-c,cert-msc51-cpp): a fixed, reproducible set
  std::vector<std::int32_t> const tokens{4, 1, 4, 0, 4, 1};  // id 2 and 3 never occur
  auto tokens_table = random(vocab * channels, rng);
  auto positions = random(sequence * channels, rng);
  auto const w = random(batch * sequence * channels, rng);
  auto const loss = [&] {
    auto const out =
        ref::embedding(tokens, tokens_table, positions, batch, sequence, vocab, channels);
    double sum = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i) sum += w[i] * out[i];
    return sum;
  };
  auto const g = ref::embedding_backward(w, tokens, batch, sequence, vocab, channels);
  double const h = 1e-6;
  auto const central = [&](double& x) {
    double const saved = x;
    x = saved + h;
    double const up = loss();
    x = saved - h;
    double const down = loss();
    x = saved;
    return (up - down) / (2 * h);
  };
  for (std::size_t i = 0; i < tokens_table.size(); ++i) {
    EXPECT_NEAR(g.token[i], central(tokens_table[i]), 1e-8) << "token " << i;
  }
  for (std::size_t i = 0; i < positions.size(); ++i) {
    EXPECT_NEAR(g.position[i], central(positions[i]), 1e-8) << "position " << i;
  }
  // Rows of ids that do not occur have no gradient.
  for (std::size_t c = 0; c < channels; ++c) {
    EXPECT_EQ(g.token[2 * channels + c], 0.0);
    EXPECT_EQ(g.token[3 * channels + c], 0.0);
  }
}
