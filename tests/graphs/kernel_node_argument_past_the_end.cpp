// Must not compile: set_argument<I> with I past the kernel's last parameter is refused by a
// static_assert that names the mistake (tests/CMakeLists.txt builds this and expects the message).

#include <graphstep/graphs/kernel_node.hpp>

namespace {
void scale(float* /*values*/, int /*count*/) {}
}  // namespace

void set_a_third_argument(graphstep::cuda::stream_view stream,
                          graphstep::graphs::graph_exec& exec) {
  auto node = graphstep::graphs::last_captured_launch(stream, scale);
  node.set_argument<2>(exec, 1);
}
