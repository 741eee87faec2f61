// The simulator's fibers (sim/src/detail/fiber.hpp), white box: a stack given back leaves nothing
// behind for the next mapping at its addresses; a fiber that ends by handing over finishes, and
// the one it hands to returns to the thread that resumed the first.

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "detail/fiber.hpp"

namespace {

using graphstep::sim::detail::fiber;

// Stops for good inside a frame with an array, whose red zones AddressSanitizer poisons; notes
// where the array lies.
void stop_with_a_local_array(void* where) {
  std::array<char, 200> local{};
  local[0] = 1;
  *static_cast<char volatile**>(where) = local.data();
  fiber::yield();
  local[1] = local[0];  // never reached: the fiber is destroyed while stopped
}

// Two fibers, the first ending in the second: the order they ran in, written as they go.
struct relay {
  fiber first;
  fiber second;
  std::array<int, 3> order{};
  int steps{};
};

void run_first_then_finish_into_second(void* argument) {
  auto& r = *static_cast<relay*>(argument);
  r.order[r.steps++] = 1;
  fiber::finish_into(r.second);
}

void run_second(void* argument) {
  auto& r = *static_cast<relay*>(argument);
  r.order[r.steps++] = 2;
}

}  // namespace

// A block's thread that ends hands its host thread to the next ready one (launch.cpp): the
// fiber it ran on is finished, and the next runs until it ends or yields, then the thread that
// resumed the first goes on.
TEST(fiber, a_fiber_that_finishes_into_another_is_finished_and_the_other_returns_to_its_caller) {
  if (!fiber::hands_over) GTEST_SKIP() << "fibers hand over only on x86-64 without ASan";
  relay r;
  r.first.start(&run_first_then_finish_into_second, &r);
  r.second.start(&run_second, &r);
  r.first.resume();
  r.order[r.steps++] = 3;  // back here once the second has ended
  EXPECT_TRUE(r.first.finished());
  EXPECT_TRUE(r.second.finished());
  EXPECT_EQ(r.order, (std::array<int, 3>{1, 2, 3}));
  // A finished fiber's stack starts anew.
  r.steps = 0;
  r.second.start(&run_second, &r);
  r.second.resume();
  EXPECT_EQ(r.steps, 1);
}

// A kernel's fiber may be destroyed while a thread of it waits at a barrier for good (a failed
// block), and host threads that ran kernels destroy theirs when they exit. The addresses then
// serve the next mapping (device memory, often): under AddressSanitizer, a stack's poisoned red
// zones left in the shadow made a later copy into that memory a reported stack-buffer-underflow.
TEST(fiber, a_destroyed_stack_leaves_nothing_behind_at_its_addresses) {
  char volatile* local = nullptr;
  {
    fiber f;
    f.start(&stop_with_a_local_array, const_cast<char**>(&local));
    f.resume();
    ASSERT_FALSE(f.finished());
  }
  ASSERT_NE(local, nullptr);
  auto const page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  auto const start = reinterpret_cast<std::uintptr_t>(local) / page * page;
  // The stack's page again, as a fresh mapping (MAP_FIXED_NOREPLACE: nothing else took it).
  void* const again = mmap(reinterpret_cast<void*>(start), page, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_NE(again, MAP_FAILED) << std::strerror(errno);
  ASSERT_EQ(again, reinterpret_cast<void*>(start));
  std::array<char, 4096> source{};
  source.fill(7);
  std::size_t const bytes = std::min<std::size_t>(source.size(), page);
  std::memcpy(again, source.data(), bytes);  // AddressSanitizer checks the whole range
  EXPECT_EQ(static_cast<char const*>(again)[bytes - 1], 7);
  munmap(again, page);
}
