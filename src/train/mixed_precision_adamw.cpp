#include <cuda_runtime_api.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <graphstep/cuda/check.hpp>
#include <graphstep/error.hpp>
#include <graphstep/graphs/conditional.hpp>
#include <graphstep/graphs/conditional_support.hpp>
#include <graphstep/train/detail/multi_tensor.hpp>
#include <graphstep/train/device_checkpoint.hpp>
#include <graphstep/train/loss_scaler.hpp>
#include <graphstep/train/mixed_precision_adamw.hpp>
#include <initializer_list>
#include <string>
#include <vector>

#include "train/detail/optimizer_state.hpp"
#include "train/detail/upload_table.hpp"
#include "train/mixed_adamw_kernels.hpp"

namespace graphstep::train {
namespace {

// A captured step skips its update with a conditional node where a step can be skipped and the
// driver runs conditional nodes (12.4 and newer); elsewhere the update kernel returns at once
// on a skipped step, which computes the same.
bool conditional_update(mixed_adamw_options const& options, loss_scaler const* scaler) {
  if (!detail::step_may_be_skipped(scaler != nullptr, options.max_grad_norm, options.skip_norm)) {
    return false;
  }
  int driver_version = 0;
  GRAPHSTEP_CUDA_TRY(cudaDriverGetVersion(&driver_version));
  return graphs::conditional_nodes_unsupported_reason(driver_version).empty();
}

using detail::mixed_adamw_device_state;
using detail::mixed_tensor_slot;
using detail::plan_chunks;
using detail::tensor_chunk;

// What a checkpoint keeps of the device state: the rest is derived each step, or configuration.
struct saved_counters {
  std::int64_t step;
  double beta1_power;
  double beta2_power;
};
static_assert(sizeof(saved_counters) == 24, "no padding: its bytes are saved as they are");
static_assert(offsetof(mixed_adamw_device_state, beta2_power) ==
                  offsetof(mixed_adamw_device_state, beta1_power) + sizeof(double),
              "the beta products are copied as one range");

// The checkpoint entries of tensor t, in the order save_to adds them.
struct tensor_entries {
  std::string master, exp_avg, exp_avg_sq;
};
tensor_entries entries_of(std::string const& prefix, std::size_t t) {
  return {detail::state_entry(prefix, t, "master"), detail::state_entry(prefix, t, "exp_avg"),
          detail::state_entry(prefix, t, "exp_avg_sq")};
}

// Elements of tensor t, from where each tensor starts among all `total` elements.
std::int64_t tensor_elements(std::vector<std::size_t> const& first, std::size_t total,
                             std::size_t t) {
  std::size_t const end = t + 1 < first.size() ? first[t + 1] : total;
  return static_cast<std::int64_t>(end - first[t]);
}

}  // namespace

struct detail::mixed_adamw_plan {
  std::vector<tensor_chunk> chunks;
  std::vector<parameter_group> group_of_tensor;
  std::vector<std::size_t> first_element;
  std::size_t total{};
};

namespace {

detail::mixed_adamw_plan checked_plan(std::vector<parameter> const& parameters,
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
    validate(p, i, "mixed_precision_adamw");
    GRAPHSTEP_EXPECTS(!options.stochastic_rounding || p.value.type() != dtype::float16,
                      "mixed_precision_adamw: parameter " + std::to_string(i) +
                          " is float16, and stochastic rounding is implemented for bfloat16 "
                          "weights only; turn it off or keep that tensor in bfloat16");
    counts.push_back(p.value.count());
    group_indices.push_back(p.group);
    plan.first_element.push_back(plan.total);
    plan.total += p.value.count();
  }
  plan.group_of_tensor = plan_parameter_groups(groups, group_indices);
  plan.chunks = plan_chunks(counts);  // refuses an empty tensor
  return plan;
}

}  // namespace

mixed_precision_adamw::mixed_precision_adamw(std::vector<parameter> const& parameters,
                                             std::vector<parameter_group> const& groups,
                                             mixed_adamw_options const& options,
                                             lr_schedule const& schedule, loss_scaler const* scaler,
                                             cuda::stream_view stream,
                                             cuda::memory_resource& resource)
    : mixed_precision_adamw{checked_plan(parameters, groups, options, schedule, stream),
                            parameters,
                            options,
                            schedule,
                            scaler,
                            stream,
                            resource} {}

mixed_precision_adamw::mixed_precision_adamw(memory::parameter_buffer& weights,
                                             memory::parameter_buffer const& gradients,
                                             std::vector<parameter_group> const& groups,
                                             mixed_adamw_options const& options,
                                             lr_schedule const& schedule, loss_scaler const* scaler,
                                             cuda::stream_view stream,
                                             cuda::memory_resource& resource)
    : mixed_precision_adamw{
          detail::buffer_parameters(weights, gradients, "mixed_precision_adamw"),
          groups,
          options,
          schedule,
          scaler,
          stream,
          resource} {}

