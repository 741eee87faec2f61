// Deadlines of outstanding steps and the watchdog's verdict (nccl/deadline.hpp): what is
// overdue, and which failure is named first.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/nccl/detail/deadline.hpp>
#include <graphstep/nccl/step_deadline.hpp>
#include <string>
#include <vector>

namespace gn = graphstep::nccl;

TEST(deadline_tracker, times_out_only_past_the_deadline) {
  auto now = std::chrono::steady_clock::time_point{};
  gn::detail::deadline_tracker tracker{std::chrono::milliseconds{500}, [&] { return now; }};
  EXPECT_FALSE(tracker.overdue(0));
  tracker.started(41);
  now += std::chrono::milliseconds{499};
  EXPECT_FALSE(tracker.overdue(0));
  now += std::chrono::milliseconds{2};
  auto const late = tracker.overdue(3);
  ASSERT_TRUE(late);
  EXPECT_NE(late->find("rank 3: step 41"), std::string::npos) << *late;
  EXPECT_NE(late->find("501 ms"), std::string::npos) << *late;
  tracker.finished();
  EXPECT_FALSE(tracker.overdue(3));
  EXPECT_THROW(gn::detail::deadline_tracker(std::chrono::milliseconds{0}), graphstep::usage_error);
}

TEST(deadline_tracker, a_call_in_progress_past_the_deadline_is_overdue) {
  auto now = std::chrono::steady_clock::time_point{};
  gn::detail::deadline_tracker tracker{std::chrono::milliseconds{200}, [&] { return now; }};
  tracker.call_in_progress(true);
  now += std::chrono::milliseconds{150};
  tracker.call_in_progress(true);  // still the same wait: measured from the first look
  EXPECT_FALSE(tracker.overdue(1));
  now += std::chrono::milliseconds{60};
  auto const late = tracker.overdue(1);
  ASSERT_TRUE(late);
  EXPECT_NE(late->find("rank 1: an NCCL call has been in progress for 210 ms"), std::string::npos)
      << *late;
  tracker.call_in_progress(false);  // done: a later call starts afresh
  EXPECT_FALSE(tracker.overdue(1));
  tracker.call_in_progress(true);
  now += std::chrono::milliseconds{199};
  EXPECT_FALSE(tracker.overdue(1));
}

TEST(deadline_tracker, later_launches_do_not_hide_a_hung_step) {
  auto now = std::chrono::steady_clock::time_point{};
  gn::detail::deadline_tracker tracker{std::chrono::milliseconds{100}, [&] { return now; }};
  tracker.started(1);
  for (std::int64_t step = 2; step <= 5; ++step) {
    now += std::chrono::milliseconds{30};
    tracker.started(step);
  }
  EXPECT_EQ(tracker.outstanding_count(), 5U);
  auto const late = tracker.overdue(0);  // step 1 launched 120 ms ago
  ASSERT_TRUE(late);
  EXPECT_NE(late->find("step 1 "), std::string::npos) << *late;
  EXPECT_NE(late->find("4 later step(s)"), std::string::npos) << *late;
  tracker.finished(3);  // steps 1..3 done; step 4 launched 30 ms ago
  EXPECT_EQ(tracker.outstanding_step(), 4);
  EXPECT_FALSE(tracker.overdue(0));
  now += std::chrono::milliseconds{71};
  ASSERT_TRUE(tracker.overdue(0));
  EXPECT_NE(tracker.overdue(0)->find("step 4 has not finished after 101 ms"), std::string::npos);
  EXPECT_THROW(tracker.started(5), graphstep::usage_error) << "step numbers must increase";
  tracker.finished();
  EXPECT_EQ(tracker.outstanding_count(), 0U);
  EXPECT_NO_THROW(tracker.started(0)) << "after all finished, numbering may restart";
}

TEST(watchdog_verdict, nothing_wrong_is_no_reason) {
  gn::detail::watchdog_observation seen;
  seen.rank = 1;
  seen.outstanding = 2;
  seen.oldest_outstanding = 5;
  EXPECT_EQ(gn::detail::watchdog_verdict(seen), "");
  seen.async =
      gn::detail::async_state::in_progress;  // a non-blocking call under way is not an error
  EXPECT_EQ(gn::detail::watchdog_verdict(seen), "");
}

TEST(watchdog_verdict, an_asynchronous_nccl_error_is_named_with_the_outstanding_steps) {
  gn::detail::watchdog_observation seen;
  seen.rank = 3;
  seen.async = gn::detail::async_state::failed;
  seen.async_result = "ncclRemoteError (remote process exited or there was a network error)";
  seen.outstanding = 2;
  seen.oldest_outstanding = 41;
  EXPECT_EQ(gn::detail::watchdog_verdict(seen),
            "rank 3: NCCL reported ncclRemoteError (remote process exited or there was a "
            "network error) asynchronously; 2 step(s) outstanding, oldest step 41");
  seen.overdue = "rank 3: step 41 has not finished";  // the NCCL error explains the delay
  EXPECT_EQ(gn::detail::watchdog_verdict(seen).rfind("rank 3: NCCL reported ncclRemoteError", 0),
            0U);
}

