#pragma once

/// @file
/// @brief One kernel launch on the simulated device, with its arguments frozen.
///
/// A `<<<grid, block, shared, stream>>>` launch in a source built for the simulator becomes a
/// `kernel_task` handed to the simulated runtime (graphstep::sim::detail::enqueue_kernel), which
/// runs it in stream order, or records it as a kernel node while the stream is capturing. CUDA
/// copies a kernel's arguments when it is launched (or captured: "kernel node parameters are
/// copied into the node", cudaGraphAddKernelNode in cuda_runtime_api.h), so the task holds copies
/// of the argument values, never references to the caller's variables.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace graphstep::sim {

/// @brief A pointer argument of a kernel, for the stream-race checker.
struct pointer_argument {
  void const* address{};
  /// The parameter's pointee is const: the kernel may only read through it.
  bool read_only{};
  /// The bytes from `address` the kernel reads or writes, where its author knows them (a
  /// library's kernels: a collective's buffers, a matmul's matrices); 0 where unknown, which the
  /// checker takes as the first byte when the kernel's own accesses are not seen.
  std::size_t bytes{};
};

/// @brief One kernel parameter's place in the device-side parameter layout.
struct parameter_slot {
  std::size_t offset{};
  std::size_t size{};
};

/// @brief A launch with its configuration and a copy of its arguments.
class kernel_task {
 public:
  kernel_task(dim3 grid, dim3 block, std::size_t dynamic_shared_bytes) noexcept
      : grid_{grid}, block_{block}, dynamic_shared_bytes_{dynamic_shared_bytes} {}
  kernel_task(kernel_task const&) = delete;
  kernel_task& operator=(kernel_task const&) = delete;
  kernel_task(kernel_task&&) = delete;
  kernel_task& operator=(kernel_task&&) = delete;
  virtual ~kernel_task() = default;

  /// The kernel's name as written at the launch (for messages and DOT output).
  [[nodiscard]] virtual char const* name() const noexcept = 0;
  /// The kernel function's identity: two tasks launch the same kernel iff these are equal.
  [[nodiscard]] virtual void const* function() const noexcept = 0;
  /// Runs every thread of every block. Throws kernel_fault when the kernel does what a GPU would
  /// report as an error (a barrier not every thread of the block reaches, a misaligned access).
  virtual void run() const = 0;
  /// The pointer-typed arguments, in parameter order.
  [[nodiscard]] virtual std::vector<pointer_argument> pointer_arguments() const = 0;
  /// Whether the stream-race checker sees each byte the kernel reads and writes: its source was
  /// built with the instrumentation graphstep_cuda_sim_sources adds. Else it sees the
  /// pointer arguments.
  [[nodiscard]] virtual bool accesses_instrumented() const noexcept { return false; }
  /// A fresh task that launches the same kernel with the same arguments under another
  /// configuration (cudaGraphExecKernelNodeSetParams keeps arguments but may change dims).
  [[nodiscard]] virtual std::shared_ptr<kernel_task const> with_configuration(
      dim3 grid, dim3 block, std::size_t dynamic_shared_bytes) const = 0;
  /// The address of each argument's copy, in parameter order (cudaGraphKernelNodeGetParams'
  /// kernelParams); empty for a task whose parameters are not modelled (a library's kernels).
  [[nodiscard]] virtual bool arguments_modelled() const noexcept { return false; }
  [[nodiscard]] virtual std::vector<void*> argument_addresses() const { return {}; }
  /// Where each parameter lies in the device-side parameter layout (cudaFuncGetParamInfo):
  /// offsets in parameter order, each aligned to its type; empty where not modelled.
  [[nodiscard]] virtual std::vector<parameter_slot> parameter_layout() const { return {}; }
  /// A fresh task that launches the same kernel under `grid`, `block` and `dynamic_shared_bytes`
  /// with the arguments `arguments[i]` points to (cudaGraphExecKernelNodeSetParams'
  /// kernelParams, copied now); null for a task whose parameters are not modelled.
  [[nodiscard]] virtual std::shared_ptr<kernel_task const> with_arguments(
      void* const* /*arguments*/, dim3 /*grid*/, dim3 /*block*/,
      std::size_t /*dynamic_shared_bytes*/) const {
    return nullptr;
  }

  [[nodiscard]] dim3 grid() const noexcept { return grid_; }
  [[nodiscard]] dim3 block() const noexcept { return block_; }
  [[nodiscard]] std::size_t dynamic_shared_bytes() const noexcept { return dynamic_shared_bytes_; }

 private:
  dim3 grid_;
  dim3 block_;
  std::size_t dynamic_shared_bytes_;
};

/// @brief What a GPU reports as a fault while a kernel runs; the runtime turns it into a sticky
/// error (cudaErrorLaunchFailure and kin) and prints the message.
class kernel_fault : public std::runtime_error {
 public:
  kernel_fault(cudaError_t code, std::string const& message)
      : std::runtime_error{message}, code_{code} {}
  [[nodiscard]] cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

namespace detail {
/// Enqueues (or, on a capturing stream, records) a launch; sets the thread's last error on a bad
/// configuration or stream, as a `<<<...>>>` launch does. Defined by the simulated runtime.
void enqueue_kernel(cudaStream_t stream, std::shared_ptr<kernel_task const> task) noexcept;
/// cudaGraphSetConditional called from device code. Defined by the simulated runtime.
void set_conditional_from_device(unsigned long long handle, unsigned int value);
}  // namespace detail

}  // namespace graphstep::sim
