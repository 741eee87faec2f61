// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <graphstep/error.hpp>
#include <graphstep/nccl/step_deadline.hpp>

namespace graphstep::nccl {
namespace {

using std::chrono::milliseconds;

// The upper median of the first `count` measurements: with two, the slower, so that one fast
// step after a slow first one does not shrink the limit yet.
milliseconds upper_median(std::vector<milliseconds> const& measured, std::size_t count) {
  std::vector<milliseconds> first(measured.begin(),
                                  measured.begin() + static_cast<std::ptrdiff_t>(count));
  auto const middle = first.begin() + static_cast<std::ptrdiff_t>(count / 2);
  std::nth_element(first.begin(), middle, first.end());
  return *middle;
}

std::size_t counted(std::vector<milliseconds> const& measured, int measured_steps) {
  return std::min(measured.size(), static_cast<std::size_t>(std::max(measured_steps, 1)));
}

}  // namespace

milliseconds step_deadline::limit(std::vector<milliseconds> const& measured) const {
  if (fixed) return *fixed;
  std::size_t const count = counted(measured, measured_steps);
  if (count == 0) return first_step;
  milliseconds const median = upper_median(measured, count);
  // Saturates rather than overflows for an absurd median.
  auto const scaled = median.count() > milliseconds::max().count() / std::max(times_median, 1)
                          ? milliseconds::max()
                          : median * times_median;
  return std::max(at_least, scaled);
}

std::string step_deadline::describe(std::vector<milliseconds> const& measured) const {
  if (fixed) return "fixed";
  std::size_t const count = counted(measured, measured_steps);
  if (count == 0) return "adaptive: no step has finished yet";
  return "adaptive: " + std::to_string(times_median) + " x the median of " + std::to_string(count) +
         " measured step(s), " + std::to_string(upper_median(measured, count).count()) +
         " ms, at least " + std::to_string(at_least.count()) + " ms";
}

void step_deadline::validate(std::string const& what) const {
  auto positive = [&](milliseconds value, char const* field) {
    GRAPHSTEP_EXPECTS(value.count() > 0,
                      what + ": the step deadline's " + field + " must be positive, not " +
                          std::to_string(value.count()) + " ms; give the longest a step may take");
  };
  if (fixed) {
    positive(*fixed, "fixed limit");
    return;
  }
  positive(first_step, "first_step");
  positive(at_least, "at_least");
  GRAPHSTEP_EXPECTS(times_median >= 1, what +
                                           ": the step deadline's times_median must be at "
                                           "least 1, not " +
                                           std::to_string(times_median));
  GRAPHSTEP_EXPECTS(measured_steps >= 1, what +
                                             ": the step deadline's measured_steps must be at "
                                             "least 1, not " +
                                             std::to_string(measured_steps));
}

}  // namespace graphstep::nccl
