// graphstep_core: plain C++, includes no CUDA header.
#include "train/detail/optimizer_state.hpp"

#include <cstdint>
#include <graphstep/error.hpp>

namespace graphstep::train::detail {

std::vector<parameter> layout_parameters(memory::parameter_layout const& layout, void* values,
                                         void const* gradients, std::string const& who) {
  GRAPHSTEP_EXPECTS(!layout.empty(), who + ": the parameter layout holds no tensor");
  GRAPHSTEP_EXPECTS(values != nullptr && gradients != nullptr,
                    who +
                        ": the weight or gradient buffer of the parameter layout is a null "
                        "pointer");
  // The gradients are only read: the span's pointer is not const, as a span's never is.
  auto* const gradient_bytes = static_cast<unsigned char*>(const_cast<void*>(gradients));
  std::vector<parameter> parameters;
  parameters.reserve(layout.size());
  for (memory::parameter_slot const& slot : layout.slots()) {
    parameters.push_back(
        {{static_cast<unsigned char*>(values) + slot.offset, slot.type, slot.count},
         {gradient_bytes + slot.offset, slot.type, slot.count},
         slot.group});
  }
  return parameters;
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
      static_cast<void>(from.tensor(state_entry(prefix, t, buffer), dtype::float32, shape));
    }
  }
  if (buffers.empty()) return;
  GRAPHSTEP_EXPECTS(!from.contains(state_entry(prefix, counts.size(), buffers.front())),
                    who + "::restore_from: the checkpoint holds more tensors under '" + prefix +
                        "' than the " + std::to_string(counts.size()) +
                        " this optimizer updates; it was written for another model");
}

}  // namespace graphstep::train::detail
