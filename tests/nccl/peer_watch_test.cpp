// The peer watch on loopback, with threads (and one forked process) as ranks: a rank that ends
// without a goodbye is reported to every other rank within a second, one that leaves in order
// is not, and strangers are kept out.

#include "nccl/detail/peer_watch.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <graphstep/error.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/error_message.hpp"

namespace gn = graphstep::nccl;
using gn::detail::peer_watch;
using gn::detail::peer_watch_listener;
using graphstep::testing::contains;
using graphstep::testing::message_of;
using std::chrono::milliseconds;

namespace {

constexpr std::uint64_t job_key = 0x5eedf00dULL;
constexpr milliseconds generous{10000};

// What one rank's handler was told; waited for with a deadline, so a missed report fails
// instead of hanging.
class reports {
 public:
  gn::detail::peer_lost_handler handler() {
    return [this](std::string const& reason) {
      std::lock_guard<std::mutex> lock{mutex_};
      seen_.push_back(reason);
      arrived_.notify_all();
    };
  }
  std::optional<std::string> first_within(milliseconds wait) {
    std::unique_lock<std::mutex> lock{mutex_};
    if (!arrived_.wait_for(lock, wait, [this] { return !seen_.empty(); })) return std::nullopt;
    return seen_.front();
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock{mutex_};
    return seen_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<std::string> seen_;
};

// A job of `world` ranks in this process: rank 0's watch and the others', in rank order.
struct job {
  std::vector<reports> told;
  std::vector<std::unique_ptr<peer_watch>> watches;
};

void start(job& j, int world) {
  j.told = std::vector<reports>(static_cast<std::size_t>(world));
  j.watches.resize(static_cast<std::size_t>(world));
  peer_watch_listener listener;
  int const port = listener.port();
  auto served = std::async(std::launch::async, [&, l = std::move(listener)]() mutable {
    return peer_watch::serve(std::move(l), world, job_key, generous, j.told[0].handler());
  });
  for (int rank = 1; rank < world; ++rank) {
    j.watches[static_cast<std::size_t>(rank)] =
        peer_watch::join("127.0.0.1", port, rank, world, job_key, generous,
                         j.told[static_cast<std::size_t>(rank)].handler());
  }
  j.watches[0] = served.get();
}

}  // namespace

TEST(peer_watch, ranks_that_leave_in_order_lose_no_one) {
  job j;
  start(j, 3);
  j.watches[2]->leave();
  j.watches[0]->leave();  // rank 0 before rank 1: still in order
  j.watches[1]->leave();
  j.watches.clear();  // every thread joined: any report would have been made by now
  for (auto& told : j.told) EXPECT_EQ(told.count(), 0U);
}

TEST(peer_watch, a_rank_ending_without_a_goodbye_is_reported_to_every_other_rank) {
  job j;
  start(j, 4);
  j.watches[2].reset();  // its connection closes as a killed process's would
  for (int rank : {0, 1, 3}) {
    auto const reason = j.told[static_cast<std::size_t>(rank)].first_within(generous);
    ASSERT_TRUE(reason) << "rank " << rank << " was not told";
    EXPECT_TRUE(contains(*reason, "rank 2's process has ended")) << *reason;
  }
  EXPECT_TRUE(contains(*j.told[1].first_within(generous), "as rank 0 saw"));
}

TEST(peer_watch, rank_0_ending_without_a_goodbye_is_seen_by_every_other_rank) {
  job j;
  start(j, 3);
  j.watches[0].reset();
  for (int rank : {1, 2}) {
    auto const reason = j.told[static_cast<std::size_t>(rank)].first_within(generous);
    ASSERT_TRUE(reason) << "rank " << rank << " was not told";
    EXPECT_TRUE(contains(*reason, "rank 0's process has ended")) << *reason;
  }
}

TEST(peer_watch, a_killed_process_is_reported_at_once) {
  peer_watch_listener listener;
  int const port = listener.port();
  pid_t const child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // rank 1: joins, then waits to be killed
    auto const watch = peer_watch::join("127.0.0.1", port, 1, 2, job_key, generous, {});
    ::pause();
    ::_exit(0);
  }
  reports told;
  auto const watch = peer_watch::serve(std::move(listener), 2, job_key, generous, told.handler());
  auto const killed = std::chrono::steady_clock::now();
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  auto const reason = told.first_within(generous);
  ASSERT_TRUE(reason);
  EXPECT_TRUE(contains(*reason, "rank 1's process has ended")) << *reason;
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds{5})
      << "a killed peer's connection closes at once; only a poll timeout would take longer";
}

