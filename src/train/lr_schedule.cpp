#include <cmath>
#include <graphstep/error.hpp>
#include <graphstep/train/lr_schedule.hpp>
#include <string>

namespace graphstep::train {

void validate(lr_schedule const& schedule) {
  GRAPHSTEP_EXPECTS(std::isfinite(schedule.base) && schedule.base >= 0.0F,
                    "lr_schedule: the base learning rate must be finite and non-negative");
  GRAPHSTEP_EXPECTS(schedule.warmup_steps >= 0 && schedule.total_steps >= 0,
                    "lr_schedule: step counts must be non-negative");
  GRAPHSTEP_EXPECTS(schedule.final_fraction >= 0.0F && schedule.final_fraction <= 1.0F,
                    "lr_schedule: final_fraction must lie in [0, 1]");
  bool const decays =
      schedule.shape == lr_shape::warmup_cosine || schedule.shape == lr_shape::warmup_linear;
  GRAPHSTEP_EXPECTS(!decays || schedule.total_steps > schedule.warmup_steps,
                    "lr_schedule: a decaying schedule needs total_steps > warmup_steps (" +
                        std::to_string(schedule.total_steps) +
                        " <= " + std::to_string(schedule.warmup_steps) + ")");
}

}  // namespace graphstep::train
