// graphstep's log: the threshold filters, GRAPHSTEP_LOG_LEVEL's value is read (and a bad one
// reported once), a sink replaces stderr and is put back, and threads log at once.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <graphstep/error.hpp>
#include <graphstep/log.hpp>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "detail/logger.hpp"

namespace gs = graphstep;

namespace {

struct message {
  gs::log_level level;
  std::string text;
};

// A sink that keeps what it is given.
struct recorded {
  std::mutex mutex;
  std::vector<message> messages;

  gs::log_sink sink() {
    return [this](gs::log_level level, std::string_view text) {
      std::lock_guard const lock{mutex};
      messages.push_back({level, std::string{text}});
    };
  }
};

// The library's threshold and sink as a test found them, put back when it ends.
class global_log_restored {
 public:
  global_log_restored() : threshold_{gs::log_threshold()} {}
  ~global_log_restored() {
    gs::set_log_level(threshold_);
    static_cast<void>(gs::set_log_sink({}));
  }
  global_log_restored(global_log_restored const&) = delete;
  global_log_restored& operator=(global_log_restored const&) = delete;
  global_log_restored(global_log_restored&&) = delete;
  global_log_restored& operator=(global_log_restored&&) = delete;

 private:
  gs::log_level threshold_;
};

bool contains(std::string const& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(log, names_and_parses_every_level) {
  for (auto const level : {gs::log_level::off, gs::log_level::error, gs::log_level::warning,
                           gs::log_level::info, gs::log_level::debug}) {
    EXPECT_EQ(gs::parse_log_level(gs::name(level)), level);
  }
  EXPECT_EQ(gs::parse_log_level("DEBUG"), gs::log_level::debug);
  EXPECT_EQ(gs::parse_log_level("Warn"), gs::log_level::warning);
  EXPECT_EQ(gs::parse_log_level(""), std::nullopt);
  EXPECT_EQ(gs::parse_log_level("warnings"), std::nullopt);
  EXPECT_EQ(gs::parse_log_level("3"), std::nullopt);
}

TEST(log, the_threshold_lets_through_what_matters_as_much_or_more) {
  recorded seen;
  gs::detail::logger logger{nullptr, seen.sink()};
  EXPECT_EQ(logger.threshold(), gs::log_level::warning);  // the default
  for (auto const threshold : {gs::log_level::off, gs::log_level::error, gs::log_level::warning,
                               gs::log_level::info, gs::log_level::debug}) {
    logger.set_threshold(threshold);
    seen.messages.clear();
    logger.log(gs::log_level::error, "e");
    logger.log(gs::log_level::warning, "w");
    logger.log(gs::log_level::info, "i");
    logger.log(gs::log_level::debug, "d");
    logger.log(gs::log_level::off, "never a message level");
    std::string passed;
    for (auto const& m : seen.messages) passed += m.text;
    std::string const expected = std::string{"ewid"}.substr(0, static_cast<int>(threshold));
    EXPECT_EQ(passed, expected) << "threshold " << gs::name(threshold);
    EXPECT_EQ(logger.enabled(gs::log_level::info), threshold >= gs::log_level::info);
  }
}

TEST(log, the_environment_sets_the_threshold) {
  EXPECT_EQ(gs::detail::read_log_environment(nullptr).threshold, gs::log_level::warning);
  EXPECT_EQ(gs::detail::read_log_environment("").threshold, gs::log_level::warning);
  for (auto const* value : {"off", "error", "warning", "warn", "INFO", "debug"}) {
    auto const read = gs::detail::read_log_environment(value);
    EXPECT_EQ(read.threshold, gs::parse_log_level(value)) << value;
    EXPECT_EQ(read.problem, "") << value;
  }
  recorded seen;
  gs::detail::logger const logger{"debug", seen.sink()};
  EXPECT_EQ(logger.threshold(), gs::log_level::debug);
  EXPECT_TRUE(seen.messages.empty());
}

TEST(log, a_bad_environment_value_is_reported_once_and_the_default_kept) {
  for (auto const* value : {"verbose", "2", " info", "warning,debug"}) {
    recorded seen;
    gs::detail::logger logger{value, seen.sink()};
    EXPECT_EQ(logger.threshold(), gs::log_level::warning) << value;
    ASSERT_EQ(seen.messages.size(), 1U) << value;
    auto const& said = seen.messages.front();
    EXPECT_EQ(said.level, gs::log_level::warning);
    EXPECT_TRUE(contains(said.text, std::string{"GRAPHSTEP_LOG_LEVEL is \""} + value + "\""))
        << said.text;
    EXPECT_TRUE(contains(said.text, "off, error, warning, info or debug")) << said.text;
    EXPECT_TRUE(contains(said.text, "using warning")) << said.text;
    logger.log(gs::log_level::warning, "later");
    EXPECT_EQ(seen.messages.size(), 2U);  // not said again
  }
}

TEST(log, the_default_sink_writes_one_prefixed_line_to_stderr) {
  global_log_restored const restore;
  gs::set_log_level(gs::log_level::warning);
  ::testing::internal::CaptureStderr();
  gs::log(gs::log_level::warning, "first\n");
  gs::log(gs::log_level::error, "second");
  gs::log(gs::log_level::info, "not shown");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "graphstep [warning]: first\ngraphstep [error]: second\n");
  EXPECT_EQ(gs::detail::format_log_line(gs::log_level::debug, "x\n"), "graphstep [debug]: x\n");
}

TEST(log, a_sink_replaces_stderr_and_the_previous_one_comes_back) {
  global_log_restored const restore;
  gs::set_log_level(gs::log_level::info);
  recorded first;
  recorded second;
  EXPECT_FALSE(static_cast<bool>(gs::set_log_sink(first.sink())));  // the default was in place
  gs::log(gs::log_level::info, "to the first");
  gs::log_sink previous = gs::set_log_sink(second.sink());
  gs::log(gs::log_level::warning, "to the second");
  ASSERT_TRUE(static_cast<bool>(previous));
  static_cast<void>(gs::set_log_sink(std::move(previous)));
  gs::log(gs::log_level::error, "to the first again");
  ASSERT_EQ(first.messages.size(), 2U);
  EXPECT_EQ(first.messages[0].text, "to the first");
  EXPECT_EQ(first.messages[0].level, gs::log_level::info);
  EXPECT_EQ(first.messages[1].text, "to the first again");
  ASSERT_EQ(second.messages.size(), 1U);
  EXPECT_EQ(second.messages[0].text, "to the second");

  ::testing::internal::CaptureStderr();
  static_cast<void>(gs::set_log_sink({}));  // the default again
  gs::log(gs::log_level::warning, "back on stderr");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "graphstep [warning]: back on stderr\n");
  EXPECT_EQ(first.messages.size(), 2U);
}