TEST(peer_watch, a_handler_may_end_its_own_watch) {
  // Rank 0's owner lets go of its watch when told, from the watch's own thread, which then
  // finishes alone: what it touches is held by the handler itself.
  struct owner {
    std::mutex mutex;
    std::unique_ptr<peer_watch> watch;
    std::promise<void> ended;
  };
  auto const rank0 = std::make_shared<owner>();
  std::future<void> ended = rank0->ended.get_future();
  peer_watch_listener listener;
  int const port = listener.port();
  auto served = std::async(std::launch::async, [rank0, l = std::move(listener)]() mutable {
    return peer_watch::serve(std::move(l), 2, job_key, generous, [rank0](std::string const&) {
      {
        std::lock_guard<std::mutex> lock{rank0->mutex};
        rank0->watch.reset();
      }
      rank0->ended.set_value();
    });
  });
  auto rank1 = peer_watch::join("127.0.0.1", port, 1, 2, job_key, generous, {});
  {
    std::lock_guard<std::mutex> lock{rank0->mutex};
    rank0->watch = served.get();
  }
  rank1.reset();
  EXPECT_EQ(ended.wait_for(generous), std::future_status::ready);
}

TEST(peer_watch, another_jobs_rank_is_refused_and_the_missing_rank_named) {
  peer_watch_listener listener;
  int const port = listener.port();
  auto served = std::async(std::launch::async, [l = std::move(listener)]() mutable {
    return message_of<graphstep::nccl_error>([&] {
      static_cast<void>(peer_watch::serve(std::move(l), 2, job_key, milliseconds{1500}, {}));
    });
  });
  std::string const refused = message_of<graphstep::nccl_error>([&] {
    static_cast<void>(peer_watch::join("127.0.0.1", port, 1, 2, job_key + 1, generous, {}));
  });
  EXPECT_TRUE(contains(refused, "refused rank 1")) << refused;
  std::string const missing = served.get();
  EXPECT_TRUE(contains(missing, "rank(s) 1 of 2 did not connect")) << missing;
  EXPECT_TRUE(contains(missing, "1 connection(s) of another job dropped")) << missing;
}

TEST(peer_watch, bad_arguments_are_refused_by_name) {
  EXPECT_TRUE(contains(message_of<graphstep::usage_error>([] {
                         static_cast<void>(
                             peer_watch::serve(peer_watch_listener{}, 1, job_key, generous, {}));
                       }),
                       "no peers to watch"));
  EXPECT_TRUE(contains(message_of<graphstep::usage_error>([] {
                         static_cast<void>(
                             peer_watch::join("127.0.0.1", 1, 0, 2, job_key, generous, {}));
                       }),
                       "rank 0 must lie in 1..1"));
}

// A process forked from a rank (a data loader, say) inherits its sockets; were they left open
// in the child, a rank that dies would keep its connection open and be found only at the step
// deadline.
TEST(peer_watch, a_forked_child_does_not_hold_a_ranks_connection_open) {
  job j;
  start(j, 2);
  pid_t const child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // holds whatever it inherited until it is killed
    ::pause();
    ::_exit(0);
  }
  j.watches[1].reset();  // rank 1 ends without a goodbye while the child lives on
  auto const reason = j.told[0].first_within(milliseconds{3000});
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(reason) << "the child kept rank 1's connection open";
  EXPECT_TRUE(contains(*reason, "rank 1's process has ended")) << *reason;
}
