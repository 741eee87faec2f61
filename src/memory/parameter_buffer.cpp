#include <cuda_runtime_api.h>

#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace graphstep::memory {
namespace {

parameter_layout const& non_empty(parameter_layout const& layout) {
  GRAPHSTEP_EXPECTS(!layout.empty(),
                    "parameter_buffer: the parameter layout holds no tensor; add its tensors "
                    "before making a buffer from it");
  return layout;
}

std::string address_of(void const* data) {
  std::ostringstream text;
  text << data;
  return text.str();
}

}  // namespace

parameter_buffer::parameter_buffer(parameter_layout layout, cuda::stream_view stream,
                                   cuda::memory_resource& resource)
    : layout_{std::move(layout)}, buffer_{non_empty(layout_).buffer_bytes(), stream, resource} {}

parameter_buffer::parameter_buffer(parameter_layout layout, void* data, std::size_t bytes)
    : layout_{std::move(layout)},
      buffer_{0, cuda::stream_view{cudaStreamLegacy}},  // empty: allocates and frees nothing
      adopted_data_{data},
      adopted_bytes_{bytes} {}

parameter_buffer parameter_buffer::adopt(parameter_layout layout, void* data, std::size_t bytes) {
  non_empty(layout);
  GRAPHSTEP_EXPECTS(data != nullptr, "parameter_buffer::adopt: the memory to adopt is a null "
                                     "pointer; pass the device address of the trainer's buffer");
  GRAPHSTEP_EXPECTS(reinterpret_cast<std::uintptr_t>(data) % layout.alignment() == 0,
                    "parameter_buffer::adopt: the memory at " + address_of(data) +
                        " is not aligned to the layout's " + std::to_string(layout.alignment()) +
                        " bytes; adopt an allocation's start (CUDA aligns those to 256)");
  GRAPHSTEP_EXPECTS(layout.buffer_bytes() <= bytes,
                    "parameter_buffer::adopt: the layout needs " +
                        std::to_string(layout.buffer_bytes()) + " bytes and the memory holds " +
                        std::to_string(bytes) +
                        "; describe the buffer with parameter_layout::adopting(bytes) and its "
                        "tensors' offsets, or adopt a larger buffer");
  return parameter_buffer{std::move(layout), data, bytes};
}

parameter_buffer::parameter_buffer(parameter_buffer&& other) noexcept
    : layout_{std::move(other.layout_)},
      buffer_{std::move(other.buffer_)},
      adopted_data_{std::exchange(other.adopted_data_, nullptr)},
      adopted_bytes_{std::exchange(other.adopted_bytes_, 0)} {}

parameter_buffer& parameter_buffer::operator=(parameter_buffer&& other) noexcept {
  layout_ = std::move(other.layout_);
  buffer_ = std::move(other.buffer_);
  adopted_data_ = std::exchange(other.adopted_data_, nullptr);
  adopted_bytes_ = std::exchange(other.adopted_bytes_, 0);
  return *this;
}

tensor_view parameter_buffer::view(std::size_t index) const {
  GRAPHSTEP_EXPECTS(data() != nullptr, "parameter_buffer: the buffer was moved from; it holds no "
                                       "tensor");
  return layout_.view(data(), index);
}

tensor_view parameter_buffer::view(std::string const& name) const {
  GRAPHSTEP_EXPECTS(data() != nullptr, "parameter_buffer: the buffer was moved from; it holds no "
                                       "tensor");
  return layout_.view(data(), name);
}

device_span parameter_buffer::span() const {
  GRAPHSTEP_EXPECTS(data() != nullptr,
                    "parameter_buffer::span: the buffer was moved from; it "
                    "holds no tensor");
  dtype const type = layout_.at(0).spec.type();
  std::optional<std::size_t> const other = layout_.first_of_another_dtype();
  GRAPHSTEP_EXPECTS(!other.has_value(),
                    "parameter_buffer::span: the layout holds " + std::string{name(type)} +
                        " and " + name(layout_.at(*other).spec.type()) + " tensors ('" +
                        layout_.at(*other).spec.name() +
                        "'); take each tensor's view() instead, or lay out each dtype apart");
  GRAPHSTEP_EXPECTS(bytes() % size_in_bytes(type) == 0,
                    "parameter_buffer::span: the buffer's " + std::to_string(bytes()) +
                        " bytes are no whole number of " + name(type) + " elements");
  return {data(), type, bytes() / size_in_bytes(type)};
}

}  // namespace graphstep::memory
