// graphstep_core: plain C++, includes no CUDA header.
// fp64 reference of ops/embedding.hpp; see ops/reference.hpp.

#include <cstddef>
#include <cstdint>
#include <graphstep/ops/reference.hpp>
#include <limits>
#include <vector>

namespace graphstep::ops::reference {

namespace {
bool in_vocabulary(std::int32_t id, std::size_t vocab) {
  return id >= 0 && static_cast<std::size_t>(id) < vocab;
}
}  // namespace

std::vector<double> embedding(std::vector<std::int32_t> const& tokens,
                              std::vector<double> const& token_table,
                              std::vector<double> const& position_table, std::size_t batch,
                              std::size_t sequence, std::size_t vocab, std::size_t channels) {
  std::vector<double> out(batch * sequence * channels);
  for (std::size_t p = 0; p < batch * sequence; ++p) {
    std::size_t const t = p % sequence;
    std::int32_t const id = tokens[p];
    for (std::size_t c = 0; c < channels; ++c) {
      out[p * channels + c] = in_vocabulary(id, vocab)
                                  ? token_table[static_cast<std::size_t>(id) * channels + c] +
                                        position_table[t * channels + c]
                                  : std::numeric_limits<double>::quiet_NaN();
    }
  }
  return out;
}

embedding_gradients embedding_backward(std::vector<double> const& dout,
                                       std::vector<std::int32_t> const& tokens, std::size_t batch,
                                       std::size_t sequence, std::size_t vocab,
                                       std::size_t channels) {
  embedding_gradients g{std::vector<double>(vocab * channels, 0.0),
                        std::vector<double>(sequence * channels, 0.0)};
  for (std::size_t p = 0; p < batch * sequence; ++p) {
    std::size_t const t = p % sequence;
    std::int32_t const id = tokens[p];
    for (std::size_t c = 0; c < channels; ++c) {
      double const d = dout[p * channels + c];
      g.position[t * channels + c] += d;
      if (in_vocabulary(id, vocab)) g.token[static_cast<std::size_t>(id) * channels + c] += d;
    }
  }
  return g;
}

}  // namespace graphstep::ops::reference
