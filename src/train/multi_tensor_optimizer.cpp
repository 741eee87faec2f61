#include <cuda_runtime_api.h>

#include <cstddef>
#include <graphstep/cuda/check.hpp>
#include <graphstep/cuda/device_buffer.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/adam.hpp>
#include <graphstep/train/device_checkpoint.hpp>
#include <graphstep/train/loss_scaler.hpp>
#include <graphstep/train/multi_tensor_optimizer.hpp>
#include <graphstep/train/sgd.hpp>
#include <string>
#include <utility>

#include "train/detail/optimizer_state.hpp"
#include "train/detail/upload_table.hpp"
#include "train/train_kernels.hpp"

namespace graphstep::train {

// SGD and Adam: one device state, one chunk table, up to two fp32 buffers per element.

using detail::expect_state_entries;
using detail::optimizer_device_state;
using detail::state_entry;
using detail::tensor_chunk;
using detail::tensor_slot;
using detail::upload_table;

namespace detail {
namespace {

// What the constructor checks and plans before it allocates anything.
struct table_plan {
  std::vector<tensor_chunk> chunks;
  std::vector<std::size_t> counts;  // elements of each tensor
  std::size_t total{};              // elements of all tensors
};

table_plan checked_plan(std::vector<parameter> const& parameters, lr_schedule const& schedule,
                        char const* who, cuda::stream_view stream) {
  GRAPHSTEP_EXPECTS(!parameters.empty(), std::string{who} + ": no parameter was given");
  GRAPHSTEP_EXPECTS(!stream.is_capturing(),
                    std::string{who} +
                        ": construct it before the capture; it allocates and uploads its "
                        "tables, which a capture cannot record");
  validate(schedule);
  table_plan plan;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    auto const& p = parameters[i];
    validate(p, i, who);
    GRAPHSTEP_EXPECTS(p.value.type() == dtype::float32,
                      std::string{who} + ": parameter " + std::to_string(i) + " is " +
                          name(p.value.type()) +
                          "; sgd and adam update float32 tensors (mixed_precision_adamw takes "
                          "bfloat16 and float16 ones)");
    GRAPHSTEP_EXPECTS(p.group == 0, std::string{who} + ": parameter " + std::to_string(i) +
                                        " names group " + std::to_string(p.group) +
                                        "; sgd and adam have one group, 0 (mixed_precision_adamw "
                                        "takes parameter groups)");
    plan.counts.push_back(p.value.count());
    plan.total += p.value.count();
  }
  plan.chunks = plan_chunks(plan.counts);
  return plan;
}

}  // namespace

}  // namespace detail

// Device memory and tables of sgd and adam, and what they do alike.
class multi_tensor_optimizer::tables {
 public:
  // `buffers`: the names of the fp32 state buffers each element has (none for SGD without
  // momentum), as save_to names them.
  tables(char const* who, std::vector<parameter> const& parameters,
         std::vector<std::string> buffers, lr_schedule const& schedule, loss_scaler const* scaler,
         cuda::stream_view stream, cuda::memory_resource& resource)
      : tables{detail::checked_plan(parameters, schedule, who, stream),
               parameters,
               std::move(buffers),
               schedule,
               scaler,
               stream,
               resource} {}

  tables(tables const&) = delete;
  tables& operator=(tables const&) = delete;
  tables(tables&&) = delete;
  tables& operator=(tables&&) = delete;
  ~tables() = default;

  void advance_step(cuda::stream_view stream) const {
    launch_advance_step(state(), loss_scale_, all_finite_, stream);
  }

  void set_schedule(lr_schedule const& schedule, cuda::stream_view stream) {
    write_field(offsetof(optimizer_device_state, schedule), &schedule, sizeof schedule, stream);
  }

  void read_learning_rate_from(float const* learning_rate, cuda::stream_view stream) {
    write_field(offsetof(optimizer_device_state, learning_rate), &learning_rate,
                sizeof learning_rate, stream);
  }

