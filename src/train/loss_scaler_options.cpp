// graphstep_core: plain C++, includes no CUDA header.
#include <graphstep/error.hpp>
#include <graphstep/train/loss_scaler_options.hpp>

namespace graphstep::train {

void validate(loss_scaler_options const& options) {
  GRAPHSTEP_EXPECTS(options.init_scale > 0.0F && detail::is_finite(options.init_scale),
                    "loss_scaler_options: init_scale must be positive and finite");
  GRAPHSTEP_EXPECTS(options.growth_factor > 1.0F && detail::is_finite(options.growth_factor),
                    "loss_scaler_options: growth_factor must be above 1 and finite");
  GRAPHSTEP_EXPECTS(options.backoff_factor > 0.0F && options.backoff_factor < 1.0F,
                    "loss_scaler_options: backoff_factor must lie in (0, 1)");
  GRAPHSTEP_EXPECTS(options.growth_interval >= 1,
                    "loss_scaler_options: growth_interval must be at least 1");
}

}  // namespace graphstep::train
