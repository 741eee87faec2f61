#pragma once

/// @file
/// @brief The launch route of the simulated device: what `kernel<<<cfg>>>(args)` becomes.
///
/// graphstep::rewrite_launches turns `kernel<<<grid, block, shared, stream>>>(args...)` into
/// `::graphstep::sim::launcher(kernel, ::graphstep::sim::launch_config(grid, block, shared,
/// stream), "kernel")(args...)`. The launcher converts each argument to the kernel's parameter
/// type, as the call would, copies the values into a kernel_task (CUDA copies a kernel's
/// arguments at launch), and hands it to the simulated runtime.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "graphstep/sim/kernel_task.hpp"

namespace graphstep::sim {

/// @brief The `<<<grid, block, shared bytes, stream>>>` of a launch, with CUDA's defaults.
struct launch_config {
  launch_config(dim3 grid_size, dim3 block_size, std::size_t shared_bytes = 0,
                cudaStream_t launch_stream = nullptr) noexcept
      : grid{grid_size},
        block{block_size},
        dynamic_shared_bytes{shared_bytes},
        stream{launch_stream} {}
  dim3 grid;
  dim3 block;
  std::size_t dynamic_shared_bytes;
  cudaStream_t stream;
};

/// @brief Whether the stream-race checker sees every byte this source's kernels read and write:
/// the source was compiled with the compiler's ThreadSanitizer instrumentation, which
/// graphstep_cuda_sim_sources turns on (the simulator defines its entry points). Otherwise the
/// checker sees each kernel's pointer arguments. Every source of a build is compiled one way, so
/// kernel_launch instances shared between sources agree.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kernel_accesses_instrumented = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kernel_accesses_instrumented = true;
#else
inline constexpr bool kernel_accesses_instrumented = false;
#endif
#else
inline constexpr bool kernel_accesses_instrumented = false;
#endif

/// Code the race checker's access instrumentation leaves out: the simulator's own reads of its
/// own data, in functions instantiated in kernel sources.
#define GRAPHSTEP_SIM_UNWATCHED __attribute__((no_sanitize("thread")))

namespace detail {

/// Runs `thread_body(context)` once for every thread of every block of the grid, with the
/// thread's indices set (defined by the simulator's grid runner).
void run_grid(kernel_task const& task, void (*thread_body)(void const*), void const* context);

template <typename T>
void add_pointer_argument(std::vector<pointer_argument>& out, T const& value) {
  if constexpr (std::is_pointer_v<T>) {
    using pointee = std::remove_pointer_t<T>;
    // Through `const volatile` first: a kernel may take a pointer to volatile (a flag polled
    // across blocks); the checker only needs the address.
    void const volatile* const address = value;
    out.push_back(pointer_argument{const_cast<void const*>(address), std::is_const_v<pointee>});
  }
}

// An argument converted to its parameter's type as a call converts it (implicitly).
template <typename Parameter, typename Argument>
Parameter convert(Argument&& argument) {
  return std::forward<Argument>(argument);
}

template <typename... Parameters>
class kernel_launch final : public kernel_task {
 public:
  using function_type = void (*)(Parameters...);
  using values = std::tuple<std::decay_t<Parameters>...>;

  kernel_launch(function_type function, char const* name, launch_config const& config,
                values arguments)
      : kernel_task{config.grid, config.block, config.dynamic_shared_bytes},
        function_{function},
        name_{name},
        arguments_{std::move(arguments)} {
    std::size_t next = 0;
    std::apply([&](auto const&... value) { ((addresses_[next++] = &value), ...); }, arguments_);
    static_cast<void>(next);  // a kernel without parameters has no address to place
  }

