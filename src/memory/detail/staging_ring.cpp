// graphstep_core: plain C++, includes no CUDA header.
#include "memory/detail/staging_ring.hpp"

#include <graphstep/error.hpp>
#include <string>
#include <utility>

namespace graphstep::memory::detail {

staging_ring::staging_ring(std::size_t depth, std::string owner)
    : depth_{depth}, owner_{std::move(owner)} {
  GRAPHSTEP_EXPECTS(depth_ > 0, owner_ +
                                    ": depth must be at least 1 staging slot (2 lets the "
                                    "host fill one while the device copies the other)");
}

std::size_t staging_ring::stage() noexcept {
  staged_ = true;
  return next_slot();
}

void staging_ring::expect_staged() const {
  GRAPHSTEP_EXPECTS(staged_, owner_ +
                                 ": nothing was staged since the last transfer: fill the "
                                 "slot that stage() returns first (its contents are stale)");
}

std::uint64_t staging_ring::commit() {
  expect_staged();
  staged_ = false;
  return ++committed_;
}

std::size_t staging_ring::slot_of(std::uint64_t ticket) const {
  GRAPHSTEP_EXPECTS(ticket >= 1 && ticket <= committed_,
                    owner_ + ": ticket " + std::to_string(ticket) +
                        " was never issued (tickets issued so far: 1.." +
                        std::to_string(committed_) + ")");
  GRAPHSTEP_EXPECTS(
      committed_ - ticket < depth_,
      owner_ + ": the result of ticket " + std::to_string(ticket) + " was overwritten by ticket " +
          std::to_string(ticket + depth_) + ", which reused its slot: read each result before " +
          std::to_string(depth_) + " more transfers are enqueued, or give the ring more depth");
  return static_cast<std::size_t>((ticket - 1) % depth_);
}

}  // namespace graphstep::memory::detail
