// The slot bookkeeping behind step_input and host_readback: slots in turn, what must be waited
// for before a slot is reused, and the refusals (stale contents, overwritten results).

#include "memory/detail/staging_ring.hpp"

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <string>

#include "common/error_message.hpp"

namespace gs = graphstep;
using gs::memory::detail::staging_ring;
using gs::testing::contains;
using gs::testing::message_of;

// The call throws usage_error, and its message says `part`.
#define EXPECT_USAGE_ERROR_SAYS(call, part) EXPECT_PRED2(contains, message_of(call), part)

TEST(staging_ring, refuses_a_ring_without_slots) {
  EXPECT_USAGE_ERROR_SAYS([&] { staging_ring(0, "step_input"); },
                          "step_input: depth must be at least 1");
}

TEST(staging_ring, transfers_take_the_slots_in_turn_and_wait_for_the_one_depth_earlier) {
  staging_ring ring{3, "step_input"};
  for (std::uint64_t ticket = 1; ticket <= 10; ++ticket) {
    std::size_t const expected_slot = (ticket - 1) % 3;
    EXPECT_EQ(ring.next_slot(), expected_slot);
    // The slot was last used by the transfer three tickets earlier, if there was one.
    EXPECT_EQ(ring.previous_ticket_of_next_slot(), ticket > 3 ? ticket - 3 : 0);
    EXPECT_EQ(ring.stage(), expected_slot);
    EXPECT_EQ(ring.stage(), expected_slot) << "staging again names the same slot";
    EXPECT_EQ(ring.commit(), ticket);
    EXPECT_EQ(ring.committed(), ticket);
  }
}

TEST(staging_ring, a_single_slot_is_reused_by_every_transfer) {
  staging_ring ring{1, "host_readback"};
  EXPECT_EQ(ring.previous_ticket_of_next_slot(), 0U);
  static_cast<void>(ring.stage());
  EXPECT_EQ(ring.commit(), 1U);
  EXPECT_EQ(ring.next_slot(), 0U);
  EXPECT_EQ(ring.previous_ticket_of_next_slot(), 1U);
}

TEST(staging_ring, committing_what_was_never_staged_is_refused) {
  staging_ring ring{2, "step_input"};
  EXPECT_USAGE_ERROR_SAYS([&] { ring.commit(); }, "step_input: nothing was staged");
  static_cast<void>(ring.stage());
  EXPECT_TRUE(ring.staged());
  EXPECT_NO_THROW(ring.expect_staged());
  EXPECT_EQ(ring.commit(), 1U);
  EXPECT_FALSE(ring.staged());
  // The slot's contents went out with ticket 1: sending them again needs a new stage().
  EXPECT_USAGE_ERROR_SAYS([&] { ring.expect_staged(); }, "its contents are stale");
  EXPECT_USAGE_ERROR_SAYS([&] { ring.commit(); }, "nothing was staged");
  EXPECT_EQ(ring.committed(), 1U);
}

TEST(staging_ring, a_result_is_found_until_its_slot_is_reused) {
  staging_ring ring{2, "host_readback"};
  EXPECT_USAGE_ERROR_SAYS([&] { static_cast<void>(ring.slot_of(1)); },
                          "host_readback: ticket 1 was never issued");
  for (int i = 0; i < 2; ++i) {
    static_cast<void>(ring.stage());
    static_cast<void>(ring.commit());
  }
  EXPECT_EQ(ring.slot_of(1), 0U);
  EXPECT_EQ(ring.slot_of(2), 1U);
  EXPECT_USAGE_ERROR_SAYS([&] { static_cast<void>(ring.slot_of(0)); }, "ticket 0 was never issued");
  EXPECT_USAGE_ERROR_SAYS([&] { static_cast<void>(ring.slot_of(3)); }, "ticket 3 was never issued");
  static_cast<void>(ring.stage());
  EXPECT_EQ(ring.commit(), 3U);
  EXPECT_USAGE_ERROR_SAYS([&] { static_cast<void>(ring.slot_of(1)); },
                          "the result of ticket 1 was overwritten by ticket 3");
  EXPECT_EQ(ring.slot_of(2), 1U);
  EXPECT_EQ(ring.slot_of(3), 0U);
}
