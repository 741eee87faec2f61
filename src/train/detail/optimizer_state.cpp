// graphstep_core: plain C++, includes no CUDA header.
#include "train/detail/optimizer_state.hpp"

#include <cstdint>
#include <graphstep/error.hpp>

namespace graphstep::train::detail {

std::vector<parameter> layout_parameters(parameter_layout const& layout, void* values,
                                         void const* gradients, std::string const& who) {
  GRAPHSTEP_EXPECTS(!layout.empty(), who + ": the parameter layout holds no tensor");
  GRAPHSTEP_EXPECTS(values != nullptr && gradients != nullptr,
                    who +
                        ": the weight or gradient buffer of the parameter layout is a null "
                        "pointer");
  // The gradients are only read: the span's pointer is not const, as a span's never is.
  void* const gradient_base = const_cast<void*>(gradients);
  std::vector<parameter> parameters;
  parameters.reserve(layout.size());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    parameters.push_back({layout.view(values, i).span(), layout.view(gradient_base, i).span(),
                          layout.at(i).group});
  }
  return parameters;
}

void expect_same_layout(parameter_layout const& weights, parameter_layout const& gradients,
                        std::string const& who) {
  GRAPHSTEP_EXPECTS(weights.size() == gradients.size(),
                    who + ": the weights' layout holds " + std::to_string(weights.size()) +
                        " tensors and the gradients' " + std::to_string(gradients.size()) +
                        ": make both buffers from the model's one layout");
  for (std::size_t i = 0; i < weights.size(); ++i) {
    parameter_slot const& w = weights.at(i);
    parameter_slot const& g = gradients.at(i);
    GRAPHSTEP_EXPECTS(w.spec == g.spec && w.group == g.group && w.offset == g.offset,
                      who + ": tensor " + std::to_string(i) + " is '" + w.spec.name() +
                          "' in the weights' layout and '" + g.spec.name() +
                          "' (or another shape, dtype, group or place) in the gradients': make "
                          "both buffers from the model's one layout");
  }
}

std::string state_entry(std::string const& prefix, std::size_t tensor, std::string const& buffer) {
  return prefix + "/" + std::to_string(tensor) + "/" + buffer;
}

void expect_state_entries(checkpoint const& from, std::string const& prefix,
                          std::vector<std::size_t> const& counts,
                          std::vector<std::string> const& buffers, std::string const& who) {
  for (std::size_t t = 0; t < counts.size(); ++t) {
    std::vector<std::int64_t> const shape{static_cast<std::int64_t>(counts[t])};
    for (std::string const& buffer : buffers) {
      // Refuses a missing entry, another dtype or shape, naming the entry and both.
      static_cast<void>(from.tensor({state_entry(prefix, t, buffer), shape, dtype::float32}));
    }
  }
  if (buffers.empty()) return;
  GRAPHSTEP_EXPECTS(!from.contains(state_entry(prefix, counts.size(), buffers.front())),
                    who + "::restore_from: the checkpoint holds more tensors under '" + prefix +
                        "' than the " + std::to_string(counts.size()) +
                        " this optimizer updates; it was written for another model");
}

}  // namespace graphstep::train::detail
