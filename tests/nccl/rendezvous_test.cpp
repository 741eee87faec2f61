// The TCP rendezvous on loopback, with threads as ranks: success for several world sizes and
// every failure it must report instead of hanging.

#include "nccl/detail/rendezvous.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <graphstep/error.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/error_message.hpp"
#include "common/loopback.hpp"
#include "nccl/detail/peer_watch.hpp"
#include "nccl/detail/tcp_store.hpp"

namespace gn = graphstep::nccl;
using std::chrono::milliseconds;

namespace {

gn::unique_id_bytes make_id(unsigned char seed) {
  gn::unique_id_bytes id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<unsigned char>(seed + i);
  return id;
}

using graphstep::testing::catch_as;
using graphstep::testing::closed_port;
using graphstep::testing::connect_to_loopback;
using graphstep::testing::contains;
using graphstep::testing::loopback_address;
using graphstep::testing::loopback_stranger;
using graphstep::testing::message_of;

// Rank 1 of 2 joins whatever listens at 127.0.0.1:`port`; the error it ends with, and how long
// it took.
std::pair<graphstep::nccl_error, std::chrono::steady_clock::duration> join_failure(
    int port, milliseconds timeout) {
  auto const started = std::chrono::steady_clock::now();
  auto error = catch_as<graphstep::nccl_error>(
      [&] { static_cast<void>(gn::detail::rendezvous_join("127.0.0.1", port, 1, 2, timeout)); });
  return {error, std::chrono::steady_clock::now() - started};
}

// A hello as graphstep's ranks send it (protocol version 2): magic, version, rank, world size,
// job token hash, as big-endian 32-bit words.
std::vector<unsigned char> hello_bytes(int rank, int world, std::uint64_t token) {
  std::vector<std::uint32_t> const words{0x47535256,
                                         2,
                                         static_cast<std::uint32_t>(rank),
                                         static_cast<std::uint32_t>(world),
                                         static_cast<std::uint32_t>(token >> 32),
                                         static_cast<std::uint32_t>(token)};
  std::vector<unsigned char> bytes;
  for (std::uint32_t const word : words) {
    for (int shift = 24; shift >= 0; shift -= 8) {
      bytes.push_back(static_cast<unsigned char>(word >> shift));
    }
  }
  return bytes;
}

}  // namespace

TEST(rendezvous, every_rank_receives_rank_zeros_id) {
  for (int world : {2, 3, 8}) {
    gn::detail::rendezvous_server server{0, world};
    auto const id = make_id(static_cast<unsigned char>(world));
    std::vector<std::future<gn::unique_id_bytes>> ranks;
    for (int r = world - 1; r >= 1; --r) {  // arrival order does not matter
      ranks.push_back(std::async(std::launch::async, [&, r] {
        return gn::detail::rendezvous_join("127.0.0.1", server.port(), r, world,
                                           milliseconds{5000});
      }));
    }
    server.serve(id, milliseconds{5000});
    for (auto& rank : ranks) EXPECT_EQ(rank.get(), id) << "world " << world;
  }
}

TEST(rendezvous, a_rank_may_start_before_rank_zero) {
  int const port = closed_port();
  auto const id = make_id(9);
  auto early = std::async(std::launch::async, [&] {
    return gn::detail::rendezvous_join("127.0.0.1", port, 1, 2, milliseconds{5000});
  });
  std::this_thread::sleep_for(milliseconds{200});
  gn::detail::rendezvous_server server{port, 2};
  server.serve(id, milliseconds{5000});
  EXPECT_EQ(early.get(), id);
}

TEST(rendezvous, a_missing_rank_is_named_at_the_deadline) {
  gn::detail::rendezvous_server server{0, 3};
  auto one = std::async(std::launch::async, [&] {
    return message_of<graphstep::nccl_error>([&] {
      static_cast<void>(
          gn::detail::rendezvous_join("127.0.0.1", server.port(), 1, 3, milliseconds{5000}));
    });
  });
  std::string const what =
      message_of<graphstep::nccl_error>([&] { server.serve(make_id(1), milliseconds{300}); });
  EXPECT_NE(what.find("rank(s) 2 of 3 did not arrive"), std::string::npos) << what;
  EXPECT_NE(one.get().find("gave up"), std::string::npos) << "rank 1 is told, not left hanging";
}

