#pragma once

/// @file train/lr_schedule.hpp
/// @brief Learning-rate schedules evaluated from a step count, on the host and in kernels.
///
/// A captured optimizer step reads the step count from device memory and evaluates the
/// schedule there, so every replay uses the learning rate of its own step: nothing is frozen
/// into the graph at capture time. Plain C++; kernels include it too.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cmath>
#include <cstdint>
#include <graphstep/detail/host_device.hpp>

namespace graphstep::train {

/// @brief The shape of a schedule.
enum class lr_shape : std::int32_t {
  constant,       ///< base
  linear_warmup,  ///< base · step / warmup_steps up to warmup_steps, then base
  warmup_cosine,  ///< linear warm-up, then cosine decay to base · final_fraction at total_steps
  warmup_linear,  ///< linear warm-up, then linear decay to base · final_fraction at total_steps
  /// Warmup-stable-decay (WSD, MiniCPM, arXiv:2404.06395 §4.1): linear warm-up, base until
  /// total_steps − decay_steps, then the "1-sqrt" cooldown of Hägele et al., arXiv:2405.18392
  /// §3: floor + (base − floor) · (1 − sqrt(progress)), progress = steps into the decay /
  /// decay_steps, reaching base · final_fraction at total_steps.
  warmup_stable_decay,
};

/// @brief A learning-rate schedule; trivially copyable, so it can live in device memory.
///
/// Step conventions, for every shape: the first optimizer step is step 1. With a warm-up,
/// step s ≤ warmup_steps gets base · s / warmup_steps, so step 0 gets 0 and step warmup_steps
/// gets base; without one, step 0 gets what step 1 would (base before any decay). A decay
/// reaches base · final_fraction exactly at total_steps and stays there for every later step.
/// WSD holds base through step total_steps − decay_steps and decays over the decay_steps
/// steps after it.
struct lr_schedule {
  lr_shape shape{lr_shape::constant};
  float base{1e-3F};
  std::int64_t warmup_steps{0};
  std::int64_t total_steps{0};
  float final_fraction{0.0F};
  std::int64_t decay_steps{0};  ///< length of the WSD decay phase; unused by the other shapes

  /// @brief The learning rate of step `step` (1 for the first step).
  [[nodiscard]] GRAPHSTEP_HOST_DEVICE float at(std::int64_t step) const {
    if (shape == lr_shape::constant) return base;
    if (warmup_steps > 0 && step <= warmup_steps) {
      return base * static_cast<float>(step) / static_cast<float>(warmup_steps);
    }
    if (shape == lr_shape::warmup_stable_decay) {
      std::int64_t const decay_start = total_steps - decay_steps;
      if (step <= decay_start) return base;
      std::int64_t const into = (step < total_steps ? step : total_steps) - decay_start;
      float const progress = static_cast<float>(into) / static_cast<float>(decay_steps);
      float const floor = base * final_fraction;
      return floor + (base - floor) * (1.0F - std::sqrt(progress));
    }
    if (shape == lr_shape::linear_warmup || total_steps <= warmup_steps) return base;
    std::int64_t const decay_steps = total_steps - warmup_steps;
    std::int64_t const into = step < total_steps ? step - warmup_steps : decay_steps;
    float const progress = static_cast<float>(into) / static_cast<float>(decay_steps);
    float const floor = base * final_fraction;
    if (shape == lr_shape::warmup_linear) return floor + (base - floor) * (1.0F - progress);
    float const pi = 3.14159265358979323846F;
    return floor + (base - floor) * 0.5F * (1.0F + std::cos(pi * progress));
  }
};

/// @brief Throws usage_error when the schedule cannot be evaluated sensibly (a negative or
/// non-finite base, negative step counts, a decay that ends before the warm-up, a final
/// fraction outside [0, 1]; for WSD a decay of no step, or warm-up and decay longer than
/// total_steps).
void validate(lr_schedule const& schedule);

}  // namespace graphstep::train