TEST(watchdog_verdict, a_stream_error_comes_first_and_a_missed_deadline_last) {
  gn::detail::watchdog_observation seen;
  seen.rank = 0;
  seen.overdue = "rank 0: step 7 has not finished after 900 ms";
  seen.outstanding = 1;
  seen.oldest_outstanding = 7;
  EXPECT_EQ(gn::detail::watchdog_verdict(seen),
            "rank 0: step 7 has not finished after 900 ms; NCCL's asynchronous state: "
            "ncclSuccess; 1 step(s) outstanding, oldest step 7");
  seen.async = gn::detail::async_state::failed;
  seen.async_result = "ncclSystemError (unhandled system error)";
  seen.stream_error_step = 7;
  seen.stream_error = "cudaErrorIllegalAddress";
  EXPECT_EQ(gn::detail::watchdog_verdict(seen),
            "rank 0, step 7: CUDA reported an error on the watched stream: "
            "cudaErrorIllegalAddress");
}

TEST(step_deadline, adapts_to_the_median_of_the_first_steps_and_never_below_its_floor) {
  using ms = std::chrono::milliseconds;
  gn::step_deadline const adaptive;  // the default
  EXPECT_EQ(adaptive.limit({}), std::chrono::minutes{10}) << "no step measured yet";
  EXPECT_EQ(adaptive.limit({ms{30000}}), ms{600000}) << "20 x the one step measured";
  EXPECT_EQ(adaptive.limit({ms{30000}, ms{100}}), ms{600000})
      << "the upper median: one fast step does not shrink the limit yet";
  EXPECT_EQ(adaptive.limit({ms{30000}, ms{4000}, ms{5000}}), ms{100000});
  EXPECT_EQ(adaptive.limit({ms{30000}, ms{100}, ms{100}}), ms{60000}) << "at least 60 s";
  std::vector<ms> measured(10, ms{5000});
  measured.push_back(ms{1});  // past the first ten: not counted
  measured.push_back(ms{1});
  EXPECT_EQ(adaptive.limit(measured), ms{100000});
  gn::step_deadline const fixed = std::chrono::seconds{7};
  EXPECT_EQ(fixed.limit({ms{1}, ms{1}, ms{1}}), ms{7000});
  EXPECT_EQ(fixed.describe({}), "fixed");
  EXPECT_EQ(adaptive.describe({ms{30000}, ms{4000}, ms{5000}}),
            "adaptive: 20 x the median of 3 measured step(s), 5000 ms, at least 60000 ms");
}

TEST(step_deadline, a_limit_with_no_time_in_it_is_refused_by_name) {
  gn::step_deadline fixed = std::chrono::milliseconds{0};
  EXPECT_THROW(fixed.validate("step_guard"), graphstep::usage_error);
  gn::step_deadline adaptive;
  adaptive.times_median = 0;
  try {
    adaptive.validate("step_guard");
    ADD_FAILURE() << "times_median 0 was accepted";
  } catch (graphstep::usage_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("step_guard: the step deadline's times_median"),
              std::string::npos)
        << e.what();
  }
  adaptive = gn::step_deadline{};
  adaptive.at_least = std::chrono::milliseconds{-1};
  EXPECT_THROW(adaptive.validate("watchdog"), graphstep::usage_error);
}

TEST(deadline_tracker, an_adaptive_deadline_learns_from_the_steps_that_finished) {
  auto now = std::chrono::steady_clock::time_point{};
  gn::step_deadline deadline;
  deadline.at_least = std::chrono::milliseconds{1000};
  deadline.first_step = std::chrono::milliseconds{60000};
  gn::detail::deadline_tracker tracker{deadline, [&] { return now; }};
  tracker.started(1);
  now += std::chrono::milliseconds{50000};  // a slow first step on a loaded machine
  EXPECT_FALSE(tracker.overdue(0)) << "the first step has the first-step limit";
  tracker.finished(1);
  for (std::int64_t step = 2; step <= 4; ++step) {
    tracker.started(step);
    now += std::chrono::milliseconds{100};
    tracker.finished(step);
  }
  EXPECT_EQ(tracker.timeout(), std::chrono::milliseconds{2000}) << "20 x the median, 100 ms";
  tracker.started(5);
  now += std::chrono::milliseconds{2001};
  auto const late = tracker.overdue(0);
  ASSERT_TRUE(late);
  EXPECT_NE(late->find("step 5 has not finished after 2001 ms (deadline 2000 ms, adaptive: 20 x "
                       "the median of 4 measured step(s), 100 ms"),
            std::string::npos)
      << *late;
}
