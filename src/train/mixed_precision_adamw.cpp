#include <cuda_runtime_api.h>

#include <cstddef>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/mixed_precision_adamw.hpp>
#include <graphstep/train/multi_tensor.hpp>
#include <string>
#include <vector>

#include "train/detail/upload_table.hpp"
#include "train/mixed_adamw_kernels.hpp"

namespace graphstep::train {
namespace {

using detail::mixed_adamw_device_state;
using detail::mixed_tensor_slot;

}  // namespace

struct detail::mixed_adamw_plan {
  std::vector<tensor_chunk> chunks;
  std::vector<parameter_group> group_of_tensor;
  std::vector<std::size_t> first_element;
  std::size_t total{};
};

namespace {

detail::mixed_adamw_plan checked_plan(std::vector<mixed_parameter> const& parameters,
                                      std::vector<parameter_group> const& groups,
                                      mixed_adamw_options const& options,
                                      lr_schedule const& schedule, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!parameters.empty(), "mixed_precision_adamw: no parameter was given");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "mixed_precision_adamw: construct it before the capture; it allocates and "
                    "uploads its tables, which a capture cannot record");
  validate(options);
  validate(schedule);
  detail::mixed_adamw_plan plan;
  std::vector<std::size_t> counts;
  std::vector<std::uint32_t> group_indices;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    auto const& p = parameters[i];
    GRAPHSTEP_EXPECTS(p.value != nullptr && p.gradient != nullptr,
                      "mixed_precision_adamw: parameter " + std::to_string(i) +
                          " has a null value or gradient pointer");
    GRAPHSTEP_EXPECTS(!options.stochastic_rounding || p.type != dtype::float16,
                      "mixed_precision_adamw: parameter " + std::to_string(i) +
                          " is float16, and stochastic rounding is implemented for bfloat16 "
                          "weights only; turn it off or keep that tensor in bfloat16");
    counts.push_back(p.count);
    group_indices.push_back(p.group);
    plan.first_element.push_back(plan.total);
    plan.total += p.count;
  }
  plan.group_of_tensor = plan_parameter_groups(groups, group_indices);
  plan.chunks = plan_chunks(counts);  // refuses an empty tensor
  return plan;
}

}  // namespace

mixed_precision_adamw::mixed_precision_adamw(
    std::vector<mixed_parameter> const& parameters, std::vector<parameter_group> const& groups,
    mixed_adamw_options const& options, lr_schedule const& schedule,
    gradient_scaling const& scaling, cuda::stream_view stream, cuda::memory_resource& resource)
    : mixed_precision_adamw{checked_plan(parameters, groups, options, schedule, stream),
                            parameters,
                            options,
                            schedule,
                            scaling,
                            stream,
                            resource} {}

mixed_precision_adamw::mixed_precision_adamw(
    detail::mixed_adamw_plan const& plan, std::vector<mixed_parameter> const& parameters,
    mixed_adamw_options const& options, lr_schedule const& schedule,
    gradient_scaling const& scaling, cuda::stream_view stream, cuda::memory_resource& resource)
    : options_{options},
      scaling_{scaling},
      chunk_count_{plan.chunks.size()},
      first_element_{plan.first_element},
      state_{sizeof(mixed_adamw_device_state), stream, resource},
      slots_{sizeof(mixed_tensor_slot) * parameters.size(), stream, resource},
      chunks_{sizeof(tensor_chunk) * plan.chunks.size(), stream, resource},
      // Only clipping needs the norm, and so the partial sums.
      partials_{options.max_grad_norm > 0.0F ? sizeof(float) * plan.chunks.size() : 0, stream,
                resource},
      buffers_{sizeof(float) * plan.total * 3, stream, resource} {
  auto* const buffers = static_cast<float*>(buffers_.data());
  // The moments start at zero as in PyTorch; the master weights are filled below.
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(buffers, 0, buffers_.size(), stream.value()));
  std::vector<mixed_tensor_slot> slots;
  for (std::size_t t = 0; t < parameters.size(); ++t) {
    auto const& p = parameters[t];
    std::size_t const first = plan.first_element[t];
    slots.push_back({p.value, p.gradient, buffers + first, buffers + plan.total + first,
                     buffers + 2 * plan.total + first, first, plan.group_of_tensor[t].weight_decay,
                     plan.group_of_tensor[t].lr_multiplier, static_cast<std::int32_t>(p.type), 0});
  }
  mixed_adamw_device_state host_state;
  host_state.seed = options.seed;
  host_state.schedule = schedule;
  detail::upload_table(slots_, slots.data(), slots.size(), stream);
  detail::upload_table(chunks_, plan.chunks.data(), plan.chunks.size(), stream);
  detail::upload_table(state_, &host_state, 1, stream);
  detail::launch_mixed_master_init(static_cast<mixed_tensor_slot const*>(slots_.data()),
                                   static_cast<tensor_chunk const*>(chunks_.data()), chunk_count_,
                                   stream);
  // The host vectors go away on return, and every stream may use the memory (its allocation
  // was ordered on `stream`).
  stream.synchronize();
}

