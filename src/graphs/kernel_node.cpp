#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/kernel_node.hpp>
#include <limits>
#include <string>

#include "graphs/detail/kernel_node_rules.hpp"

namespace graphstep::graphs::detail {

namespace {

char const* type_name(cudaGraphNodeType type) {
  switch (type) {
    case cudaGraphNodeTypeKernel: return "kernel";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeMemset: return "memset";
    case cudaGraphNodeTypeHost: return "host function";
    case cudaGraphNodeTypeGraph: return "child graph";
    case cudaGraphNodeTypeEmpty: return "empty";
    case cudaGraphNodeTypeWaitEvent: return "event wait";
    case cudaGraphNodeTypeEventRecord: return "event record";
    case cudaGraphNodeTypeMemAlloc: return "memory allocation";
    case cudaGraphNodeTypeMemFree: return "memory free";
    case cudaGraphNodeTypeConditional: return "conditional";
    default: return "other";
  }
}

}  // namespace

last_launch last_captured_kernel(cuda::stream_view stream, void const* function,
                                 std::size_t parameters) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long sequence = 0;
  cudaGraphNode_t const* dependencies = nullptr;
  std::size_t count = 0;
  GRAPHSTEP_CUDA_TRY(cudaStreamGetCaptureInfo(stream.get(), &status, &sequence, nullptr,
                                              &dependencies, nullptr, &count));
  last_capture last;
  last.active = status == cudaStreamCaptureStatusActive;
  last.nodes = last.active ? count : 0;
  last_launch found;
  if (last.active && count == 1) {
    found.kernel.node = dependencies[0];
    found.kernel.capture_sequence = sequence;
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    GRAPHSTEP_CUDA_TRY(cudaGraphNodeGetType(found.kernel.node, &type));
    last.node_type = type_name(type);
    if (type == cudaGraphNodeTypeKernel) {
      // "kernelParams: Array of pointers to individual kernel arguments" (cudaKernelNodeParams);
      // a launch that packed its arguments in `extra` leaves it null.
      cudaKernelNodeParams params{};
      GRAPHSTEP_CUDA_TRY(cudaGraphKernelNodeGetParams(found.kernel.node, &params));
      last.same_function = params.func == function;
      last.arguments_readable = parameters == 0 || params.kernelParams != nullptr;
      found.dims = launch_dims{params.gridDim, params.blockDim, params.sharedMemBytes};
      found.arguments = params.kernelParams;
    }
  }
  std::string const refusal = why_not_the_launch(last);
  GRAPHSTEP_EXPECTS(refusal.empty(), refusal);
  return found;
}

void set_kernel_launch(graph_exec& exec, captured_kernel const& kernel, void const* function,
                       launch_dims const& dims, void** arguments) {
  GRAPHSTEP_EXPECTS(!exec.empty(),
                    "kernel_node::set: the executable is empty: capture into it first");
  std::string const wrong_graph = why_not_this_executable(
      kernel.capture_sequence, exec.source().identity().capture_sequence, exec.name());
  GRAPHSTEP_EXPECTS(wrong_graph.empty(), wrong_graph);
  std::string const wrong_dims = why_not_these_dimensions(
      {dims.grid.x, dims.grid.y, dims.grid.z}, {dims.block.x, dims.block.y, dims.block.z});
  GRAPHSTEP_EXPECTS(wrong_dims.empty(), wrong_dims);
  GRAPHSTEP_EXPECTS(dims.shared_bytes <= std::numeric_limits<unsigned>::max(),
                    "kernel_node::set: " + std::to_string(dims.shared_bytes) +
                        " bytes of dynamic shared memory are more than a launch can ask for");
  cudaKernelNodeParams params{};
  params.func = const_cast<void*>(function);
  params.gridDim = dims.grid;
  params.blockDim = dims.block;
  params.sharedMemBytes = static_cast<unsigned>(dims.shared_bytes);
  params.kernelParams = arguments;
  params.extra = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaGraphExecKernelNodeSetParams(exec.get(), kernel.node, &params));
}

}  // namespace graphstep::graphs::detail
