#pragma once

/// @file graphs/kernel_node.hpp
/// @brief `kernel_node` and `last_captured_launch`: one captured kernel launch whose grid and
/// arguments change between replays, without a new capture (`cudaGraphExecKernelNodeSetParams`).

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <graphstep/cuda/stream_view.hpp>
#include <graphstep/graphs/graph_exec.hpp>
#include <new>
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
/// The node a launch became and the capture it belongs to.
struct captured_kernel {
  cudaGraphNode_t node{};
  std::uint64_t capture_sequence{};
};
/// The launch just captured on a stream: its node, its configuration, and the address of each
/// argument's copy in the node (`cudaGraphKernelNodeGetParams`' `kernelParams`), to be read at
/// once: they are the node's, valid only while it is unchanged.
struct last_launch {
  captured_kernel kernel;
  launch_dims dims;
  void* const* arguments{};
};
/// @throws usage_error (not exactly one launch of `function` captured last on `stream`, or
/// its `parameters` arguments cannot be read), cuda_error
last_launch last_captured_kernel(cuda::stream_view stream, void const* function,
                                 std::size_t parameters);
/// @throws usage_error (`exec` empty or of another capture, an empty extent), cuda_error
void set_kernel_launch(graph_exec& exec, captured_kernel const& kernel, void const* function,
                       launch_dims const& dims, void** arguments);

/// A kernel argument read from the bytes a launch copied it to, as the launch copies it.
template <typename T>
T read_argument(void const* address) {
  static_assert(std::is_trivially_copyable_v<T>,
                "kernel_node: a kernel parameter type must be trivially copyable (a launch "
                "copies arguments byte for byte)");
  alignas(T) std::array<unsigned char, sizeof(T)> bytes{};
  std::memcpy(bytes.data(), address, sizeof(T));
  return *std::launder(reinterpret_cast<T const*>(bytes.data()));
}
}  // namespace detail

template <typename... Params>
class kernel_node;

/// @brief The kernel launch just captured on `stream`, as a `kernel_node` typed by `kernel`'s
/// parameters (deduced): `auto node = graphs::last_captured_launch(stream, scale_kernel);`.
///
/// Call it inside the capture, right after the launch, on the stream of the launch. The node
/// starts from the launch as captured: its grid, block, shared memory and arguments.
/// @throws usage_error (the stream is not capturing; its last captured work is not exactly one
/// launch of `kernel`; the launch passed its arguments in a way that cannot be read back),
/// cuda_error
template <typename... Params>
[[nodiscard]] kernel_node<Params...> last_captured_launch(cuda::stream_view stream,
                                                          void (*kernel)(Params...)) {
  return kernel_node<Params...>{
      detail::last_captured_kernel(stream, reinterpret_cast<void const*>(kernel),
                                   sizeof...(Params)),
      kernel};
}

/// @brief The type of `last_captured_launch(stream, kernel)`, for a node held past the capture
/// (`std::optional<graphs::kernel_node_for<scale_kernel>> node;`).
template <auto kernel>
using kernel_node_for = decltype(last_captured_launch(std::declval<cuda::stream_view>(), kernel));

/// @brief A kernel launch captured into a graph, typed by the kernel's parameters, whose
/// configuration and arguments an executable of that graph can change between replays: the
/// grid a batch needs, a seed, a count that host work computes each step.
///
/// Take it with `last_captured_launch(stream, kernel)` inside the capture. The node remembers
/// one launch: the captured one at first, then whatever it last set. Each setter changes what
/// it names in that launch and applies the whole launch to the executable given:
/// `set_argument<I>(exec, value)` one argument, `set_grid(exec, grid)` the grid,
/// `set_dims(exec, dims)` grid, block and shared memory, `set(exec, dims, args…)` everything.
/// Every later replay of `exec` runs that launch (replays already enqueued keep the launch they
/// had). A setter that throws leaves both the node and `exec` as they were.
///
/// Several executables of one capture (`graph::instantiate` twice): a set applies the node's
/// one launch, so a `set_grid(b, …)` after a `set_argument<0>(a, x)` gives `b` the argument `x`
/// too. Executables that run different launches each take their own copy of the node
/// (`auto node_b = node;`): a node is a small value, and each copy remembers its own launch.
///
/// `exec` must come from the capture the node was taken in; an `update()` from another graph
/// leaves it so, and a set afterwards applies the node's launch over the updated one.
/// Arguments are converted to the kernel's parameter types as a launch converts them, and
/// copied when a setter returns. Parameter types must be trivially copyable.
template <typename... Params>
class kernel_node {
 public:
  /// @brief The arguments as the node holds them, one per kernel parameter.
  using arguments_type = std::tuple<std::decay_t<Params>...>;

