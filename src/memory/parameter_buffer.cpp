#include <graphstep/error.hpp>
#include <graphstep/memory/parameter_buffer.hpp>
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

}  // namespace

parameter_buffer::parameter_buffer(parameter_layout layout, cuda::stream_view stream,
                                   cuda::memory_resource& resource)
    : layout_{std::move(layout)}, buffer_{non_empty(layout_).buffer_bytes(), stream, resource} {}

tensor_view parameter_buffer::view(std::size_t index) const {
  GRAPHSTEP_EXPECTS(!buffer_.empty(), "parameter_buffer: the buffer was moved from; it holds no "
                                      "tensor");
  return layout_.view(buffer_.data(), index);
}

tensor_view parameter_buffer::view(std::string const& name) const {
  GRAPHSTEP_EXPECTS(!buffer_.empty(), "parameter_buffer: the buffer was moved from; it holds no "
                                      "tensor");
  return layout_.view(buffer_.data(), name);
}

}  // namespace graphstep::memory
