// graphstep_core: plain C++, includes no CUDA header.
#include <graphstep/error.hpp>
#include <graphstep/memory/parameter_layout.hpp>
#include <limits>
#include <string>

namespace graphstep::memory {
namespace {

constexpr std::size_t size_limit = std::numeric_limits<std::size_t>::max();

std::string shape_name(std::vector<std::int64_t> const& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace

parameter_layout::parameter_layout(std::size_t alignment) : alignment_{alignment} {
  GRAPHSTEP_EXPECTS(alignment >= 16 && (alignment & (alignment - 1)) == 0,
                    "parameter_layout: the alignment must be a power of two of at least 16 "
                    "bytes, not " +
                        std::to_string(alignment));
}

std::size_t parameter_layout::add(std::string name, std::vector<std::int64_t> shape, dtype type,
                                  std::uint32_t group) {
  GRAPHSTEP_EXPECTS(!name.empty(), "parameter_layout: tensor " + std::to_string(slots_.size()) +
                                       " has an empty name; give every tensor a name");
  GRAPHSTEP_EXPECTS(!find(name), "parameter_layout: a tensor named '" + name +
                                     "' is already in the layout; names must be unique");
  graphstep::detail::expect_floating("parameter_layout: tensor '" + name + "'", type);
  GRAPHSTEP_EXPECTS(!shape.empty(), "parameter_layout: tensor '" + name +
                                        "' has an empty shape; a vector of n elements is {n}");
  std::size_t count = 1;
  for (std::int64_t dimension : shape) {
    GRAPHSTEP_EXPECTS(dimension >= 1, "parameter_layout: tensor '" + name + "' of shape " +
                                          shape_name(shape) +
                                          " has a dimension below 1; every tensor holds "
                                          "at least one element");
    auto const d = static_cast<std::size_t>(dimension);
    GRAPHSTEP_EXPECTS(count <= size_limit / d, "parameter_layout: tensor '" + name + "' of shape " +
                                                   shape_name(shape) +
                                                   " has more elements than a size can hold");
    count *= d;
  }
  std::size_t const element = size_in_bytes(type);
  // The slot, rounded up to the alignment, must fit after the slots before it.
  GRAPHSTEP_EXPECTS(count <= (size_limit - buffer_bytes_ - alignment_) / element,
                    "parameter_layout: tensor '" + name + "' of shape " + shape_name(shape) +
                        " does not fit in a buffer of at most " + std::to_string(size_limit) +
                        " bytes after " + std::to_string(buffer_bytes_) + " bytes");
  std::size_t const bytes = (count * element + alignment_ - 1) / alignment_ * alignment_;
  index_.emplace(name, slots_.size());
  slots_.push_back({std::move(name), std::move(shape), type, group, count, buffer_bytes_, bytes});
  buffer_bytes_ += bytes;
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

}  // namespace graphstep::memory
