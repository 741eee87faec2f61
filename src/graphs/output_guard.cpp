// graphstep_core: plain C++, includes no CUDA header.
#include <graphstep/error.hpp>
#include <graphstep/graphs/output_guard.hpp>

namespace graphstep::graphs {

void output_guard::check() const {
  std::uint64_t const now = generation_->load(std::memory_order_relaxed);
  GRAPHSTEP_EXPECTS(now == taken_,
                    "output " + what_ + " came from replay " + std::to_string(taken_) +
                        " but replay " + std::to_string(now) +
                        " has overwritten it since: copy a graph's outputs out (or consume "
                        "them) before replaying it again");
}

}  // namespace graphstep::graphs
