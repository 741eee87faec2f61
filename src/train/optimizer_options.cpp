#include <cmath>
#include <graphstep/error.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <string>

namespace graphstep::train {

void validate(sgd_options const& options) {
  GRAPHSTEP_EXPECTS(options.momentum >= 0.0F, "sgd: momentum must be non-negative");
  GRAPHSTEP_EXPECTS(options.weight_decay >= 0.0F, "sgd: weight_decay must be non-negative");
  GRAPHSTEP_EXPECTS(!options.nesterov || (options.momentum > 0.0F && options.dampening == 0.0F),
                    "sgd: Nesterov momentum needs a positive momentum and zero dampening");
}

void validate(adam_options const& options) {
  GRAPHSTEP_EXPECTS(options.beta1 >= 0.0F && options.beta1 < 1.0F,
                    "adam: beta1 must lie in [0, 1)");
  GRAPHSTEP_EXPECTS(options.beta2 >= 0.0F && options.beta2 < 1.0F,
                    "adam: beta2 must lie in [0, 1)");
  GRAPHSTEP_EXPECTS(options.epsilon > 0.0F, "adam: epsilon must be positive");
  GRAPHSTEP_EXPECTS(options.weight_decay >= 0.0F, "adam: weight_decay must be non-negative");
}

}  // namespace graphstep::train