mixed_precision_adamw::mixed_precision_adamw(detail::mixed_adamw_plan const& plan,
                                             std::vector<parameter> const& parameters,
                                             mixed_adamw_options const& options,
                                             lr_schedule const& schedule, loss_scaler const* scaler,
                                             cuda::stream_view stream,
                                             cuda::memory_resource& resource)
    : optimizer{"mixed_precision_adamw"},
      options_{options},
      loss_scale_{scaler != nullptr ? scaler->scale() : nullptr},
      all_finite_{scaler != nullptr ? scaler->all_finite() : nullptr},
      chunk_count_{plan.chunks.size()},
      first_element_{plan.first_element},
      state_{sizeof(mixed_adamw_device_state), stream, resource},
      slots_{sizeof(mixed_tensor_slot) * parameters.size(), stream, resource},
      chunks_{sizeof(tensor_chunk) * plan.chunks.size(), stream, resource},
      // Only clipping and a skip threshold need the norm, and so the partial sums.
      partials_{options.max_grad_norm > 0.0F || std::isfinite(options.skip_norm)
                    ? sizeof(float) * plan.chunks.size()
                    : 0,
                stream, resource},
      buffers_{sizeof(float) * plan.total * 3, stream, resource},
      conditional_update_{conditional_update(options, scaler)} {
  auto* const buffers = static_cast<float*>(buffers_.data());
  // The moments start at zero as in PyTorch; the master weights are filled below.
  GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(buffers, 0, buffers_.size(), stream.get()));
  std::vector<mixed_tensor_slot> slots;
  for (std::size_t t = 0; t < parameters.size(); ++t) {
    auto const& p = parameters[t];
    std::size_t const first = plan.first_element[t];
    slots.push_back({p.value.data(), p.gradient.data(), buffers + first,
                     buffers + plan.total + first, buffers + 2 * plan.total + first, first,
                     plan.group_of_tensor[t].weight_decay, plan.group_of_tensor[t].lr_multiplier,
                     static_cast<std::int32_t>(p.value.type()), 0});
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

void mixed_precision_adamw::do_step(cuda::stream_view stream) {
  auto const* slots = static_cast<mixed_tensor_slot const*>(slots_.data());
  auto const* chunks = static_cast<tensor_chunk const*>(chunks_.data());
  auto* state = static_cast<mixed_adamw_device_state*>(state_.data());
  auto* partials = static_cast<float*>(partials_.data());
  std::size_t const partial_count = partials_.empty() ? 0 : chunk_count_;
  if (partial_count > 0) {
    detail::launch_mixed_norm_partials(slots, chunks, chunk_count_, loss_scale_, partials, stream);
  }
  detail::launch_mixed_finalize(state, partials, partial_count, loss_scale_, all_finite_, options_,
                                stream);
  auto const update = [&](cuda::stream_view on) {
    detail::launch_mixed_adamw(slots, chunks, chunk_count_, state, options_, on);
  };
  if (stream.is_capturing() && conditional_update_) {
    // A skipped step then launches no update at all; eagerly the kernel returns at once.
    graphs::capture_if(stream, &state->apply, update);
  } else {
    update(stream);
  }
}

void mixed_precision_adamw::do_set_schedule(lr_schedule const& schedule, cuda::stream_view stream) {
  auto* const to =
      static_cast<unsigned char*>(state_.data()) + offsetof(mixed_adamw_device_state, schedule);
  GRAPHSTEP_CUDA_TRY(
      cudaMemcpyAsync(to, &schedule, sizeof schedule, cudaMemcpyHostToDevice, stream.get()));
  stream.synchronize();  // `schedule` may be gone before a later copy would run
}

void mixed_precision_adamw::do_read_learning_rate_from(float const* learning_rate,
                                                       cuda::stream_view stream) {
  auto* const to = static_cast<unsigned char*>(state_.data()) +
                   offsetof(mixed_adamw_device_state, learning_rate);
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(to, &learning_rate, sizeof learning_rate,
                                     cudaMemcpyHostToDevice, stream.get()));
  stream.synchronize();  // `learning_rate` is a local: the copy must have read it
}

void mixed_precision_adamw::do_save_to(checkpoint& into, std::string const& prefix,
                                       cuda::stream_view stream) const {
  auto const state = read<mixed_adamw_device_state>(0, stream);  // one copy, one wait
  into.add_value(prefix + "/step",
                 saved_counters{state.step, state.beta1_power, state.beta2_power});
  into.add_value(prefix + "/skipped_steps", state.skipped_steps);
  auto const* const buffers = static_cast<float const*>(buffers_.data());
  std::size_t const total = buffers_.size() / (3 * sizeof(float));
  for (std::size_t t = 0; t < first_element_.size(); ++t) {
    auto const names = entries_of(prefix, t);
    std::vector<std::int64_t> const shape{tensor_elements(first_element_, total, t)};
    // Only read: a view's pointer is not const, as a span's never is.
    float* const master = const_cast<float*>(buffers) + first_element_[t];
    add_device_tensor(into, {master, {names.master, shape, dtype::float32}}, stream);
    add_device_tensor(into, {master + total, {names.exp_avg, shape, dtype::float32}}, stream);
    add_device_tensor(into, {master + 2 * total, {names.exp_avg_sq, shape, dtype::float32}},
                      stream);
  }
}

