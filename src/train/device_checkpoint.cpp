#include <cuda_runtime_api.h>

#include <cstddef>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/device_checkpoint.hpp>
#include <string>
#include <utility>
#include <vector>

namespace graphstep::train {
namespace {

void expect_copy_allowed(char const* call, std::string_view name, void const* device, dtype type,
                         cuda::stream_view stream) {
  graphstep::detail::expect_typed_buffer(std::string{call} + ": tensor '" + std::string{name} +
                                             "'",
                                         device, type);
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    std::string{call} + ": the stream is capturing into a graph, which would "
                                        "record the copy instead of making it; copy between "
                                        "replays");
}

}  // namespace

void add_device_tensor(checkpoint& into, std::string name, void const* device, dtype type,
                       std::vector<std::int64_t> shape, cuda::stream_view stream) {
  expect_copy_allowed("add_device_tensor", name, device, type, stream);
  std::size_t elements = 1;
  for (std::int64_t const extent : shape) {
    GRAPHSTEP_EXPECTS(extent >= 0, "add_device_tensor: tensor '" + name +
                                       "' has a negative extent; give its shape");
    elements *= static_cast<std::size_t>(extent);
  }
  std::vector<unsigned char> bytes(elements * size_in_bytes(type));
  if (!bytes.empty()) {
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(bytes.data(), device, bytes.size(), cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
  }
  into.add_tensor(std::move(name), type, std::move(shape), std::move(bytes));
}

void load_device_tensor(checkpoint const& from, std::string_view name, void* device, dtype type,
                        std::vector<std::int64_t> const& shape, cuda::stream_view stream) {
  expect_copy_allowed("load_device_tensor", name, device, type, stream);
  checkpoint_entry const& entry = from.tensor(name, type, shape);
  if (entry.bytes.empty()) return;
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device, entry.bytes.data(), entry.bytes.size(),
                                     cudaMemcpyHostToDevice, stream.get()));
  stream.synchronize();  // the entry's bytes are pageable host memory the caller may free
}

void add_device_tensors(checkpoint& into, std::string const& prefix,
                        parameter_layout const& layout, void const* device,
                        cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!layout.empty(), "add_device_tensors: the parameter layout holds no tensor");
  for (parameter_slot const& slot : layout.slots()) {
    expect_copy_allowed("add_device_tensors", slot.spec.name(), device, slot.spec.type(), stream);
    GRAPHSTEP_EXPECTS(!into.contains(prefix + "/" + slot.spec.name()),
                      "add_device_tensors: the checkpoint holds '" + prefix + "/" + slot.spec.name() +
                          "' already; give each layout its own prefix");
  }
  std::vector<unsigned char> buffer(layout.buffer_bytes());
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(buffer.data(), device, buffer.size(), cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  for (parameter_slot const& slot : layout.slots()) {
    auto const first = buffer.begin() + static_cast<std::ptrdiff_t>(slot.byte_offset());
    std::size_t const bytes = slot.spec.bytes();
    into.add_tensor(prefix + "/" + slot.spec.name(), slot.spec.type(), slot.spec.shape(),
                    {first, first + static_cast<std::ptrdiff_t>(bytes)});
  }
}

void load_device_tensors(checkpoint const& from, std::string const& prefix,
                         parameter_layout const& layout, void* device,
                         cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!layout.empty(), "load_device_tensors: the parameter layout holds no tensor");
  std::vector<checkpoint_entry const*> entries;
  for (parameter_slot const& slot : layout.slots()) {
    expect_copy_allowed("load_device_tensors", slot.spec.name(), device, slot.spec.type(), stream);
    entries.push_back(&from.tensor(prefix + "/" + slot.spec.name(), slot.spec.type(), slot.spec.shape()));
  }
  auto* const base = static_cast<unsigned char*>(device);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::vector<unsigned char> const& bytes = entries[i]->bytes;
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(base + layout.at(i).byte_offset(), bytes.data(), bytes.size(),
                                       cudaMemcpyHostToDevice, stream.get()));
  }
  stream.synchronize();  // the entries' bytes are pageable host memory the caller may free
}

}  // namespace graphstep::train
