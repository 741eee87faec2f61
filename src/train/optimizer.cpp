#include <cuda_runtime_api.h>

#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/optimizer.hpp>
#include <string>

#include "train/train_kernels.hpp"

namespace graphstep::train {
namespace detail {

using detail::optimizer_device_state;
using detail::tensor_slot;

namespace {

// What the constructor checks and plans before it allocates anything.
struct table_plan {
  std::vector<tensor_chunk> chunks;
  std::size_t total{};  // elements of all tensors
};

table_plan checked_plan(std::vector<parameter> const& parameters, lr_schedule const& schedule,
                        cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!parameters.empty(), "optimizer: no parameter was given");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "optimizer: construct it before the capture; it allocates and uploads "
                    "its tables, which a capture cannot record");
  validate(schedule);
  std::vector<std::size_t> counts;
  std::size_t total = 0;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    auto const& p = parameters[i];
    validate(p, i, "optimizer");
    GRAPHSTEP_EXPECTS(p.value.type() == dtype::float32,
                      "optimizer: parameter " + std::to_string(i) + " is " + name(p.value.type()) +
                          "; sgd and adam update float32 tensors (mixed_precision_adamw takes "
                          "bfloat16 and float16 ones)");
    GRAPHSTEP_EXPECTS(p.group == 0, "optimizer: parameter " + std::to_string(i) + " names group " +
                                        std::to_string(p.group) +
                                        "; sgd and adam have one group, 0 (mixed_precision_adamw "
                                        "takes parameter groups)");
    counts.push_back(p.value.count());
    total += p.value.count();
  }
  return {plan_chunks(counts), total};
}

}  // namespace

// Device memory and tables shared by every multi-tensor optimizer.
class multi_tensor_optimizer {
 public:
  multi_tensor_optimizer(std::vector<parameter> const& parameters, int state_buffers,
                         lr_schedule const& schedule, gradient_scaling const& scaling,
                         cuda::stream_view stream, cuda::memory_resource& resource)
      : multi_tensor_optimizer{checked_plan(parameters, schedule, stream),
                               parameters,
                               state_buffers,
                               schedule,
                               scaling,
                               stream,
                               resource} {}

  multi_tensor_optimizer(multi_tensor_optimizer const&) = delete;
  multi_tensor_optimizer& operator=(multi_tensor_optimizer const&) = delete;
  multi_tensor_optimizer(multi_tensor_optimizer&&) = delete;
  multi_tensor_optimizer& operator=(multi_tensor_optimizer&&) = delete;
  ~multi_tensor_optimizer() = default;

  void set_schedule(lr_schedule const& schedule, cuda::stream_view stream) {
    validate(schedule);
    expect_not_capturing(stream, "set_schedule");
    host_state_.schedule = schedule;
    write_state_tail(stream);
  }

  [[nodiscard]] std::int64_t steps_taken(cuda::stream_view stream) const {
    std::int64_t step = 0;
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(&step, &state()->step, sizeof step, cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    return step;
  }

  [[nodiscard]] optimizer_device_state* state() const noexcept {
    return static_cast<optimizer_device_state*>(state_.data());
  }
  [[nodiscard]] tensor_slot const* slots() const noexcept {
    return static_cast<tensor_slot const*>(slots_.data());
  }
  [[nodiscard]] tensor_chunk const* chunks() const noexcept {
    return static_cast<tensor_chunk const*>(chunks_.data());
  }
  [[nodiscard]] std::size_t chunk_count() const noexcept { return chunk_count_; }
  [[nodiscard]] gradient_scaling const& scaling() const noexcept { return scaling_; }

 private:
  // One allocation per purpose, checked and planned first (see checked_plan).
  multi_tensor_optimizer(table_plan const& plan, std::vector<parameter> const& parameters,
                         int state_buffers, lr_schedule const& schedule,
                         gradient_scaling const& scaling, cuda::stream_view stream,
                         cuda::memory_resource& resource)
      : host_state_{0, 1.0F, 0U, schedule},
        scaling_{scaling},
        state_{sizeof(optimizer_device_state), stream, resource},
        slots_{sizeof(tensor_slot) * parameters.size(), stream, resource},
        chunks_{sizeof(tensor_chunk) * plan.chunks.size(), stream, resource},
        // Empty for SGD without momentum.
        buffers_{sizeof(float) * plan.total * static_cast<std::size_t>(state_buffers), stream,
                 resource},
        chunk_count_{plan.chunks.size()} {
    auto* const buffers = static_cast<float*>(buffers_.data());
    // State buffers start at zero as in PyTorch.
    if (!buffers_.empty()) {
      GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(buffers, 0, buffers_.size(), stream.get()));
    }
    std::vector<tensor_slot> slots;
    std::size_t offset = 0;
    for (auto const& p : parameters) {
      float* state1 = state_buffers > 0 ? buffers + offset : nullptr;
      float* state2 = state_buffers > 1 ? buffers + plan.total + offset : nullptr;
      slots.push_back({static_cast<float*>(p.value.data()),
                       static_cast<float const*>(p.gradient.data()), state1, state2,
                       p.value.count()});
      offset += p.value.count();
    }
    upload(slots_, slots.data(), slots.size(), stream);
    upload(chunks_, plan.chunks.data(), plan.chunks.size(), stream);
    upload(state_, &host_state_, 1, stream);
    // The host vectors above go away on return, and every stream may use the memory (its
    // allocation was ordered on `stream`).
    stream.synchronize();
  }

