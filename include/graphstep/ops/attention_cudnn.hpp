#pragma once

/// @file ops/attention_cudnn.hpp
/// @brief Causal multi-head self-attention, forward and backward, on cuDNN's fused attention
/// (scaled dot-product attention through the cuDNN frontend's graph API): the optional path for
/// GPUs of compute capability 8.0 and newer, in bfloat16 or float16. Same layout and meaning as
/// the plain kernels of ops/attention.hpp, so the two paths exchange their outputs: qkv rows
/// [B·T, 3·H·D] holding q | k | v, out [B·T, H·D], logsumexp [B,H,T] in fp32 and dqkv in qkv's
/// layout. Scores are q·k/√D; position t attends to positions 0..t.
///
/// logsumexp is cuDNN's softmax "Stats" output: for each query, max + log Σ exp(s − max) over its
/// masked, scaled scores s = q·k/√D, the natural-log logsumexp of ops/attention.hpp (the cuDNN
/// frontend's softmax node composes Stats from exactly these operations; its base-2 variant is
/// opt-in and not used here). The backward reads it to recompute the probabilities, exp(s − lse).
///
/// Built where the cuDNN frontend's headers and cuDNN were found at configure time
/// (scripts/install-cudnn-frontend.sh, then reconfigure); the build then defines
/// GRAPHSTEP_WITH_CUDNN_SDPA=1 for graphstep and its users. cuDNN itself is opened at run time,
/// so programs start without it, and can_implement() says when it is missing. Elsewhere (the
/// simulated device included, which does not model cuDNN) the same API exists and
/// can_implement() names what is missing.
///
/// Shape (graphstep's one workspace convention): `can_implement` → construct (builds and checks
/// the forward and backward graphs for these sizes, type and pointers; nothing runs) →
/// `workspace_size` → `forward(workspace, bytes, stream)` / `backward(workspace, bytes, stream)`,
/// which take the workspace with the work that uses it, only enqueue and are safe under stream
/// capture. The operands are static buffers: their addresses are part of the layer, as they
/// are part of a captured graph.

#include <cstddef>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/ops/attention.hpp>
#include <graphstep/ops/attention_problem.hpp>
#include <graphstep/ops/gemm_problem.hpp>
#include <memory>

// cuDNN's handle type, as <cudnn.h> declares it, without including cuDNN here.
struct cudnnContext;

namespace graphstep::ops {

namespace detail {
/// @brief Destroys a cuDNN handle; `unique_ptr` stores the handle itself.
struct cudnn_handle_deleter {
  using pointer = cudnnContext*;
  void operator()(pointer handle) const noexcept;
};
struct cudnn_attention_state;
}  // namespace detail

/// @brief Whether this build has the cuDNN attention path and cuDNN can be loaded: `fused` is
/// true when it can; otherwise `reason` says what is missing and what to do. Loads cuDNN on the
/// first call; needs no device.
[[nodiscard]] support cudnn_attention_available();

/// @brief An owning cuDNN handle (cudnnCreate, on the current device). Move-only; a moved-from
/// handle's get() is null.
///
/// Lifetime and use: a `cudnn_attention` keeps the raw handle and calls cuDNN with it on every
/// forward() and backward(), after pointing it at that call's stream (cudnnSetStream), so the
/// handle must outlive every layer made with it, and layers that share it must not run from two
/// threads at once (a cuDNN handle is not thread-safe).
class cudnn_handle {
 public:
  /// @brief Creates a handle for the current device.
  /// @throws usage_error (the cuDNN path is not built, or cuDNN cannot be loaded:
  /// cudnn_attention_available() says why), cudnn_error (cudnnCreate failed, e.g. no device)
  cudnn_handle();
  /// @brief The raw handle, still owned by this object.
  [[nodiscard]] cudnnContext* get() const noexcept { return handle_.get(); }