  [[nodiscard]] char const* name() const noexcept override { return name_; }
  [[nodiscard]] void const* function() const noexcept override {
    return reinterpret_cast<void const*>(function_);
  }
  void run() const override { run_grid(*this, &kernel_launch::run_thread, this); }
  [[nodiscard]] std::vector<pointer_argument> pointer_arguments() const override {
    std::vector<pointer_argument> out;
    std::apply([&](auto const&... value) { (add_pointer_argument(out, value), ...); }, arguments_);
    return out;
  }
  [[nodiscard]] bool accesses_instrumented() const noexcept override {
    return kernel_accesses_instrumented;
  }
  [[nodiscard]] std::shared_ptr<kernel_task const> with_configuration(
      dim3 grid, dim3 block, std::size_t dynamic_shared_bytes) const override {
    return std::make_shared<kernel_launch>(
        function_, name_, launch_config{grid, block, dynamic_shared_bytes}, arguments_);
  }
  [[nodiscard]] bool arguments_modelled() const noexcept override { return true; }
  [[nodiscard]] std::vector<void*> argument_addresses() const override {
    std::vector<void*> out;
    // The node owns these copies; CUDA hands out its own storage the same way.
    std::apply(
        [&](auto const&... value) {
          (out.push_back(const_cast<void*>(static_cast<void const*>(&value))), ...);
        },
        arguments_);
    return out;
  }
  [[nodiscard]] std::vector<parameter_slot> parameter_layout() const override {
    // Each parameter at the next offset aligned to its type, as a struct of the parameters
    // would lay them out (what cudaFuncGetParamInfo reports on a GPU for these types).
    std::vector<parameter_slot> out;
    std::size_t end = 0;
    auto const place = [&](std::size_t size, std::size_t alignment) {
      std::size_t const offset = (end + alignment - 1) / alignment * alignment;
      out.push_back(parameter_slot{offset, size});
      end = offset + size;
    };
    (place(sizeof(std::decay_t<Parameters>), alignof(std::decay_t<Parameters>)), ...);
    static_cast<void>(place);  // a kernel without parameters places none
    return out;
  }
  [[nodiscard]] std::shared_ptr<kernel_task const> with_arguments(
      void* const* arguments, dim3 grid, dim3 block,
      std::size_t dynamic_shared_bytes) const override {
    return std::make_shared<kernel_launch>(
        function_, name_, launch_config{grid, block, dynamic_shared_bytes},
        read(arguments, std::index_sequence_for<Parameters...>{}));
  }

 private:
  // One thread of the kernel. Each thread gets its own copies of the parameters, as a kernel's
  // parameters are its own; the copies are read from this task, never from device memory, so
  // they are left out of the race checker's access instrumentation, which would otherwise see
  // every argument of every thread (and a call inlined here would be instrumented: none is).
  GRAPHSTEP_SIM_UNWATCHED static void run_thread(void const* self) {
    static_cast<kernel_launch const*>(self)->call(std::index_sequence_for<Parameters...>{});
  }
  template <std::size_t... Index>
  GRAPHSTEP_SIM_UNWATCHED void call(std::index_sequence<Index...> /*unused*/) const {
    function_(*static_cast<std::tuple_element_t<Index, values> const*>(addresses_[Index])...);
  }

  // Each parameter's value, read as its own type from where `arguments` points.
  template <std::size_t... Index>
  static values read(void* const* arguments, std::index_sequence<Index...> /*unused*/) {
    return values{*static_cast<std::tuple_element_t<Index, values> const*>(arguments[Index])...};
  }

  function_type function_;
  char const* name_;
  values arguments_;
  // Where each argument lies in arguments_ (a plain array: its reads need no call).
  void const* addresses_[sizeof...(Parameters) + 1]{};  // NOLINT(*-avoid-c-arrays)
};

template <typename... Parameters>
class launch_call {
 public:
  launch_call(void (*function)(Parameters...), launch_config const& config, char const* name)
      : function_{function}, config_{config}, name_{name} {}

