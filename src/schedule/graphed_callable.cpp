#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/schedule/graphed_callable.hpp>
#include <string>

#include "detail/span_checks.hpp"

namespace graphstep::schedule {
namespace {

void check_tensors(std::vector<tensor_view> const& tensors, char const* what) {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    detail::expect_valid_span("graphed_callable", std::string{what} + " " + std::to_string(i),
                              tensors[i].span(), detail::empty_span::refused);
  }
}

// Copies each source into its static tensor, after checking them all: same dtype, same count.
void copy_in(std::vector<tensor_view> const& statics, std::vector<device_span> const& sources,
             char const* call, char const* what, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(sources.size() == statics.size(),
                    std::string{"graphed_callable::"} + call + ": " +
                        std::to_string(sources.size()) + " spans given for " +
                        std::to_string(statics.size()) + " static " + what + "s");
  for (std::size_t i = 0; i < statics.size(); ++i) {
    std::string const which = std::string{what} + " " + std::to_string(i);
    detail::expect_valid_span(std::string{"graphed_callable::"} + call, which, sources[i],
                              detail::empty_span::refused);
    GRAPHSTEP_EXPECTS(
        sources[i].type() == statics[i].type() && sources[i].count() == statics[i].count(),
        std::string{"graphed_callable::"} + call + ": " + which + " is " + describe(sources[i]) +
            " but its static tensor is " + describe(statics[i].spec()) +
            "; pass a span of its dtype and count");
  }
  for (std::size_t i = 0; i < statics.size(); ++i) {
    device_span const target = statics[i].span();
    if (sources[i].data() == target.data()) continue;  // already in place
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(target.data(), sources[i].data(), target.bytes(),
                                       cudaMemcpyDeviceToDevice, stream.get()));
  }
}

}  // namespace

graphed_callable::graphed_callable(callable const& forward, callable const& backward,
                                   std::vector<tensor_view> inputs,
                                   std::vector<tensor_view> outputs,
                                   std::vector<tensor_view> output_gradients,
                                   std::vector<tensor_view> input_gradients,
                                   memory::memory_pool& pool, cuda::stream_view stream,
                                   graphs::lifecycle_options const& lifecycle)
    : inputs_{std::move(inputs)},
      outputs_{std::move(outputs)},
      output_gradients_{std::move(output_gradients)},
      input_gradients_{std::move(input_gradients)} {
  GRAPHSTEP_EXPECTS(forward && backward,
                    "graphed_callable: both a forward and a backward callable are needed");
  check_tensors(inputs_, "input");
  check_tensors(outputs_, "output");
  check_tensors(output_gradients_, "output gradient");
  check_tensors(input_gradients_, "input gradient");
  build(forward, backward, pool, stream, lifecycle);
}

graphed_callable::graphed_callable(tensor_callable forward, tensor_callable backward,
                                   graphed_specs const& specs, memory::memory_pool& pool,
                                   cuda::stream_view stream,
                                   graphs::lifecycle_options const& lifecycle) {
  GRAPHSTEP_EXPECTS(forward && backward,
                    "graphed_callable: both a forward and a backward callable are needed");
  graphs::validate(lifecycle, "graphed_callable");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "graphed_callable: build it outside any capture (it captures itself)");
  // Allocated eagerly, before any capture: their addresses are baked into both graphs.
  auto allocate = [&](std::vector<tensor_spec> const& role, std::vector<tensor_view>& into) {
    for (tensor_spec const& spec : role) {
      owned_.emplace_back(spec, stream, pool);
      into.push_back(owned_.back().tensor());
    }
  };
  allocate(specs.inputs, inputs_);
  allocate(specs.outputs, outputs_);
  allocate(specs.output_gradients, output_gradients_);
  allocate(specs.input_gradients, input_gradients_);
  graphed_tensors const tensors{inputs_, outputs_, output_gradients_, input_gradients_};
  // The callables are run only here (warm-up and capture), so binding `tensors` is safe.
  build([&](cuda::stream_view s) { forward(tensors, s); },
        [&](cuda::stream_view s) { backward(tensors, s); }, pool, stream, lifecycle);
  // Released after the graphs, which wait for their latest replays: every use known here is
  // over by then, so the release needs no stream of the caller's, which may be gone.
  stream.synchronize();
  for (auto& buffer : owned_) buffer.set_stream(cuda::stream_view{cudaStreamPerThread});
}

void graphed_callable::build(callable const& forward, callable const& backward,
                             memory::memory_pool& pool, cuda::stream_view stream,
                             graphs::lifecycle_options const& lifecycle) {
  graphs::validate(lifecycle, "graphed_callable");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "graphed_callable: build it outside any capture (it captures itself)");
  for (int i = 0; i < lifecycle.warmup_runs;
       ++i) {  // lazy initialization happens here, not in a capture
    forward(stream);
    backward(stream);
  }
  // Forward first, then backward, into one pool: the backward reads what the forward saved,
  // and the pool keeps both graphs' memory apart while they live.
  graphs::capture_options options = lifecycle.capture;
  options.name = lifecycle.capture.name + " forward";
  graphs::capture(
      forward_graph_, stream, pool, [&] { forward(stream); }, options);
  options.name = lifecycle.capture.name + " backward";
  graphs::capture(
      backward_graph_, stream, pool, [&] { backward(stream); }, options);
}

void graphed_callable::forward(std::vector<device_span> const& inputs, cuda::stream_view stream) {
  copy_in(inputs_, inputs, "forward", "input", stream);
  forward_graph_.replay(stream);
}

void graphed_callable::backward(std::vector<device_span> const& output_gradients,
                                cuda::stream_view stream) {
  copy_in(output_gradients_, output_gradients, "backward", "output gradient", stream);
  backward_graph_.replay(stream);
}

}  // namespace graphstep::schedule