  /// @brief Every later replay of `exec` launches this node with `dims` and `args`, which the
  /// node remembers.
  /// @throws usage_error (`exec` is empty or not instantiated from this node's capture; an
  /// empty grid or block extent), cuda_error (CUDA refuses the configuration)
  template <typename... Args>
  void set(graph_exec& exec, launch_dims const& dims, Args&&... args) {
    static_assert(sizeof...(Args) == sizeof...(Params),
                  "kernel_node::set passes one argument per kernel parameter");
    apply(exec, dims, arguments_type{std::forward<Args>(args)...});
  }

  /// @brief Every later replay of `exec` launches this node with `dims` and the remembered
  /// arguments. @throws as `set`
  void set_dims(graph_exec& exec, launch_dims const& dims) { apply(exec, dims, arguments_); }

  /// @brief Every later replay of `exec` launches this node with `grid` and the remembered
  /// block, shared memory and arguments. @throws as `set`
  void set_grid(graph_exec& exec, dim3 grid) {
    launch_dims dims = dims_;
    dims.grid = grid;
    apply(exec, dims, arguments_);
  }

  /// @brief Every later replay of `exec` launches this node with `value` as argument `I` (the
  /// kernel's parameter index, from 0) and the remembered rest. An `I` past the last
  /// parameter does not compile. @throws as `set`
  template <std::size_t I, typename Arg>
  void set_argument(graph_exec& exec, Arg&& value) {
    static_assert(I < sizeof...(Params),
                  "kernel_node::set_argument<I>: I is past the kernel's last parameter");
    if constexpr (I < sizeof...(Params)) {
      using parameter = std::tuple_element_t<I, arguments_type>;
      static_assert(std::is_convertible_v<Arg&&, parameter>,
                    "kernel_node::set_argument<I>: the value does not convert to parameter I");
      arguments_type arguments = arguments_;
      std::get<I>(arguments) = static_cast<parameter>(std::forward<Arg>(value));
      apply(exec, dims_, arguments);
    }
  }

  /// @brief The remembered configuration: as captured, or as last set.
  [[nodiscard]] launch_dims const& dims() const noexcept { return dims_; }
  /// @brief The remembered arguments: as captured, or as last set.
  [[nodiscard]] arguments_type const& arguments() const noexcept { return arguments_; }
  [[nodiscard]] cudaGraphNode_t get() const noexcept { return node_.node; }

 private:
  friend kernel_node last_captured_launch<Params...>(cuda::stream_view, void (*)(Params...));

  kernel_node(detail::last_launch const& launch, void (*kernel)(Params...))
      : node_{launch.kernel},
        kernel_{kernel},
        dims_{launch.dims},
        arguments_{read_arguments(launch.arguments, std::index_sequence_for<Params...>{})} {}

  template <std::size_t... I>
  static arguments_type read_arguments([[maybe_unused]] void* const* addresses,
                                       std::index_sequence<I...> /*indices*/) {
    return arguments_type{detail::read_argument<std::decay_t<Params>>(addresses[I])...};
  }

  // Applies the whole launch to `exec`, then remembers it (not before: a refusal keeps both).
  void apply(graph_exec& exec, launch_dims const& dims, arguments_type arguments) {
    std::apply(
        [&](auto&... value) {
          std::array<void*, sizeof...(Params) + 1> pointers{static_cast<void*>(&value)..., nullptr};
          detail::set_kernel_launch(exec, node_, reinterpret_cast<void const*>(kernel_), dims,
                                    pointers.data());
        },
        arguments);
    dims_ = dims;
    arguments_ = std::move(arguments);
  }

  detail::captured_kernel node_;
  void (*kernel_)(Params...);
  launch_dims dims_;
  arguments_type arguments_;
};

}  // namespace graphstep::graphs
