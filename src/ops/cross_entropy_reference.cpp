// graphstep_core: plain C++, includes no CUDA header.
// fp64 reference of ops/cross_entropy.hpp; see ops/reference.hpp.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <graphstep/ops/reference.hpp>
#include <limits>
#include <vector>

namespace graphstep::ops::reference {

cross_entropy_result cross_entropy(std::vector<double> const& logits,
                                   std::vector<std::int32_t> const& targets, std::size_t rows,
                                   std::size_t vocab, std::size_t padded_vocab,
                                   double gradient_scale) {
  double const nan = std::numeric_limits<double>::quiet_NaN();
  cross_entropy_result result{0.0, std::vector<double>(rows * padded_vocab, 0.0)};
  double const factor = gradient_scale / static_cast<double>(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    double const* x = logits.data() + r * padded_vocab;
    double* d = result.dlogits.data() + r * padded_vocab;
    std::int32_t const target = targets[r];
    if (target < 0 || static_cast<std::size_t>(target) >= vocab) {
      std::fill(d, d + padded_vocab, nan);
      result.loss += nan;
      continue;
    }
    double const top = *std::max_element(x, x + vocab);  // exp(x − top) cannot overflow
    double sum = 0.0;
    for (std::size_t i = 0; i < vocab; ++i) sum += std::exp(x[i] - top);
    double const logsumexp = top + std::log(sum);
    result.loss += logsumexp - x[target];
    for (std::size_t i = 0; i < vocab; ++i) {
      double const onehot = i == static_cast<std::size_t>(target) ? 1.0 : 0.0;
      d[i] = (std::exp(x[i] - logsumexp) - onehot) * factor;
    }
  }
  result.loss /= static_cast<double>(rows);
  return result;
}

}  // namespace graphstep::ops::reference