TEST(rendezvous, a_timeout_with_no_time_in_it_is_a_usage_error_that_says_so) {
  for (milliseconds const timeout : {milliseconds{0}, milliseconds{-1}}) {
    std::string const expected = "a timeout of " + std::to_string(timeout.count()) + " ms";
    gn::detail::rendezvous_server server{0, 2};
    std::vector<std::string> const messages{
        message_of([&] { server.serve(make_id(1), timeout); }), message_of([&] {
          static_cast<void>(gn::detail::rendezvous_join("127.0.0.1", server.port(), 1, 2, timeout));
        }),
        message_of([&] {
          gn::launch_environment environment;
          environment.world_size = 2;
          environment.rank = 1;
          environment.bootstrap = gn::bootstrap_kind::rendezvous;
          static_cast<void>(gn::detail::exchange_unique_id(environment, make_id(1), timeout));
        }),
        message_of([&] {
          gn::detail::tcp_store store{"127.0.0.1", server.port(), timeout};
        })};
    for (std::string const& what : messages) {
      EXPECT_NE(what.find(expected), std::string::npos) << what;
      EXPECT_NE(what.find("give a positive time"), std::string::npos) << what;
    }
  }
}

TEST(rendezvous, a_wrong_port_fails_at_the_deadline) {
  std::string const what = message_of<graphstep::nccl_error>([&] {
    static_cast<void>(
        gn::detail::rendezvous_join("127.0.0.1", closed_port(), 1, 2, milliseconds{300}));
  });
  EXPECT_NE(what.find("could not reach rank 0"), std::string::npos) << what;
  EXPECT_NE(what.find("MASTER_PORT"), std::string::npos) << what;
}

TEST(rendezvous, a_stranger_that_closes_at_once_is_named_at_once) {
  loopback_stranger stranger{"", loopback_stranger::then::close};
  std::string const port = std::to_string(stranger.port());
  auto const [error, took] = join_failure(stranger.port(), milliseconds{5000});
  std::string const what = error.what();
  EXPECT_EQ(error.code(), 2) << "ncclSystemError, as for any connection that fails";
  EXPECT_LT(took, std::chrono::seconds{1}) << "waited for the deadline: " << what;
  EXPECT_TRUE(contains(what, "127.0.0.1:" + port + " (MASTER_ADDR:MASTER_PORT)")) << what;
  EXPECT_TRUE(contains(what, "closed the connection without answering")) << what;
  EXPECT_TRUE(contains(what, "Check that MASTER_ADDR and MASTER_PORT point at rank 0")) << what;
  EXPECT_TRUE(contains(what, "no other program listens on port " + port)) << what;
  EXPECT_FALSE(contains(what, "within")) << "reported as a timeout: " << what;
}

TEST(rendezvous, a_stranger_that_answers_garbage_is_named_at_once) {
  // An HTTP server answers and closes; an SSH server greets and waits.
  for (auto const& [answer, after] :
       {std::pair{std::string{"HTTP/1.0 400 Bad Request\r\n\r\n"}, loopback_stranger::then::close},
        std::pair{std::string{"SSH-2.0-OpenSSH_9.6\r\n"}, loopback_stranger::then::hold}}) {
    loopback_stranger stranger{answer, after};
    std::string const port = std::to_string(stranger.port());
    auto const [error, took] = join_failure(stranger.port(), milliseconds{5000});
    std::string const what = error.what();
    EXPECT_EQ(error.code(), 2);
    EXPECT_LT(took, std::chrono::seconds{1}) << "waited for the deadline: " << what;
    EXPECT_TRUE(contains(what, "127.0.0.1:" + port + " (MASTER_ADDR:MASTER_PORT)")) << what;
    EXPECT_TRUE(contains(what, "not graphstep's rendezvous protocol")) << what;
    EXPECT_TRUE(contains(what, answer.substr(0, 8))) << "the bytes are shown: " << what;
    EXPECT_TRUE(contains(what, "Check that MASTER_ADDR and MASTER_PORT point at rank 0")) << what;
    EXPECT_TRUE(contains(what, "no other program listens on port " + port)) << what;
  }
}

