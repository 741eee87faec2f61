// graphstep_core: plain C++, includes no CUDA header.
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/tensor.hpp>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

namespace graphstep {
namespace {

// The elements of a tensor `name` of `shape` and `type`, refused as the constructor says.
std::size_t checked_count(std::string const& name, std::vector<std::int64_t> const& shape,
                          dtype type) {
  std::string const which =
      name.empty() ? std::string{"tensor_spec"} : "tensor_spec: tensor '" + name + "'";
  graphstep::detail::expect_known(which, type);
  std::size_t const count = element_count(shape);  // refuses a negative extent, an overflow
  GRAPHSTEP_EXPECTS(count <= std::numeric_limits<std::size_t>::max() / size_in_bytes(type),
                    which + " of shape " + describe(shape, type) +
                        " has more bytes than a size_t holds; split it");
  return count;
}

}  // namespace

tensor_spec::tensor_spec(std::vector<std::int64_t> shape, dtype type)
    : tensor_spec{std::string{}, std::move(shape), type} {}

tensor_spec::tensor_spec(std::string name, std::vector<std::int64_t> shape, dtype type)
    : name_{std::move(name)},
      shape_{std::move(shape)},
      type_{type},
      count_{checked_count(name_, shape_, type_)} {}

tensor_spec tensor_spec::renamed(std::string name) const {
  tensor_spec copy = *this;
  copy.name_ = std::move(name);
  return copy;
}

bool same_shape_and_type(tensor_spec const& a, tensor_spec const& b) noexcept {
  return a.type() == b.type() && a.shape() == b.shape();
}

std::string describe(tensor_spec const& spec) {
  std::string const shape = describe(spec.shape(), spec.type());
  return spec.name().empty() ? shape : "'" + spec.name() + "' " + shape;
}

tensor_view::tensor_view(void* data, tensor_spec spec) : data_{data}, spec_{std::move(spec)} {
  if (spec_.count() == 0) return;
  graphstep::detail::expect_typed_buffer("tensor_view of " + describe(spec_), data_, spec_.type());
}

tensor_view::tensor_view(device_span span, std::vector<std::int64_t> shape)
    : tensor_view{span.data(), tensor_spec{std::move(shape), span.type()}} {
  GRAPHSTEP_EXPECTS(spec_.count() == span.count(),
                    "tensor_view: the shape " + describe(spec_.shape(), span.type()) + " holds " +
                        std::to_string(spec_.count()) + " elements but the span " + describe(span) +
                        " holds " + std::to_string(span.count()) +
                        "; give a shape whose product is the span's count");
}

std::string describe(tensor_view const& view) {
  std::ostringstream out;
  out << describe(view.spec()) << " at " << view.data();
  return out.str();
}

}  // namespace graphstep
