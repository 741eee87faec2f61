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

void expect_copy_allowed(char const* call, tensor_view const& tensor, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!tensor.name().empty(),
                    std::string{call} + ": the tensor " + describe(tensor) +
                        " has no name; name it in its tensor_spec, as the checkpoint will");
  graphstep::detail::expect_typed_buffer(std::string{call} + ": tensor '" + tensor.name() + "'",
                                         tensor.data(), tensor.type());
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    std::string{call} +
                        ": the stream is capturing into a graph, which would "
                        "record the copy instead of making it; copy between "
                        "replays");
}

void expect_buffer(char const* call, memory::parameter_buffer const& buffer,
                   cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(buffer.data() != nullptr,
                    std::string{call} + ": the parameter buffer was moved from; it holds nothing");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    std::string{call} +
                        ": the stream is capturing into a graph, which would "
                        "record the copy instead of making it; copy between "
                        "replays");
}

}  // namespace

void add_device_tensor(checkpoint& into, tensor_view const& tensor, cuda::stream_view stream) {
  expect_copy_allowed("add_device_tensor", tensor, stream);
  std::vector<unsigned char> bytes(tensor.bytes());
  if (!bytes.empty()) {
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(bytes.data(), tensor.data(), bytes.size(),
                                       cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
  }
  into.add_tensor(tensor.spec(), std::move(bytes));
}

void load_device_tensor(checkpoint const& from, tensor_view const& tensor,
                        cuda::stream_view stream) {
  expect_copy_allowed("load_device_tensor", tensor, stream);
  checkpoint_entry const& entry = from.tensor(tensor.spec());
  if (entry.bytes.empty()) return;
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(tensor.data(), entry.bytes.data(), entry.bytes.size(),
                                     cudaMemcpyHostToDevice, stream.get()));
  stream.synchronize();  // the entry's bytes are pageable host memory the caller may free
}

void add_device_tensors(checkpoint& into, std::string const& prefix,
                        memory::parameter_buffer const& buffer, cuda::stream_view stream) {
  expect_buffer("add_device_tensors", buffer, stream);
  parameter_layout const& layout = buffer.layout();
  for (parameter_slot const& slot : layout.slots()) {
    GRAPHSTEP_EXPECTS(!into.contains(prefix + "/" + slot.spec.name()),
                      "add_device_tensors: the checkpoint holds '" + prefix + "/" +
                          slot.spec.name() + "' already; give each layout its own prefix");
  }
  std::vector<unsigned char> host(layout.buffer_bytes());
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(host.data(), buffer.data(), host.size(),
                                     cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  for (parameter_slot const& slot : layout.slots()) {
    auto const first = host.begin() + static_cast<std::ptrdiff_t>(slot.byte_offset());
    into.add_tensor(slot.spec.renamed(prefix + "/" + slot.spec.name()),
                    {first, first + static_cast<std::ptrdiff_t>(slot.spec.bytes())});
  }
}

void load_device_tensors(checkpoint const& from, std::string const& prefix,
                         memory::parameter_buffer const& buffer, cuda::stream_view stream) {
  expect_buffer("load_device_tensors", buffer, stream);
  parameter_layout const& layout = buffer.layout();
  std::vector<checkpoint_entry const*> entries;
  for (parameter_slot const& slot : layout.slots()) {
    entries.push_back(&from.tensor(slot.spec.renamed(prefix + "/" + slot.spec.name())));
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::vector<unsigned char> const& bytes = entries[i]->bytes;
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(buffer.view(i).data(), bytes.data(), bytes.size(),
                                       cudaMemcpyHostToDevice, stream.get()));
  }
  stream.synchronize();  // the entries' bytes are pageable host memory the caller may free
}

}  // namespace graphstep::train