TEST(rendezvous, a_silent_stranger_is_named_at_the_deadline) {
  loopback_stranger stranger{"", loopback_stranger::then::hold};
  std::string const port = std::to_string(stranger.port());
  auto const [error, took] = join_failure(stranger.port(), milliseconds{300});
  std::string const what = error.what();
  EXPECT_EQ(error.code(), 2);
  EXPECT_GE(took, milliseconds{300}) << "gave up before the deadline: " << what;
  EXPECT_LT(took, std::chrono::milliseconds{1500}) << what;
  EXPECT_TRUE(contains(what, "127.0.0.1:" + port + " (MASTER_ADDR:MASTER_PORT)")) << what;
  EXPECT_TRUE(contains(what, "no answer")) << what;
  EXPECT_TRUE(contains(what, "within 300 ms")) << what;
  EXPECT_TRUE(contains(what, "check that MASTER_ADDR and MASTER_PORT point at rank 0")) << what;
  EXPECT_TRUE(contains(what, "no other program listens on port " + port)) << what;
}

TEST(rendezvous, a_join_keeps_its_deadline_when_rank_zeros_queue_is_full) {
  // A listener that never accepts: once its queue is full, the kernel drops further connection
  // requests and a blocking connect() retries them for a minute or more.
  int const listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = loopback_address(0);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  std::vector<int> queued;
  for (int i = 0; i < 8; ++i) {
    int const fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    static_cast<void>(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address));
    queued.push_back(fd);
  }
  auto const started = std::chrono::steady_clock::now();
  std::string const what = message_of<graphstep::nccl_error>([&] {
    static_cast<void>(gn::detail::rendezvous_join("127.0.0.1", ntohs(address.sin_port), 1, 2,
                                                  milliseconds{1000}));
  });
  auto const took = std::chrono::steady_clock::now() - started;
  EXPECT_LT(took, std::chrono::seconds{3})
      << "a 1 s join took " << std::chrono::duration<double>(took).count() << " s";
  EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
  for (int const fd : queued) ::close(fd);
  ::close(listener);
}

TEST(rendezvous, rank_zero_is_reached_over_ipv6) {
  int const probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 loopback{};
  loopback.sin6_family = AF_INET6;
  loopback.sin6_addr = in6addr_loopback;
  bool const has_ipv6 =
      probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&loopback), sizeof loopback) == 0;
  if (probe >= 0) ::close(probe);
  if (!has_ipv6) GTEST_SKIP() << "this host has no IPv6 loopback";
  gn::detail::rendezvous_server server{0, 2};
  auto const id = make_id(21);
  auto joined = std::async(std::launch::async, [&] {
    return gn::detail::rendezvous_join("::1", server.port(), 1, 2, milliseconds{5000});
  });
  server.serve(id, milliseconds{5000});
  EXPECT_EQ(joined.get(), id);
}

TEST(rendezvous, a_silent_connection_does_not_hold_up_the_ranks_behind_it) {
  gn::detail::rendezvous_server server{0, 3};
  int const silent = connect_to_loopback(server.port());  // connects first, never says a word
  ASSERT_GE(silent, 0);
  auto const id = make_id(31);
  std::vector<std::future<gn::unique_id_bytes>> ranks;
  for (int rank : {1, 2}) {
    ranks.push_back(std::async(std::launch::async, [&, rank] {
      return gn::detail::rendezvous_join("127.0.0.1", server.port(), rank, 3, milliseconds{10000});
    }));
  }
  auto const started = std::chrono::steady_clock::now();
  server.serve(id, milliseconds{10000});
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds{2})
      << "the ranks waited behind the silent client";
  for (auto& rank : ranks) EXPECT_EQ(rank.get(), id);
  ::close(silent);
}