void mixed_precision_adamw::step(cuda::stream_view stream) const {
  auto const* slots = static_cast<mixed_tensor_slot const*>(slots_.data());
  auto const* chunks = static_cast<tensor_chunk const*>(chunks_.data());
  auto* state = static_cast<mixed_adamw_device_state*>(state_.data());
  auto* partials = static_cast<float*>(partials_.data());
  std::size_t const partial_count = partials_.empty() ? 0 : chunk_count_;
  if (partial_count > 0) {
    detail::launch_mixed_norm_partials(slots, chunks, chunk_count_, scaling_.loss_scale, partials,
                                       stream);
  }
  detail::launch_mixed_finalize(state, partials, partial_count, scaling_.loss_scale,
                                scaling_.all_finite, options_, stream);
  detail::launch_mixed_adamw(slots, chunks, chunk_count_, state, options_, stream);
}

void mixed_precision_adamw::set_schedule(lr_schedule const& schedule, cuda::stream_view stream) {
  validate(schedule);
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "mixed_precision_adamw::set_schedule inside a capture would freeze the "
                    "schedule into the graph; call it between replays");
  auto* const to =
      static_cast<unsigned char*>(state_.data()) + offsetof(mixed_adamw_device_state, schedule);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(to, &schedule, sizeof schedule, cudaMemcpyHostToDevice, stream.value()));
  stream.synchronize();  // `schedule` may be gone before a later copy would run
}

void mixed_precision_adamw::read_learning_rate_from(float const* learning_rate,
                                                    cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "mixed_precision_adamw::read_learning_rate_from inside a capture would record "
                    "the host's copy of the address; call it between replays (graphs captured "
                    "before it read the new source too)");
  auto* const to = static_cast<unsigned char*>(state_.data()) +
                   offsetof(mixed_adamw_device_state, learning_rate);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(to, &learning_rate, sizeof learning_rate,
                                     cudaMemcpyHostToDevice, stream.value()));
  stream.synchronize();  // `learning_rate` is a local: the copy must have read it
}

template <typename T>
T mixed_precision_adamw::read(std::size_t offset, cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "mixed_precision_adamw: reading its state inside a capture would record the "
                    "host address; read it after the replay");
  T value{};
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(&value,
                                     static_cast<unsigned char const*>(state_.data()) + offset,
                                     sizeof value, cudaMemcpyDeviceToHost, stream.value()));
  stream.synchronize();
  return value;
}

std::int64_t mixed_precision_adamw::steps_taken(cuda::stream_view stream) const {
  return read<std::int64_t>(offsetof(mixed_adamw_device_state, step), stream);
}

float mixed_precision_adamw::last_gradient_norm(cuda::stream_view stream) const {
  return read<float>(offsetof(mixed_adamw_device_state, gradient_norm), stream);
}

float const* mixed_precision_adamw::master_weights(std::size_t tensor) const {
  GRAPHSTEP_EXPECTS(tensor < first_element_.size(),
                    "mixed_precision_adamw::master_weights: tensor " + std::to_string(tensor) +
                        " does not exist; the optimizer has " +
                        std::to_string(first_element_.size()));
  return static_cast<float const*>(buffers_.data()) + first_element_[tensor];
}

}  // namespace graphstep::train