 private:
  std::unique_ptr<cudnnContext, detail::cudnn_handle_deleter> handle_;
};

/// The operands: cudnn_attention_operands, in ops/attention_problem.hpp.

/// @brief How a `cudnn_attention` is made.
struct cudnn_attention_options {
  /// The backward without atomic accumulation (cuDNN's deterministic algorithm), so that two
  /// runs, and a replayed graph and an eager run, give the same bytes. The forward always is.
  bool deterministic{true};
};

/// @brief One attention layer on cuDNN, forward and backward, set up before capture.
///
/// Stream ordering: the constructor enqueues nothing (it builds cuDNN's execution plans on the
/// host, which may compile kernels and take a second or more); forward() and backward() only
/// enqueue, on the stream they are given. One workspace may serve forward() and backward() (and
/// other layers): run them in stream order, never concurrently. Operands and workspace must
/// stay allocated, at the same addresses, for the layer's life and for the life of every graph that
/// captured it.
///
/// Capture: the cuDNN frontend names two ways into a CUDA graph: populate_cuda_graph(), for
/// engines with the SUPPORTS_CUDA_GRAPH_NATIVE_API behavior note, and stream capture of
/// Graph::execute(), which it offers where populate_cuda_graph() cannot record an engine
/// (graph_interface.h) and for which it keeps the execution plan alive as long as the captured
/// graph exists, through a CUDA user object (utils/cuda_graph_retention.h, CudaGraphRetention_t,
/// PER_GRAPH by default). forward() and backward() are that execute(): cudnnSetStream, then the
/// execution plan's launch with a variant pack made in the constructor (and, before cuDNN 9.6, a
/// memset of the backward's dQ accumulator in the workspace). They allocate nothing, copy nothing
/// from the host (the frontend copies from the host only for ALiBi slopes and padding masks, which
/// this layer has none of) and synchronize nothing. Run each once eagerly before capturing it (as a
/// first training step does), so that cuDNN loads its kernels outside the capture.
class cudnn_attention {
 public:
  /// @brief Whether cuDNN's fused attention can run this layer; `reason` names the constraint
  /// that fails and what to do: the build or cuDNN itself missing, cuDNN older than 9.0, a
  /// device older than compute capability 8.0, a type other than bfloat16 and float16, a head
  /// dimension that is not a multiple of 8 or exceeds 256, a pointer not 16-byte aligned. Does not
  /// build cuDNN's graphs: cuDNN may still refuse a supported-looking layer in the constructor.
  /// The constraints on the arguments alone are checked first, without any CUDA or cuDNN call.
  /// @throws usage_error (non-positive sizes, missing operands or ones of another type or too
  /// short for the shape, dout without dqkv or the reverse, an output overlapping another operand
  /// of its call), cuda_error (the device cannot be queried)
  [[nodiscard]] static support can_implement(attention_shape const& shape,
                                             cudnn_attention_operands const& operands);

  /// @brief Builds and checks cuDNN's forward graph, and its backward graph when the operands
  /// include dout and dqkv; enqueues nothing.
  /// @param handle must outlive the layer: forward() and backward() run cuDNN with it
  /// @throws usage_error (can_implement() refuses, with its reason; cuDNN finds no engine for the
  /// layer, with cuDNN's message; a moved-from handle), cudnn_error, cuda_error
  cudnn_attention(cudnn_handle const& handle, attention_shape const& shape,
                  cudnn_attention_operands const& operands,
                  cudnn_attention_options const& options = {});
  ~cudnn_attention();
  /// @post the moved-from layer throws usage_error from every member but the destructor and
  /// assignment
  cudnn_attention(cudnn_attention&& other) noexcept;
  cudnn_attention& operator=(cudnn_attention&& other) noexcept;
  cudnn_attention(cudnn_attention const&) = delete;
  cudnn_attention& operator=(cudnn_attention const&) = delete;

  /// @brief Workspace bytes that forward() and backward() need (the larger of the two; may be 0).
  /// @throws usage_error (a moved-from layer)
  [[nodiscard]] std::size_t workspace_size() const;
  /// @brief Enqueues the forward on `stream`: out and logsumexp from qkv.
  /// @param workspace device memory of `workspace_bytes` ≥ workspace_size() (null with 0),
  /// 256-byte aligned, used by no work that runs concurrently with this call's; a captured call
  /// keeps its address in the graph
  /// @throws usage_error (a moved-from layer, fewer than workspace_size() bytes, a size without a
  /// pointer, a misaligned workspace), cudnn_error (cuDNN refused to enqueue)
  void forward(void* workspace, std::size_t workspace_bytes, cuda::stream_view stream) const;
  /// @brief Enqueues the backward on `stream`: dqkv from dout, qkv, out and logsumexp.
  /// @param workspace as forward()'s
  /// @throws usage_error (as forward(), and a layer made without dout and dqkv), cudnn_error
  /// (cuDNN refused to enqueue)
  void backward(void* workspace, std::size_t workspace_bytes, cuda::stream_view stream) const;

  /// @brief Whether the layer has a backward (its operands included dout and dqkv).
  [[nodiscard]] bool has_backward() const noexcept;
  /// @brief The shape this layer was made for.
  /// @throws usage_error (a moved-from layer)
  [[nodiscard]] attention_shape const& shape() const;

 private:
  std::unique_ptr<detail::cudnn_attention_state> state_;
};

}  // namespace graphstep::ops