TEST(rendezvous, a_refused_client_is_not_sent_the_id) {
  gn::detail::rendezvous_server server{0, 2};
  auto const id = make_id(41);
  auto refused = std::async(std::launch::async, [&] {
    int const fd = connect_to_loopback(server.port());
    auto const hello = hello_bytes(1, 5, gn::detail::job_token_hash(""));  // another world size
    ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
    std::vector<unsigned char> reply(8 + id.size());
    std::size_t got = 0;
    while (got < reply.size()) {
      ssize_t const n = ::recv(fd, reply.data() + got, reply.size() - got, 0);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    reply.resize(got);
    return reply;
  });
  EXPECT_THROW(server.serve(id, milliseconds{5000}), graphstep::usage_error);
  auto const reply = refused.get();
  ASSERT_EQ(reply.size(), 8 + id.size()) << "the refused client got no full reply";
  for (std::size_t i = 8; i < reply.size(); ++i) {
    ASSERT_EQ(reply[i], 0) << "the reply to a refused client carries the id (byte " << i - 8 << ")";
  }
}

TEST(rendezvous, a_client_of_another_job_can_neither_take_a_rank_nor_abort_the_job) {
  gn::detail::rendezvous_server server{0, 2, "job-7"};
  auto const id = make_id(51);
  // Without the token: as rank 1, then with another world size (which would abort a job).
  auto stranger = std::async(std::launch::async, [&] {
    return message_of<graphstep::usage_error>([&] {
      static_cast<void>(
          gn::detail::rendezvous_join("127.0.0.1", server.port(), 1, 2, milliseconds{5000}));
    });
  });
  auto meddler = std::async(std::launch::async, [&] {
    return message_of<graphstep::usage_error>([&] {
      static_cast<void>(gn::detail::rendezvous_join("127.0.0.1", server.port(), 1, 9,
                                                    milliseconds{5000}, "job-8"));
    });
  });
  auto member = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds{300});
    return gn::detail::rendezvous_join("127.0.0.1", server.port(), 1, 2, milliseconds{5000},
                                       "job-7");
  });
  server.serve(id, milliseconds{5000});
  EXPECT_EQ(member.get(), id);
  EXPECT_NE(stranger.get().find("another GRAPHSTEP_RENDEZVOUS_TOKEN"), std::string::npos);
  EXPECT_NE(meddler.get().find("another GRAPHSTEP_RENDEZVOUS_TOKEN"), std::string::npos);
}

TEST(rendezvous, a_rank_that_registers_and_leaves_is_named) {
  gn::detail::rendezvous_server server{0, 3};
  auto const id = make_id(61);
  auto rank_two = std::async(std::launch::async, [&] {
    return gn::detail::rendezvous_join("127.0.0.1", server.port(), 2, 3, milliseconds{5000});
  });
  int const leaver = connect_to_loopback(server.port());  // says it is rank 1, then exits
  auto const hello = hello_bytes(1, 3, gn::detail::job_token_hash(""));
  ::send(leaver, hello.data(), hello.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(milliseconds{100});
  ::close(leaver);
  std::string const what =
      message_of<graphstep::nccl_error>([&] { server.serve(id, milliseconds{5000}); });
  EXPECT_NE(what.find("rank(s) 1 registered but did not acknowledge"), std::string::npos) << what;
  EXPECT_EQ(rank_two.get(), id);
}

TEST(rendezvous, accept_failing_for_want_of_descriptors_ends_at_the_deadline) {
  // In a child process whose descriptor limit leaves none for accept(): serving must give up
  // at its deadline and say why, not spin on the ever-readable listener.
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the sanitizers' runtime needs descriptors of its own (its memory checks open "
                  "a pipe), which this test leaves none of";
#endif
  gn::detail::rendezvous_server server{0, 2};
  int const client = connect_to_loopback(server.port());  // queued, waiting to be accepted
  ASSERT_GE(client, 0);
  pid_t const child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int const highest = ::dup(0);  // the lowest free descriptor
    rlimit const limit{static_cast<rlim_t>(highest), static_cast<rlim_t>(highest)};
    ::close(highest);
    ::setrlimit(RLIMIT_NOFILE, &limit);
    try {
      server.serve(make_id(71), milliseconds{500});
    } catch (graphstep::nccl_error const& e) {
      ::_exit(std::string{e.what()}.find("accepting connections failed") != std::string::npos ? 0
                                                                                              : 2);
    }
    ::_exit(3);
  }
  int status = 0;
  auto const started = std::chrono::steady_clock::now();
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - started > std::chrono::seconds{10}) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      FAIL() << "serving went on past its deadline while accept() failed";
    }
    std::this_thread::sleep_for(milliseconds{20});
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "no error naming the failed accept";
  ::close(client);
}

TEST(rendezvous, a_mismatched_world_size_fails_on_both_sides) {
  gn::detail::rendezvous_server server{0, 2};
  auto joiner = std::async(std::launch::async, [&] {
    return message_of<graphstep::usage_error>([&] {
      static_cast<void>(
          gn::detail::rendezvous_join("127.0.0.1", server.port(), 1, 3, milliseconds{5000}));
    });
  });
  std::string const what =
      message_of<graphstep::usage_error>([&] { server.serve(make_id(2), milliseconds{5000}); });
  EXPECT_NE(what.find("WORLD_SIZE=3 but rank 0 with WORLD_SIZE=2"), std::string::npos) << what;
  EXPECT_NE(joiner.get().find("another WORLD_SIZE"), std::string::npos);
}

