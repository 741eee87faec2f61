// graphstep_core: plain C++, includes no CUDA header.
#include <graphstep/error.hpp>
#include <graphstep/parameter_layout.hpp>
#include <iterator>
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

void parameter_layout::expect_valid(tensor_spec const& spec) const {
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
}

std::size_t parameter_layout::add(tensor_spec spec, std::uint32_t group) {
  GRAPHSTEP_EXPECTS(!adopted_, "parameter_layout::add: this layout adopts an existing buffer, "
                               "where tensors lie where the buffer has them: place tensor " +
                                   describe(spec) + " with add_at(spec, byte_offset)");
  expect_valid(spec);
  std::string const& name = spec.name();
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

parameter_layout parameter_layout::adopting(std::size_t buffer_bytes) {
  GRAPHSTEP_EXPECTS(buffer_bytes > 0, "parameter_layout::adopting: the buffer has zero bytes; "
                                      "pass the size in bytes of the buffer the tensors lie in");
  parameter_layout layout{16};
  layout.adopted_ = true;
  layout.buffer_bytes_ = buffer_bytes;
  return layout;
}

std::size_t parameter_layout::add_at(tensor_spec spec, std::size_t byte_offset,
                                     std::uint32_t group) {
  GRAPHSTEP_EXPECTS(adopted_, "parameter_layout::add_at: this layout places its tensors itself; "
                              "make a layout of an existing buffer with "
                              "parameter_layout::adopting(buffer_bytes) to place tensor " +
                                  describe(spec) + " at an offset");
  expect_valid(spec);
  std::size_t const element = size_in_bytes(spec.type());
  GRAPHSTEP_EXPECTS(byte_offset % element == 0,
                    "parameter_layout::add_at: tensor " + describe(spec) + " at byte offset " +
                        std::to_string(byte_offset) + " is not aligned to its dtype (" +
                        std::to_string(element) + " bytes); place it at a multiple of " +
                        std::to_string(element));
  GRAPHSTEP_EXPECTS(byte_offset <= buffer_bytes_ && spec.bytes() <= buffer_bytes_ - byte_offset,
                    "parameter_layout::add_at: tensor " + describe(spec) + " at byte offset " +
                        std::to_string(byte_offset) + " ends past the buffer's " +
                        std::to_string(buffer_bytes_) + " bytes (its " +
                        std::to_string(spec.bytes()) + " bytes end at " +
                        (byte_offset <= size_limit - spec.bytes()
                             ? std::to_string(byte_offset + spec.bytes())
                             : std::string{"more than a size_t holds"}) +
                        "); check its offset and the buffer's size");
  std::size_t const end = byte_offset + spec.bytes();
  // The neighbours in the buffer: the first tensor at or after the offset, and the one before.
  auto const next = by_offset_.lower_bound(byte_offset);
  auto overlapping = by_offset_.end();
  if (next != by_offset_.end() && next->first < end) overlapping = next;
  if (next != by_offset_.begin()) {
    auto const previous = std::prev(next);
    if (previous->first + slots_[previous->second].spec.bytes() > byte_offset)
      overlapping = previous;
  }
  if (overlapping != by_offset_.end()) {
    parameter_slot const& other = slots_[overlapping->second];
    throw usage_error{"parameter_layout::add_at: tensor " + describe(spec) + " at bytes [" +
                      std::to_string(byte_offset) + ", " + std::to_string(end) +
                      ") overlaps tensor " + describe(other.spec) + " at bytes [" +
                      std::to_string(other.byte_offset()) + ", " +
                      std::to_string(other.byte_offset() + other.spec.bytes()) +
                      "); every byte belongs to at most one tensor"};
  }
  std::string const name = spec.name();
  std::size_t const index = slots_.size();
  slots_.push_back({std::move(spec), group, byte_offset / element});
  by_offset_.emplace(byte_offset, index);
  index_.emplace(name, index);
  return index;
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

std::optional<std::size_t> parameter_layout::first_of_another_dtype() const noexcept {
  for (std::size_t i = 1; i < slots_.size(); ++i) {
    if (slots_[i].spec.type() != slots_[0].spec.type()) return i;
  }
  return std::nullopt;
}

parameter_slot const& parameter_layout::at(std::string const& name) const {
  std::optional<std::size_t> const index = find(name);
  GRAPHSTEP_EXPECTS(index.has_value(), "parameter_layout: no tensor named '" + name +
                                           "' among its " + std::to_string(slots_.size()));
  return slots_[*index];
}

std::size_t parameter_layout::bytes_through(std::size_t index) const {
  parameter_slot const& slot = at(index);  // refuses an index past the end
  if (adopted_) return slot.byte_offset() + slot.spec.bytes();
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
