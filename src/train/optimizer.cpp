#include <graphstep/error.hpp>
#include <graphstep/train/optimizer.hpp>
#include <string>

namespace graphstep::train {

// The checks every optimizer shares, before its own part.

optimizer::~optimizer() = default;

void optimizer::expect_usable(char const* call, cuda::stream_view stream, bool capturable) const {
  GRAPHSTEP_EXPECTS(!moved_from(), std::string{name_} + "::" + call +
                                       ": this optimizer was moved from; use the one it was "
                                       "moved to");
  GRAPHSTEP_EXPECTS(capturable || !stream.is_capturing(),
                    std::string{name_} + "::" + call +
                        " inside a capture would freeze the value into the graph or record a "
                        "host address; call it between replays (graphs captured before it "
                        "see its effect)");
}

void optimizer::step(cuda::stream_view stream) {
  expect_usable("step", stream, true);
  do_step(stream);
}

void optimizer::set_schedule(lr_schedule const& schedule, cuda::stream_view stream) {
  validate(schedule);
  expect_usable("set_schedule", stream, false);
  do_set_schedule(schedule, stream);
}

void optimizer::read_learning_rate_from(float const* learning_rate, cuda::stream_view stream) {
  expect_usable("read_learning_rate_from", stream, false);
  do_read_learning_rate_from(learning_rate, stream);
}

std::int64_t optimizer::steps_taken(cuda::stream_view stream) const {
  expect_usable("steps_taken", stream, false);
  return do_steps_taken(stream);
}

void optimizer::save_to(checkpoint& into, std::string const& prefix,
                        cuda::stream_view stream) const {
  expect_usable("save_to", stream, false);
  do_save_to(into, prefix, stream);
}

void optimizer::restore_from(checkpoint const& from, std::string const& prefix,
                             cuda::stream_view stream) {
  expect_usable("restore_from", stream, false);
  do_restore_from(from, prefix, stream);
}

}  // namespace graphstep::train