void mixed_precision_adamw::do_restore_from(checkpoint const& from, std::string const& prefix,
                                            cuda::stream_view stream) {
  std::size_t const total = buffers_.size() / (3 * sizeof(float));
  // Every entry first, so that a checkpoint of another layout changes nothing.
  auto const counters = from.value<saved_counters>(prefix + "/step");
  GRAPHSTEP_EXPECTS(counters.step >= 0, "mixed_precision_adamw::restore_from: '" + prefix +
                                            "/step' holds a negative step count; the "
                                            "checkpoint was not written by save_to");
  std::vector<std::size_t> counts;
  for (std::size_t t = 0; t < first_element_.size(); ++t) {
    counts.push_back(static_cast<std::size_t>(tensor_elements(first_element_, total, t)));
  }
  detail::expect_state_entries(from, prefix, counts, {"master", "exp_avg", "exp_avg_sq"},
                               "mixed_precision_adamw");
  // Checkpoints written before the count was saved restore it as 0.
  std::string const skipped_name = prefix + "/skipped_steps";
  std::uint32_t const skipped =
      from.contains(skipped_name) ? from.value<std::uint32_t>(skipped_name) : 0U;
  auto* const buffers = static_cast<float*>(buffers_.data());
  for (std::size_t t = 0; t < first_element_.size(); ++t) {
    auto const names = entries_of(prefix, t);
    std::vector<std::int64_t> const shape{tensor_elements(first_element_, total, t)};
    float* const master = buffers + first_element_[t];
    load_device_tensor(from, {master, {names.master, shape, dtype::float32}}, stream);
    load_device_tensor(from, {master + total, {names.exp_avg, shape, dtype::float32}}, stream);
    load_device_tensor(from, {master + 2 * total, {names.exp_avg_sq, shape, dtype::float32}},
                       stream);
  }
  auto* const state = static_cast<unsigned char*>(state_.data());
  std::array<double, 2> const powers{counters.beta1_power, counters.beta2_power};
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(state + offsetof(mixed_adamw_device_state, step),
                                     &counters.step, sizeof counters.step, cudaMemcpyHostToDevice,
                                     stream.get()));
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(state + offsetof(mixed_adamw_device_state, beta1_power),
                                     powers.data(), sizeof powers, cudaMemcpyHostToDevice,
                                     stream.get()));
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(state + offsetof(mixed_adamw_device_state, skipped_steps),
                                     &skipped, sizeof skipped, cudaMemcpyHostToDevice,
                                     stream.get()));
  stream.synchronize();  // the sources are locals
}

template <typename T>
T mixed_precision_adamw::read(std::size_t offset, cuda::stream_view stream) const {
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    "mixed_precision_adamw: reading its state inside a capture would record the "
                    "host address; read it after the replay");
  T value{};
  GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(&value,
                                     static_cast<unsigned char const*>(state_.data()) + offset,
                                     sizeof value, cudaMemcpyDeviceToHost, stream.get()));
  stream.synchronize();
  return value;
}

std::int64_t mixed_precision_adamw::do_steps_taken(cuda::stream_view stream) const {
  return read<std::int64_t>(offsetof(mixed_adamw_device_state, step), stream);
}

float mixed_precision_adamw::last_gradient_norm(cuda::stream_view stream) const {
  return read<float>(offsetof(mixed_adamw_device_state, gradient_norm), stream);
}

float const* mixed_precision_adamw::gradient_norm() const noexcept {
  return reinterpret_cast<float const*>(static_cast<unsigned char const*>(state_.data()) +
                                        offsetof(mixed_adamw_device_state, gradient_norm));
}

std::uint32_t const* mixed_precision_adamw::skipped_steps() const noexcept {
  return reinterpret_cast<std::uint32_t const*>(
      static_cast<unsigned char const*>(state_.data()) +
      offsetof(mixed_adamw_device_state, skipped_steps));
}

float const* mixed_precision_adamw::master_weights(std::size_t tensor) const {
  GRAPHSTEP_EXPECTS(tensor < first_element_.size(),
                    "mixed_precision_adamw::master_weights: tensor " + std::to_string(tensor) +
                        " does not exist; the optimizer has " +
                        std::to_string(first_element_.size()));
  return static_cast<float const*>(buffers_.data()) + first_element_[tensor];
}

}  // namespace graphstep::train
