// graphstep_core: plain C++, includes no CUDA header.
#include <graphstep/error.hpp>
#include <graphstep/parameter_layout.hpp>
#include <limits>
#include <string>
#include <utility>

namespace graphstep {
namespace {

constexpr std::size_t size_limit = std::numeric_limits<std::size_t>::max();

}  // namespace

parameter_layout::parameter_layout(std::size_t alignment) : alignment_{alignment} {
  GRAPHSTEP_EXPECTS(alignment >= 16 && (alignment & (alignment - 1)) == 0,
                    "parameter_layout: the alignment must be a power of two of at least 16 "
                    "bytes, not " +
                        std::to_string(alignment));
}

std::size_t parameter_layout::add(tensor_spec spec, std::uint32_t group) {
  std::string const& name = spec.name();
  GRAPHSTEP_EXPECTS(!name.empty(), "parameter_layout: tensor " + std::to_string(slots_.size()) +
                                       " (" + describe(spec) +
                                       ") has an empty name; give every tensor a name");
  GRAPHSTEP_EXPECTS(!find(name), "parameter_layout: a tensor named '" + name +
                                     "' is already in the layout; names must be unique");
  graphstep::detail::expect_floating("parameter_layout: tensor '" + name + "'", spec.type());
  GRAPHSTEP_EXPECTS(!spec.shape().empty(),
                    "parameter_layout: tensor '" + name +
                        "' has an empty shape; a vector of n elements is {n}");
  GRAPHSTEP_EXPECTS(spec.count() > 0, "parameter_layout: tensor " + describe(spec) +
                                          " has an extent below 1; every tensor holds "
                                          "at least one element");
  // The slot, rounded up to the alignment, must fit after the slots before it.
  GRAPHSTEP_EXPECTS(spec.bytes() <= size_limit - buffer_bytes_ - alignment_,
                    "parameter_layout: tensor " + describe(spec) +
                        " does not fit in a buffer of at most " + std::to_string(size_limit) +
                        " bytes after " + std::to_string(buffer_bytes_) + " bytes");
  std::size_t const slot_bytes = (spec.bytes() + alignment_ - 1) / alignment_ * alignment_;
  // The alignment (at least 16) is a multiple of every element size: the offset is whole.
  std::size_t const offset = buffer_bytes_ / size_in_bytes(spec.type());
  index_.emplace(name, slots_.size());
  slots_.push_back({std::move(spec), group, offset});
  buffer_bytes_ += slot_bytes;
  return slots_.size() - 1;
}

parameter_slot const& parameter_layout::at(std::size_t index) const {
  GRAPHSTEP_EXPECTS(index < slots_.size(), "parameter_layout: no tensor " + std::to_string(index) +
                                               "; the layout has " + std::to_string(slots_.size()));
  return slots_[index];
}

std::optional<std::size_t> parameter_layout::find(std::string const& name) const {
  auto const found = index_.find(name);
  if (found == index_.end()) return std::nullopt;
  return found->second;
}

parameter_slot const& parameter_layout::at(std::string const& name) const {
  std::optional<std::size_t> const index = find(name);
  GRAPHSTEP_EXPECTS(index.has_value(), "parameter_layout: no tensor named '" + name +
                                           "' among its " + std::to_string(slots_.size()));
  return slots_[*index];
}

std::size_t parameter_layout::bytes_through(std::size_t index) const {
  static_cast<void>(at(index));  // refuses an index past the end
  return index + 1 < slots_.size() ? slots_[index + 1].byte_offset() : buffer_bytes_;
}

tensor_view parameter_layout::view(void* base, std::size_t index) const {
  parameter_slot const& slot = at(index);
  GRAPHSTEP_EXPECTS(base != nullptr, "parameter_layout: the buffer holding tensor " +
                                         describe(slot.spec) +
                                         " is a null pointer; pass the buffer's address");
  return {static_cast<unsigned char*>(base) + slot.byte_offset(), slot.spec};
}

tensor_view parameter_layout::view(void* base, std::string const& name) const {
  std::optional<std::size_t> const index = find(name);
  GRAPHSTEP_EXPECTS(index.has_value(), "parameter_layout: no tensor named '" + name +
                                           "' among its " + std::to_string(slots_.size()));
  return view(base, *index);
}

}  // namespace graphstep