TEST(rendezvous, a_duplicate_rank_fails) {
  gn::detail::rendezvous_server server{0, 3};
  auto first = std::async(std::launch::async, [&] {
    try {
      static_cast<void>(
          gn::detail::rendezvous_join("127.0.0.1", server.port(), 1, 3, milliseconds{5000}));
    } catch (graphstep::error const&) {
    }
  });
  std::this_thread::sleep_for(milliseconds{100});
  auto second = std::async(std::launch::async, [&] {
    try {
      static_cast<void>(
          gn::detail::rendezvous_join("127.0.0.1", server.port(), 1, 3, milliseconds{5000}));
    } catch (graphstep::error const&) {
    }
  });
  std::string const what =
      message_of<graphstep::usage_error>([&] { server.serve(make_id(3), milliseconds{5000}); });
  EXPECT_NE(what.find("two processes were started as rank 1"), std::string::npos) << what;
  first.get();
  second.get();
}

TEST(rendezvous, a_foreign_client_is_dropped_and_counted) {
  gn::detail::rendezvous_server server{0, 2};
  std::thread foreign{[&] {
    int const fd = connect_to_loopback(server.port());
    if (fd >= 0) {
      char const garbage[] = "GET / HTTP/1.0\r\n\r\n";
      ::send(fd, garbage, sizeof garbage, MSG_NOSIGNAL);
      ::close(fd);
    }
  }};
  foreign.join();
  std::string const what =
      message_of<graphstep::nccl_error>([&] { server.serve(make_id(4), milliseconds{400}); });
  EXPECT_NE(what.find("1 connection(s) that did not speak the protocol"), std::string::npos)
      << what;
}

TEST(rendezvous, bad_arguments) {
  EXPECT_THROW(gn::detail::rendezvous_server(70000, 2), graphstep::usage_error);
  EXPECT_THROW(gn::detail::rendezvous_server(0, 0), graphstep::usage_error);
  EXPECT_THROW(
      static_cast<void>(gn::detail::rendezvous_join("127.0.0.1", 1, 0, 2, milliseconds{10})),
      graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(
                   gn::detail::rendezvous_join("no-such-host.invalid", 1, 1, 2, milliseconds{10})),
               graphstep::nccl_error);
}

TEST(rendezvous, exchange_presents_the_environments_token) {
  gn::launch_environment env;
  env.world_size = 2;
  env.bootstrap = gn::bootstrap_kind::rendezvous;
  env.rendezvous_token = "job-3";
  gn::detail::rendezvous_server server{0, 2, "job-3"};
  env.master_port = server.port();
  env.rank = 1;
  auto joined = std::async(std::launch::async, [&] {
    return gn::detail::exchange_unique_id(env, {}, milliseconds{5000}).id;
  });
  server.serve(make_id(81), milliseconds{5000});
  EXPECT_EQ(joined.get(), make_id(81));
}

TEST(rendezvous, exchange_with_one_rank_needs_no_network) {
  gn::launch_environment env;
  auto const id = make_id(5);
  EXPECT_EQ(gn::detail::exchange_unique_id(env, id, milliseconds{10}).id, id);
  EXPECT_FALSE(gn::detail::exchange_unique_id(env, id, milliseconds{10}, true).watch)
      << "one rank has no peers to watch";
}

TEST(rendezvous, a_port_in_use_is_refused_clearly) {
  gn::detail::rendezvous_server first{0, 2};
  std::string const what = message_of<graphstep::nccl_error>([&] {
    gn::detail::rendezvous_server second{first.port(), 2};
  });
  EXPECT_NE(what.find("cannot listen on port " + std::to_string(first.port())), std::string::npos)
      << what;
  EXPECT_NE(what.find("free MASTER_PORT"), std::string::npos) << what;
}