TEST(log, set_log_level_overrides_the_threshold) {
  global_log_restored const restore;
  recorded seen;
  static_cast<void>(gs::set_log_sink(seen.sink()));
  gs::set_log_level(gs::log_level::off);
  EXPECT_EQ(gs::log_threshold(), gs::log_level::off);
  EXPECT_FALSE(gs::log_enabled(gs::log_level::error));
  gs::log(gs::log_level::error, "silenced");
  gs::set_log_level(gs::log_level::debug);
  EXPECT_TRUE(gs::log_enabled(gs::log_level::debug));
  gs::log(gs::log_level::debug, "detail");
  ASSERT_EQ(seen.messages.size(), 1U);
  EXPECT_EQ(seen.messages[0].text, "detail");
}

TEST(log, a_sink_that_throws_is_reported_and_the_message_still_written) {
  gs::detail::logger logger{nullptr, [](gs::log_level, std::string_view) {
                              throw std::runtime_error{"the trainer's logger is closed"};
                            }};
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(logger.log(gs::log_level::warning, "kept"));
  std::string const said = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(said, "graphstep [error]: the log sink threw: the trainer's logger is closed"))
      << said;
  EXPECT_TRUE(contains(said, "graphstep [warning]: kept\n")) << said;
}

TEST(log, inside_a_sink_messages_go_to_stderr_and_the_sink_stays) {
  gs::detail::logger* self = nullptr;
  std::string refusal;
  int calls = 0;
  gs::detail::logger logger{nullptr, [&](gs::log_level, std::string_view) {
                              ++calls;
                              self->log(gs::log_level::error, "from inside the sink");
                              try {
                                static_cast<void>(self->set_sink({}));
                              } catch (gs::usage_error const& e) {
                                refusal = e.what();
                              }
                            }};
  self = &logger;
  ::testing::internal::CaptureStderr();
  logger.log(gs::log_level::warning, "outer");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "graphstep [error]: from inside the sink\n");
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(contains(refusal, "called from inside a log sink")) << refusal;
  ::testing::internal::CaptureStderr();
  logger.log(gs::log_level::warning, "again");
  static_cast<void>(::testing::internal::GetCapturedStderr());
  EXPECT_EQ(calls, 2);  // the sink was not replaced
}

// Threads log at once while the sink is replaced and the threshold changed: every message that
// passes reaches exactly one sink whole, and the sink is called one call at a time.
TEST(log, threads_log_at_once) {
  constexpr int threads = 8;
  constexpr int each = 500;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  recorded first;
  recorded second;
  auto const counting = [&](recorded& into) {
    return [&into, &inside, &overlaps, sink = into.sink()](gs::log_level level,
                                                           std::string_view text) {
      if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
      sink(level, text);
      inside.fetch_sub(1);
    };
  };
  gs::detail::logger logger{nullptr, counting(first)};
  logger.set_threshold(gs::log_level::debug);
  std::vector<std::thread> loggers;
  for (int t = 0; t < threads; ++t) {
    loggers.emplace_back([&logger, t] {
      for (int i = 0; i < each; ++i) {
        logger.log(gs::log_level::warning,
                   "thread " + std::to_string(t) + " message " + std::to_string(i));
        logger.log(gs::log_level::debug, "debug");
      }
    });
  }
  std::thread changer{[&] {
    for (int i = 0; i < 50; ++i) {
      static_cast<void>(logger.set_sink(counting(i % 2 == 0 ? second : first)));
      logger.set_threshold(i % 2 == 0 ? gs::log_level::warning : gs::log_level::debug);
    }
  }};
  for (auto& thread : loggers) thread.join();
  changer.join();
  EXPECT_EQ(overlaps.load(), 0);
  std::size_t warnings = 0;
  for (auto const* seen : {&first, &second}) {
    for (auto const& m : seen->messages) {
      if (m.level == gs::log_level::debug) {
        EXPECT_EQ(m.text, "debug");
        continue;
      }
      ++warnings;
      int thread = -1;
      int index = -1;
      ASSERT_EQ(std::sscanf(m.text.c_str(), "thread %d message %d", &thread, &index), 2)
          << m.text;
      ASSERT_GE(thread, 0);
      ASSERT_LT(thread, threads);
      EXPECT_GE(index, 0);
      EXPECT_LT(index, each);
    }
  }
  EXPECT_EQ(warnings, std::size_t{threads} * each);  // every warning, whatever the threshold
}
