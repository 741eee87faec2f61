// graphstep_core: plain C++, includes no CUDA header.
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
  bool const decays = schedule.shape == lr_shape::warmup_cosine ||
                      schedule.shape == lr_shape::warmup_linear ||
                      schedule.shape == lr_shape::warmup_stable_decay;
  GRAPHSTEP_EXPECTS(!decays || schedule.total_steps > schedule.warmup_steps,
                    "lr_schedule: a decaying schedule needs total_steps > warmup_steps (" +
                        std::to_string(schedule.total_steps) +
                        " <= " + std::to_string(schedule.warmup_steps) + ")");
  if (schedule.shape == lr_shape::warmup_stable_decay) {
    GRAPHSTEP_EXPECTS(schedule.decay_steps >= 1,
                      "lr_schedule: warmup_stable_decay needs decay_steps >= 1 (got " +
                          std::to_string(schedule.decay_steps) +
                          "); use linear_warmup for a schedule that never decays");
    GRAPHSTEP_EXPECTS(
        schedule.warmup_steps + schedule.decay_steps <= schedule.total_steps,
        "lr_schedule: warmup_stable_decay needs warmup_steps + decay_steps <= "
        "total_steps (" +
            std::to_string(schedule.warmup_steps) + " + " + std::to_string(schedule.decay_steps) +
            " > " + std::to_string(schedule.total_steps) + "); shorten the warm-up or the decay");
  }
}

}  // namespace graphstep::train