  [[nodiscard]] std::int64_t steps_taken(cuda::stream_view stream) const {
    std::int64_t step = 0;
    GRAPHSTEP_CUDA_TRY(
        cudaMemcpyAsync(&step, &state()->step, sizeof step, cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    return step;
  }

  void save_to(checkpoint& into, std::string const& prefix, cuda::stream_view stream) const {
    into.add_value(prefix + "/step", steps_taken(stream));
    auto const* const buffers = static_cast<float const*>(buffers_.data());
    for (std::size_t b = 0; b < buffer_names_.size(); ++b) {
      std::size_t first = 0;
      for (std::size_t t = 0; t < counts_.size(); ++t) {
        // The state is only read here: a view's pointer is not const, as a span's never is.
        add_device_tensor(into,
                          {const_cast<float*>(buffers + b * total_ + first),
                           {state_entry(prefix, t, buffer_names_[b]),
                            {static_cast<std::int64_t>(counts_[t])},
                            dtype::float32}},
                          stream);
        first += counts_[t];
      }
    }
  }

  void restore_from(checkpoint const& from, std::string const& prefix, char const* who,
                    cuda::stream_view stream) {
    // Every entry first, so that a checkpoint of another layout changes nothing.
    auto const step = from.value<std::int64_t>(prefix + "/step");
    GRAPHSTEP_EXPECTS(step >= 0, std::string{who} + "::restore_from: '" + prefix +
                                     "/step' holds a negative step count; the checkpoint was "
                                     "not written by save_to");
    expect_state_entries(from, prefix, counts_, buffer_names_, who);
    auto* const buffers = static_cast<float*>(buffers_.data());
    for (std::size_t b = 0; b < buffer_names_.size(); ++b) {
      std::size_t first = 0;
      for (std::size_t t = 0; t < counts_.size(); ++t) {
        load_device_tensor(from,
                           {buffers + b * total_ + first,
                            {state_entry(prefix, t, buffer_names_[b]),
                             {static_cast<std::int64_t>(counts_[t])},
                             dtype::float32}},
                           stream);
        first += counts_[t];
      }
    }
    write_field(offsetof(optimizer_device_state, step), &step, sizeof step, stream);
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

 private:
  // One allocation per purpose, checked and planned first (see checked_plan).
  tables(detail::table_plan const& plan, std::vector<parameter> const& parameters,
         std::vector<std::string> buffer_names, lr_schedule const& schedule,
         loss_scaler const* scaler, cuda::stream_view stream, cuda::memory_resource& resource)
      : loss_scale_{scaler != nullptr ? scaler->scale() : nullptr},
        all_finite_{scaler != nullptr ? scaler->all_finite() : nullptr},
        buffer_names_{std::move(buffer_names)},
        counts_{plan.counts},
        total_{plan.total},
        state_{sizeof(optimizer_device_state), stream, resource},
        slots_{sizeof(tensor_slot) * parameters.size(), stream, resource},
        chunks_{sizeof(tensor_chunk) * plan.chunks.size(), stream, resource},
        // Empty for SGD without momentum.
        buffers_{sizeof(float) * plan.total * buffer_names_.size(), stream, resource},
        chunk_count_{plan.chunks.size()} {
    auto* const buffers = static_cast<float*>(buffers_.data());
    // State buffers start at zero as in PyTorch.
    if (!buffers_.empty()) {
      GRAPHSTEP_CUDA_TRY(cudaMemsetAsync(buffers, 0, buffers_.size(), stream.get()));
    }
    std::vector<tensor_slot> slots;
    std::size_t offset = 0;
    for (auto const& p : parameters) {
      float* state1 = !buffer_names_.empty() ? buffers + offset : nullptr;
      float* state2 = buffer_names_.size() > 1 ? buffers + plan.total + offset : nullptr;
      slots.push_back({static_cast<float*>(p.value.data()),
                       static_cast<float const*>(p.gradient.data()), state1, state2,
                       p.value.count()});
      offset += p.value.count();
    }
    optimizer_device_state initial;
    initial.schedule = schedule;
    upload_table(slots_, slots.data(), slots.size(), stream);
    upload_table(chunks_, plan.chunks.data(), plan.chunks.size(), stream);
    upload_table(state_, &initial, 1, stream);
    // The host vectors above go away on return, and every stream may use the memory (its
    // allocation was ordered on `stream`).
    stream.synchronize();
  }

  void write_field(std::size_t offset, void const* from, std::size_t bytes,
                   cuda::stream_view stream) const {
    GRAPHSTEP_CUDA_TRY(cudaMemcpyAsync(static_cast<unsigned char*>(state_.data()) + offset, from,
                                       bytes, cudaMemcpyHostToDevice, stream.get()));
    stream.synchronize();  // the source is the caller's: the copy must have read it
  }

  float const* loss_scale_;
  unsigned int const* all_finite_;
  std::vector<std::string> buffer_names_;
  std::vector<std::size_t> counts_;
  std::size_t total_;
  cuda::device_buffer state_;    // optimizer_device_state
  cuda::device_buffer slots_;    // tensor_slot, one per parameter
  cuda::device_buffer chunks_;   // tensor_chunk
  cuda::device_buffer buffers_;  // one per buffer name × all elements, float
  std::size_t chunk_count_{};
};

namespace {
// The state buffers each optimizer keeps per element, after checking its options; PyTorch's
// state_dict names.
std::vector<std::string> state_buffers(sgd_options const& options) {
  validate(options);
  if (options.momentum == 0.0F) return {};
  return {"momentum_buffer"};
}
std::vector<std::string> state_buffers(adam_options const& options) {
  validate(options);
  return {"exp_avg", "exp_avg_sq"};
}
}  // namespace

multi_tensor_optimizer::multi_tensor_optimizer(char const* name,
                                               std::vector<parameter> const& parameters,
                                               std::vector<std::string> buffers,
                                               lr_schedule const& schedule,
                                               loss_scaler const* scaler, cuda::stream_view stream,
                                               cuda::memory_resource& resource)
    : optimizer{name},
      tables_{std::make_unique<tables>(name, parameters, std::move(buffers), schedule, scaler,
                                       stream, resource)} {}
multi_tensor_optimizer::~multi_tensor_optimizer() = default;
multi_tensor_optimizer::multi_tensor_optimizer(multi_tensor_optimizer&&) noexcept = default;
multi_tensor_optimizer& multi_tensor_optimizer::operator=(multi_tensor_optimizer&&) noexcept =
    default;

void multi_tensor_optimizer::do_step(cuda::stream_view stream) {
  tables_->advance_step(stream);
  launch_update(*tables_, stream);
}
void multi_tensor_optimizer::do_set_schedule(lr_schedule const& schedule,
                                             cuda::stream_view stream) {
  tables_->set_schedule(schedule, stream);
}
void multi_tensor_optimizer::do_read_learning_rate_from(float const* learning_rate,
                                                        cuda::stream_view stream) {
  tables_->read_learning_rate_from(learning_rate, stream);
}
std::int64_t multi_tensor_optimizer::do_steps_taken(cuda::stream_view stream) const {
  return tables_->steps_taken(stream);
}
void multi_tensor_optimizer::do_save_to(checkpoint& into, std::string const& prefix,
                                        cuda::stream_view stream) const {
  tables_->save_to(into, prefix, stream);
}
void multi_tensor_optimizer::do_restore_from(checkpoint const& from, std::string const& prefix,
                                             cuda::stream_view stream) {
  tables_->restore_from(from, prefix, name(), stream);
}

namespace detail {

std::vector<parameter> buffer_parameters(memory::parameter_buffer const& weights,
                                         memory::parameter_buffer const& gradients,
                                         std::string const& who) {
  GRAPHSTEP_EXPECTS(weights.data() != nullptr && gradients.data() != nullptr,
                    who + ": the weights' or the gradients' parameter_buffer was moved from");
  expect_same_layout(weights.layout(), gradients.layout(), who);
  return layout_parameters(weights.layout(), weights.data(), gradients.data(), who);
}

}  // namespace detail

sgd::sgd(std::vector<parameter> const& parameters, sgd_options const& options,
         lr_schedule const& schedule, loss_scaler const* scaler, cuda::stream_view stream,
         cuda::memory_resource& resource)
    : multi_tensor_optimizer{"sgd",  parameters, state_buffers(options), schedule, scaler,
                             stream, resource},
      options_{options} {}
sgd::sgd(memory::parameter_buffer& weights, memory::parameter_buffer const& gradients,
         sgd_options const& options, lr_schedule const& schedule, loss_scaler const* scaler,
         cuda::stream_view stream, cuda::memory_resource& resource)
    : sgd{detail::buffer_parameters(weights, gradients, "sgd"),
          options,
          schedule,
          scaler,
          stream,
          resource} {}

void sgd::launch_update(tables const& on, cuda::stream_view stream) const {
  detail::launch_sgd(on.slots(), on.chunks(), on.chunk_count(), on.state(), options_, stream);
}

adam::adam(std::vector<parameter> const& parameters, adam_options const& options,
           lr_schedule const& schedule, loss_scaler const* scaler, cuda::stream_view stream,
           cuda::memory_resource& resource)
    : multi_tensor_optimizer{"adam", parameters, state_buffers(options), schedule, scaler,
                             stream, resource},
      options_{options} {}
adam::adam(memory::parameter_buffer& weights, memory::parameter_buffer const& gradients,
           adam_options const& options, lr_schedule const& schedule, loss_scaler const* scaler,
           cuda::stream_view stream, cuda::memory_resource& resource)
    : adam{detail::buffer_parameters(weights, gradients, "adam"),
           options,
           schedule,
           scaler,
           stream,
           resource} {}

void adam::launch_update(tables const& on, cuda::stream_view stream) const {
  detail::launch_adam(on.slots(), on.chunks(), on.chunk_count(), on.state(), options_, stream);
}

}  // namespace graphstep::train
