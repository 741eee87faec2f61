// graphstep_core: plain C++, includes no CUDA header.
#include <cmath>
#include <graphstep/error.hpp>
#include <graphstep/train/optimizer_options.hpp>
#include <sstream>
#include <string>

#include "detail/span_checks.hpp"

namespace graphstep::train {

void validate(parameter const& parameter, std::size_t index, std::string const& who) {
  std::string const which = who + ": parameter " + std::to_string(index);
  std::string const slot = "parameter " + std::to_string(index);
  using ::graphstep::detail::empty_span;
  static_cast<void>(
      ::graphstep::detail::floating_operand_type(who, slot + " value", parameter.value));
  ::graphstep::detail::expect_valid_span(who, slot + " gradient", parameter.gradient,
                                         empty_span::refused);
  GRAPHSTEP_EXPECTS(parameter.value.type() == parameter.gradient.type(),
                    which + " has a " + name(parameter.value.type()) + " value but a " +
                        name(parameter.gradient.type()) +
                        " gradient; give the gradient the value's dtype");
  GRAPHSTEP_EXPECTS(parameter.value.count() == parameter.gradient.count(),
                    which + " has " + std::to_string(parameter.value.count()) + " values but " +
                        std::to_string(parameter.gradient.count()) +
                        " gradient elements; they must be equal");
}

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

namespace graphstep::train {

void validate(mixed_adamw_options const& options) {
  GRAPHSTEP_EXPECTS(options.beta1 >= 0.0F && options.beta1 < 1.0F,
                    "mixed_adamw_options: beta1 must lie in [0, 1)");
  GRAPHSTEP_EXPECTS(options.beta2 >= 0.0F && options.beta2 < 1.0F,
                    "mixed_adamw_options: beta2 must lie in [0, 1)");
  GRAPHSTEP_EXPECTS(options.epsilon > 0.0F && std::isfinite(options.epsilon),
                    "mixed_adamw_options: epsilon must be positive and finite");
  GRAPHSTEP_EXPECTS(options.max_grad_norm >= 0.0F && std::isfinite(options.max_grad_norm),
                    "mixed_adamw_options: max_grad_norm must be finite and non-negative "
                    "(0 turns clipping off)");
  GRAPHSTEP_EXPECTS(options.clip_epsilon > 0.0F && std::isfinite(options.clip_epsilon),
                    "mixed_adamw_options: clip_epsilon must be positive and finite");
  if (!(options.skip_norm > 0.0F)) {
    std::ostringstream value;
    value << options.skip_norm;  // "-1", "0", "nan": as given, not to_string's "-1.000000"
    GRAPHSTEP_EXPECTS(options.skip_norm > 0.0F,
                      "mixed_adamw_options: skip_norm is " + value.str() +
                          "; it must be positive (infinity, the default, turns skipping off)");
  }
}

std::vector<parameter_group> plan_parameter_groups(
    std::vector<parameter_group> const& groups, std::vector<std::uint32_t> const& group_of_tensor) {
  GRAPHSTEP_EXPECTS(!groups.empty(),
                    "parameter groups: no group was given; pass one group for a single "
                    "weight decay and learning rate");
  GRAPHSTEP_EXPECTS(!group_of_tensor.empty(), "parameter groups: no tensor was given");
  for (std::size_t g = 0; g < groups.size(); ++g) {
    GRAPHSTEP_EXPECTS(groups[g].weight_decay >= 0.0F && std::isfinite(groups[g].weight_decay),
                      "parameter groups: group " + std::to_string(g) +
                          " has a negative or non-finite weight_decay; use 0 for no decay");
    GRAPHSTEP_EXPECTS(groups[g].lr_multiplier >= 0.0F && std::isfinite(groups[g].lr_multiplier),
                      "parameter groups: group " + std::to_string(g) +
                          " has a negative or non-finite lr_multiplier; use 1 for the "
                          "schedule's rate, 0 to freeze the group");
  }
  std::vector<parameter_group> per_tensor;
  per_tensor.reserve(group_of_tensor.size());
  for (std::size_t t = 0; t < group_of_tensor.size(); ++t) {
    std::uint32_t const g = group_of_tensor[t];
    GRAPHSTEP_EXPECTS(g < groups.size(), "parameter groups: tensor " + std::to_string(t) +
                                             " names group " + std::to_string(g) + " but only " +
                                             std::to_string(groups.size()) +
                                             " groups were given (numbered from 0)");
    per_tensor.push_back(groups[g]);
  }
  return per_tensor;
}

}  // namespace graphstep::train
