// Conditional nodes in a capture: the kernel that hands a device flag to a conditional handle,
// and the node itself.

#include <cuda_runtime.h>

#include <algorithm>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/conditional.hpp>
#include <graphstep/graphs/conditional_support.hpp>
#include <string>

namespace graphstep::graphs {
namespace {

__global__ void set_condition_kernel(cudaGraphConditionalHandle handle, unsigned int const* flag) {
  cudaGraphSetConditional(handle, *flag != 0 ? 1U : 0U);
}

void capture_conditional(cuda::stream_view stream, unsigned int const* flag,
                         std::function<void(cuda::stream_view)> const& body,
                         cudaGraphConditionalNodeType type, char const* what) {
  GRAPHSTEP_EXPECTS(flag != nullptr && static_cast<bool>(body),
                    std::string{what} + ": the device flag and the body are required");
  cudaStreamCaptureStatus status{};
  cudaGraph_t graph = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamGetCaptureInfo(stream.get(), &status, nullptr, &graph));
  GRAPHSTEP_EXPECTS(status == cudaStreamCaptureStatusActive,
                    std::string{what} +
                        " must be called inside a capture, on the capturing "
                        "stream");
  int driver_version = 0;
  GRAPHSTEP_CUDA_TRY(cudaDriverGetVersion(&driver_version));
  if (std::string reason = conditional_nodes_unsupported_reason(driver_version); !reason.empty()) {
    throw cuda_error{cudaErrorNotSupported, std::string{what} + ": " + reason};
  }
  cudaGraphConditionalHandle handle{};
  GRAPHSTEP_CUDA_TRY(cudaGraphConditionalHandleCreate(&handle, graph, 0, 0));
  // The flag's value at this point of the step decides (for a loop: the first iteration).
  set_condition_kernel<<<1, 1, 0, stream.get()>>>(handle, flag);
  GRAPHSTEP_CUDA_TRY(cudaGetLastError());
  cudaGraphNode_t const* dependencies = nullptr;
  std::size_t count = 0;
  GRAPHSTEP_CUDA_TRY(cudaStreamGetCaptureInfo(stream.get(), &status, nullptr, &graph, &dependencies,
                                              nullptr, &count));
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type = type;
  params.conditional.size = 1;
  cudaGraphNode_t node = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaGraphAddNode(&node, graph, dependencies, nullptr, count, &params));
  GRAPHSTEP_CUDA_TRY(cudaStreamUpdateCaptureDependencies(stream.get(), &node, nullptr, 1,
                                                         cudaStreamSetCaptureDependencies));
  // The body goes into the node's own graph, captured from a stream of its own.
  cudaGraph_t const body_graph = params.conditional.phGraph_out[0];
  cudaStream_t side = nullptr;
  GRAPHSTEP_CUDA_TRY(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaError_t captured = cudaStreamBeginCaptureToGraph(side, body_graph, nullptr, nullptr, 0,
                                                       cudaStreamCaptureModeRelaxed);
  if (captured == cudaSuccess) {
    try {
      body(side);
      if (type == cudaGraphCondTypeWhile) {
        set_condition_kernel<<<1, 1, 0, side>>>(handle, flag);  // re-evaluated after each pass
      }
    } catch (...) {
      cudaGraph_t ignored = nullptr;
      static_cast<void>(cudaStreamEndCapture(side, &ignored));
      GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaStreamDestroy(side));
      throw;
    }
    cudaGraph_t ended = nullptr;
    captured = cudaStreamEndCapture(side, &ended);
  }
  GRAPHSTEP_ASSERT_CUDA_SUCCESS(cudaStreamDestroy(side));
  GRAPHSTEP_CUDA_TRY(captured);
}

}  // namespace

void capture_if(cuda::stream_view stream, unsigned int const* flag,
                std::function<void(cuda::stream_view)> const& body) {
  capture_conditional(stream, flag, body, cudaGraphCondTypeIf, "capture_if");
}

void capture_while(cuda::stream_view stream, unsigned int const* flag,
                   std::function<void(cuda::stream_view)> const& body) {
  capture_conditional(stream, flag, body, cudaGraphCondTypeWhile, "capture_while");
}

}  // namespace graphstep::graphs