  template <typename... Arguments>
  void operator()(Arguments&&... arguments) const {
    static_assert(sizeof...(Arguments) == sizeof...(Parameters),
                  "a kernel launch passes one argument per kernel parameter");
    typename kernel_launch<Parameters...>::values values{
        convert<std::decay_t<Parameters>>(std::forward<Arguments>(arguments))...};
    enqueue_kernel(config_.stream, std::make_shared<kernel_launch<Parameters...>>(
                                       function_, name_, config_, std::move(values)));
  }

 private:
  void (*function_)(Parameters...);
  launch_config config_;
  char const* name_;
};

}  // namespace detail

/// @brief The launch of `function` under `config`; call the result with the kernel's arguments.
template <typename... Parameters>
detail::launch_call<Parameters...> launcher(void (*function)(Parameters...),
                                            launch_config const& config, char const* name) {
  return detail::launch_call<Parameters...>{function, config, name};
}

/// @brief The first parameter of the declaration graphstep::rewrite_launches adds beside each
/// kernel `k`, `auto graphstep_sim_signature_of_k(kernel_signature, <k's parameters>) ->
/// void (*)(<the same>)`, with k's template head: called unevaluated with a launch's arguments,
/// it gives the type of the kernel a call would choose (deduced template arguments, resolved
/// overloads).
struct kernel_signature {};

namespace detail {

template <typename...>
inline constexpr bool always_false = false;

// Takes the address of the kernel whose type is `Function` (C++ [over.over]: the target type
// chooses among overloads and deduces a template's arguments).
// The address lambda's return type is that of `take(kernel)`, and it returns `kernel`
// converted to it.
template <typename Function>
struct address_as {
  Function operator()(Function function) const noexcept;
};

// Takes the address of the one function of its name (a kernel the rewriter did not see).
struct address_of_the_only {
  template <typename... Parameters>
  auto operator()(void (*function)(Parameters...)) const noexcept -> void (*)(Parameters...);
};

template <typename Signature, typename... Arguments>
constexpr bool chosen_by_signature() {
  if constexpr (std::is_invocable_v<Signature const&, Arguments&&...>) {
    return std::is_pointer_v<std::invoke_result_t<Signature const&, Arguments&&...>>;
  } else {
    return false;
  }
}

// A launch whose kernel is chosen by its arguments, as a call chooses it.
template <typename Signature, typename Address>
class chosen_launch_call {
 public:
  chosen_launch_call(Signature signature, Address address, launch_config const& config,
                     char const* name)
      : signature_{signature}, address_{address}, config_{config}, name_{name} {}

  template <typename... Arguments>
  void operator()(Arguments&&... arguments) const {
    if constexpr (chosen_by_signature<Signature, Arguments...>()) {
      using function_type = std::invoke_result_t<Signature const&, Arguments&&...>;
      launcher(address_(address_as<function_type>{}), config_,
               name_)(std::forward<Arguments>(arguments)...);
    } else if constexpr (std::is_invocable_v<Address const&, address_of_the_only>) {
      launcher(address_(address_of_the_only{}), config_,
               name_)(std::forward<Arguments>(arguments)...);
    } else {
      static_assert(always_false<Arguments...>,
                    "kernel<<<...>>>(args): no kernel of this name takes these arguments, or "
                    "several overloads take them equally well (ambiguous, as the same call "
                    "would be): convert the arguments or name the template arguments "
                    "(kernel<T><<<...>>>); the next error names the candidates");
      // The same choice made outside SFINAE, for the compiler to say why it fails.
      static_cast<void>(signature_(std::forward<Arguments>(arguments)...));
    }
  }

 private:
  Signature signature_;
  Address address_;
  launch_config config_;
  char const* name_;
};

}  // namespace detail

/// @brief The launch of the kernel a call with the launch's arguments would choose: `signature`
/// and `address` are the two lambdas graphstep::rewrite_launches writes at each launch.
template <typename Signature, typename Address>
detail::chosen_launch_call<Signature, Address> launcher(Signature signature, Address address,
                                                        launch_config const& config,
                                                        char const* name) {
  return detail::chosen_launch_call<Signature, Address>{signature, address, config, name};
}

}  // namespace graphstep::sim