TEST(rendezvous, separate_processes_and_a_rank_that_dies) {
  // Ranks 1 and 2 are child processes; rank 3 dies before it ever connects.
  int const world = 4;
  gn::detail::rendezvous_server server{0, world};
  auto const id = make_id(11);
  std::vector<pid_t> children;
  for (int rank = 1; rank < world; ++rank) {
    pid_t const child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      if (rank == 3) ::_exit(0);  // dies at once
      int status = 1;
      try {
        status = gn::detail::rendezvous_join("127.0.0.1", server.port(), rank, world,
                                             milliseconds{5000}) == id
                     ? 0
                     : 2;
      } catch (graphstep::error const&) {
        status = 3;  // told that rank 0 gave up
      }
      ::_exit(status);
    }
    children.push_back(child);
  }
  std::string const what =
      message_of<graphstep::nccl_error>([&] { server.serve(id, milliseconds{1000}); });
  EXPECT_NE(what.find("rank(s) 3 of 4 did not arrive"), std::string::npos) << what;
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_TRUE(WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3)
        << "a surviving rank neither got the id nor a clear error";
  }
}

TEST(rendezvous, separate_processes_succeed) {
  int const world = 3;
  gn::detail::rendezvous_server server{0, world};
  auto const id = make_id(12);
  std::vector<pid_t> children;
  for (int rank = 1; rank < world; ++rank) {
    pid_t const child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      bool ok = false;
      try {
        ok = gn::detail::rendezvous_join("127.0.0.1", server.port(), rank, world,
                                         milliseconds{5000}) == id;
      } catch (graphstep::error const&) {
      }
      ::_exit(ok ? 0 : 1);
    }
    children.push_back(child);
  }
  server.serve(id, milliseconds{5000});
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

// The rendezvous prepares the peer watch: rank 0 keeps listening at MASTER_PORT, and every
// rank's watch meets it there once the id went round; a rank that then ends without a goodbye
// is reported to the others.
TEST(rendezvous, the_peer_watch_meets_at_master_port_and_reports_a_lost_rank) {
  int const world = 3;
  int const port = closed_port();
  auto environment = [&](int rank) {
    gn::launch_environment env;
    env.world_size = world;
    env.rank = rank;
    env.bootstrap = gn::bootstrap_kind::rendezvous;
    env.master_addr = "127.0.0.1";
    env.master_port = port;
    return env;
  };
  std::vector<std::future<gn::detail::bootstrap_exchange>> others;
  for (int rank = 1; rank < world; ++rank) {
    others.push_back(std::async(std::launch::async, [&, rank] {
      return gn::detail::exchange_unique_id(environment(rank), {}, milliseconds{10000}, true);
    }));
  }
  auto root = gn::detail::exchange_unique_id(environment(0), make_id(9), milliseconds{10000}, true);
  ASSERT_TRUE(root.watch && root.watch->listener);
  EXPECT_EQ(root.watch->listener->port(), port);
  std::vector<gn::detail::bootstrap_exchange> joined;
  for (auto& other : others) joined.push_back(other.get());

  std::uint64_t const key = 42;
  std::mutex mutex;
  std::vector<std::string> told;
  auto record = [&](std::string const& reason) {
    std::lock_guard<std::mutex> lock{mutex};
    told.push_back(reason);
  };
  auto served = std::async(std::launch::async, [&] {
    return gn::detail::peer_watch::serve(std::move(*root.watch->listener), world, key,
                                         milliseconds{10000}, record);
  });
  std::vector<std::unique_ptr<gn::detail::peer_watch>> watches;
  for (int rank = 1; rank < world; ++rank) {
    auto const& meeting = *joined[static_cast<std::size_t>(rank - 1)].watch;
    EXPECT_EQ(meeting.host, "127.0.0.1");
    EXPECT_EQ(meeting.port, port);
    watches.push_back(gn::detail::peer_watch::join(meeting.host, meeting.port, rank, world, key,
                                                   milliseconds{10000}, record));
  }
  auto rank0 = served.get();
  watches[0].reset();  // rank 1 ends without a goodbye
  auto const until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (std::chrono::steady_clock::now() < until) {
    {
      std::lock_guard<std::mutex> lock{mutex};
      if (told.size() >= 2) break;
    }
    std::this_thread::sleep_for(milliseconds{10});
  }
  std::lock_guard<std::mutex> lock{mutex};
  ASSERT_EQ(told.size(), 2U) << "rank 0 and rank 2 are both told";
  for (auto const& reason : told) {
    EXPECT_TRUE(contains(reason, "rank 1's process has ended")) << reason;
  }
}