  template <typename T>
  static void upload(cuda::device_buffer const& device, T const* host, std::size_t count,
                     cuda::stream_view stream) {
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(device.data(), host, sizeof(T) * count,
                                       cudaMemcpyHostToDevice, stream.get()));
  }
  static void expect_not_capturing(cuda::stream_view stream, char const* what) {
    GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                      std::string{"optimizer::"} + what +
                          " inside a capture would freeze the value into the graph; call it "
                          "between replays");
  }
  // The schedule: the rest belongs to the device.
  void write_state_tail(cuda::stream_view stream) {
    constexpr std::size_t skip = offsetof(optimizer_device_state, schedule);
    auto const* from = reinterpret_cast<unsigned char const*>(&host_state_) + skip;
    auto* to = reinterpret_cast<unsigned char*>(state()) + skip;
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(to, from, sizeof host_state_ - skip, cudaMemcpyHostToDevice, stream.get()));
    stream.synchronize();  // host_state_ may change again before a later copy would run
  }

  optimizer_device_state host_state_{};
  gradient_scaling scaling_;
  cuda::device_buffer state_;    // optimizer_device_state
  cuda::device_buffer slots_;    // tensor_slot, one per parameter
  cuda::device_buffer chunks_;   // tensor_chunk
  cuda::device_buffer buffers_;  // state_buffers × all elements, float
  std::size_t chunk_count_{};
};

}  // namespace detail

namespace {
// State buffers each optimizer needs per element, after checking its options.
int state_buffers(sgd_options const& options) {
  validate(options);
  return options.momentum != 0.0F ? 1 : 0;  // the momentum buffer
}
int state_buffers(adam_options const& options) {
  validate(options);
  return 2;  // exp_avg and exp_avg_sq
}
}  // namespace

optimizer::optimizer(std::vector<parameter> const& parameters, int state_buffers,
                     lr_schedule const& schedule, gradient_scaling const& scaling,
                     cuda::stream_view stream, cuda::memory_resource& resource)
    : impl_{std::make_unique<detail::multi_tensor_optimizer>(parameters, state_buffers, schedule,
                                                             scaling, stream, resource)} {}
optimizer::~optimizer() = default;
optimizer::optimizer(optimizer&&) noexcept = default;
optimizer& optimizer::operator=(optimizer&&) noexcept = default;

detail::multi_tensor_optimizer& optimizer::impl() const {
  GRAPHSTEP_EXPECTS(impl_ != nullptr, "optimizer: this optimizer was moved from");
  return *impl_;
}

void optimizer::step(cuda::stream_view stream) {
  detail::launch_advance_step(impl().state(), impl().scaling(), stream);
  launch_update(stream);
}
void optimizer::set_schedule(lr_schedule const& schedule, cuda::stream_view stream) {
  impl().set_schedule(schedule, stream);
}
std::int64_t optimizer::steps_taken(cuda::stream_view stream) const {
  return impl().steps_taken(stream);
}

sgd::sgd(std::vector<parameter> const& parameters, sgd_options const& options,
         lr_schedule const& schedule, gradient_scaling const& scaling, cuda::stream_view stream,
         cuda::memory_resource& resource)
    : optimizer{parameters, state_buffers(options), schedule, scaling, stream, resource},
      options_{options} {}

void sgd::launch_update(cuda::stream_view stream) {
  auto& state = impl();
  detail::launch_sgd(state.slots(), state.chunks(), state.chunk_count(), state.state(), options_,
                     stream);
}

adam::adam(std::vector<parameter> const& parameters, adam_options const& options,
           lr_schedule const& schedule, gradient_scaling const& scaling, cuda::stream_view stream,
           cuda::memory_resource& resource)
    : optimizer{parameters, state_buffers(options), schedule, scaling, stream, resource},
      options_{options} {}

void adam::launch_update(cuda::stream_view stream) {
  auto& state = impl();
  detail::launch_adam(state.slots(), state.chunks(), state.chunk_count(), state.state(), options_,
                      stream);
}

}  // namespace graphstep::train
