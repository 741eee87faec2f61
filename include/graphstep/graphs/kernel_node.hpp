#pragma once

/// @file graphs/kernel_node.hpp
/// @brief `kernel_node`: one captured kernel launch whose grid and arguments change between
/// replays, without a new capture (`cudaGraphExecKernelNodeSetParams`).

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <tuple>
#include <type_traits>
#include <utility>

namespace graphstep::graphs {

/// @brief A launch's configuration: `grid` blocks of `block` threads, and dynamic shared memory.
struct launch_dims {
  dim3 grid{1, 1, 1};
  dim3 block{1, 1, 1};
  std::size_t shared_bytes{0};
};

namespace detail {
/// The node a launch became, the capture it belongs to, and its launch at capture.
struct captured_kernel {
  cudaGraphNode_t node{};
  std::uint64_t capture_sequence{};
  launch_dims captured;
};
captured_kernel last_captured_kernel(cuda::stream_view stream, void const* function);
void set_kernel_launch(graph_exec& exec, captured_kernel const& kernel, void const* function,
                       launch_dims const& dims, void** arguments);
}  // namespace detail

/// @brief A kernel launch captured into a graph, typed by the kernel's parameters, whose
/// configuration and arguments an executable of that graph can change between replays: the
/// grid a batch needs, a pointer, a count that host work computes each step.
///
/// Take it inside the capture, right after the launch, on the stream of the launch:
/// `auto node = kernel_node<float*, int>::last_captured(stream, scale_kernel);`. It checks that
/// the last work captured there is exactly one launch of that kernel. `set(exec, dims, args…)`
/// then makes every later replay of `exec` launch it with `dims` and `args` (replays already
/// enqueued keep the launch they had). `exec` must come from that capture; an `update()` from
/// another graph leaves it so, and a node set afterwards overrides the updated launch.
///
/// Arguments are converted to the kernel's parameter types as a launch converts them, and
/// copied when `set` returns.
template <typename... Params>
class kernel_node {
 public:
  /// @throws usage_error (the stream is not capturing; its last captured work is not exactly
  /// one launch of `kernel`), cuda_error
  [[nodiscard]] static kernel_node last_captured(cuda::stream_view stream,
                                                 void (*kernel)(Params...)) {
    return kernel_node{detail::last_captured_kernel(stream, reinterpret_cast<void const*>(kernel)),
                       kernel};
  }

  /// @brief Every later replay of `exec` launches this node with `dims` and `args`.
  /// @throws usage_error (`exec` is empty or not instantiated from this node's capture; an
  /// empty grid or block extent), cuda_error (CUDA refuses the configuration)
  template <typename... Args>
  void set(graph_exec& exec, launch_dims const& dims, Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params),
                  "kernel_node::set passes one argument per kernel parameter");
    std::tuple<std::decay_t<Params>...> values{std::forward<Args>(args)...};
    std::apply(
        [&](auto&... value) {
          std::array<void*, sizeof...(Params) + 1> pointers{static_cast<void*>(&value)..., nullptr};
          detail::set_kernel_launch(exec, node_, reinterpret_cast<void const*>(kernel_), dims,
                                    pointers.data());
        },
        values);
  }

  /// @brief The configuration the launch had when it was captured.
  [[nodiscard]] launch_dims const& captured_dims() const noexcept { return node_.captured; }
  [[nodiscard]] cudaGraphNode_t native_handle() const noexcept { return node_.node; }

 private:
  kernel_node(detail::captured_kernel node, void (*kernel)(Params...)) noexcept
      : node_{node}, kernel_{kernel} {}

  detail::captured_kernel node_;
  void (*kernel_)(Params...);
};

}  // namespace graphstep::graphs
