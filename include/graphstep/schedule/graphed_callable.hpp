#pragma once

/// @file schedule/graphed_callable.hpp
/// @brief `graphed_callable`: a forward and a backward callable turned into two graphs with
/// static inputs, outputs and gradients — the C++ counterpart of PyTorch's
/// make_graphed_callables, for part of a model while the rest stays eager.
///
/// The callables read and write device buffers declared up front (static tensors). They are
/// run eagerly a few times (warm-up), then the forward and the backward are captured, in that
/// order, into one pool, so the backward can read what the forward saved. Each call copies the
/// caller's inputs (or output gradients) into the static buffers when they live elsewhere and
/// replays one graph; results are in the static outputs (or input gradients), overwritten by
/// the next call: copy them out, or consume them before the next replay.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/device_span.hpp>
#include <graphstep/dtype.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <graphstep/graphs/lifecycle_options.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <graphstep/tensor.hpp>
#include <vector>

namespace graphstep::schedule {

/// @brief The static buffers of a graphed callable, by role.
struct graphed_tensors {
  std::vector<tensor_view> inputs;
  std::vector<tensor_view> outputs;
  std::vector<tensor_view> output_gradients;
  std::vector<tensor_view> input_gradients;
};

/// @brief The static buffers to allocate from the pool, by role: what each tensor is (a name is
/// optional, and the view handed out carries it).
struct graphed_specs {
  std::vector<tensor_spec> inputs;
  std::vector<tensor_spec> outputs;
  std::vector<tensor_spec> output_gradients;
  std::vector<tensor_spec> input_gradients;
};

/// @brief A forward and a backward callable replayed as two graphs. Move-only.
///
/// The buffers it allocates go back to the pool when it dies, once its graphs' latest replays
/// have finished; work of the caller's on other streams that reads them must be done by then.
/// The pool must outlive it.
class graphed_callable {
 public:
  using callable = std::function<void(cuda::stream_view stream)>;
  /// @brief A callable handed the static buffers it must read and write.
  using tensor_callable =
      std::function<void(graphed_tensors const& tensors, cuda::stream_view stream)>;

  /// Each static tensor is a `tensor_view` at an address that stays fixed.
  /// @param inputs buffers the forward reads; `forward()` fills them
  /// @param outputs buffers the forward writes
  /// @param output_gradients buffers the backward reads; `backward()` fills them
  /// @param input_gradients buffers the backward writes
  /// @throws usage_error (missing callables, null or empty tensors, negative warm-up, a
  /// capturing stream), capture_error, and what the callables throw
  graphed_callable(callable const& forward, callable const& backward,
                   std::vector<tensor_view> inputs, std::vector<tensor_view> outputs,
                   std::vector<tensor_view> output_gradients,
                   std::vector<tensor_view> input_gradients, memory::memory_pool& pool,
                   cuda::stream_view stream, graphs::lifecycle_options const& lifecycle = {});

  /// @brief As above, with the static buffers allocated from `pool` (eagerly, at addresses
  /// that stay fixed) and owned by the graphed callable; the callables are handed them.
  /// @throws usage_error (missing callables, a spec without elements, negative warm-up, a
  /// capturing stream), out_of_memory, capture_error, and what the callables throw
  graphed_callable(tensor_callable forward, tensor_callable backward, graphed_specs const& specs,
                   memory::memory_pool& pool, cuda::stream_view stream,
                   graphs::lifecycle_options const& lifecycle = {});

  /// @brief Copies `inputs` (one span per static input, of its dtype and element count; one
  /// that is the static input itself is not copied) into the static inputs and replays the
  /// forward graph.
  /// @throws usage_error (another number of inputs, a null span, one of another dtype or
  /// count), cuda_error
  void forward(std::vector<device_span> const& inputs, cuda::stream_view stream);
  /// @brief Copies `output_gradients` into the static ones and replays the backward graph.
  /// @throws as `forward`
  void backward(std::vector<device_span> const& output_gradients, cuda::stream_view stream);

  [[nodiscard]] std::vector<tensor_view> const& inputs() const noexcept { return inputs_; }
  [[nodiscard]] std::vector<tensor_view> const& outputs() const noexcept { return outputs_; }
  [[nodiscard]] std::vector<tensor_view> const& output_gradients() const noexcept {
    return output_gradients_;
  }
  [[nodiscard]] std::vector<tensor_view> const& input_gradients() const noexcept {
    return input_gradients_;
  }
  [[nodiscard]] graphs::graph_exec const& forward_graph() const noexcept { return forward_graph_; }
  [[nodiscard]] graphs::graph_exec const& backward_graph() const noexcept {
    return backward_graph_;
  }

 private:
  void build(callable const& forward, callable const& backward, memory::memory_pool& pool,
             cuda::stream_view stream, graphs::lifecycle_options const& lifecycle);

  std::vector<cuda::device_buffer> owned_;  // the buffers allocated from the pool, if any
  std::vector<tensor_view> inputs_;
  std::vector<tensor_view> outputs_;
  std::vector<tensor_view> output_gradients_;
  std::vector<tensor_view> input_gradients_;
  graphs::graph_exec forward_graph_;
  graphs::graph_exec backward_graph_;
};

}  // namespace graphstep::schedule
