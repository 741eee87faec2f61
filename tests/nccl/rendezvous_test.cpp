// The TCP rendezvous on loopback, with threads as ranks: success for several world sizes and
// every failure it must report instead of hanging.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <graphstep/error.hpp>
#include <graphstep/nccl/rendezvous.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/error_message.hpp"

namespace gn = graphstep::nccl;
using std::chrono::milliseconds;

namespace {

gn::unique_id_bytes make_id(unsigned char seed) {
  gn::unique_id_bytes id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<unsigned char>(seed + i);
  return id;
}

using graphstep::testing::message_of;

// A port nobody listens on: bind one, then close it.
int closed_port() {
  int const fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace

TEST(rendezvous, every_rank_receives_rank_zeros_id) {
  for (int world : {2, 3, 8}) {
    gn::rendezvous_server server{0, world};
    auto const id = make_id(static_cast<unsigned char>(world));
    std::vector<std::future<gn::unique_id_bytes>> ranks;
    for (int r = world - 1; r >= 1; --r) {  // arrival order does not matter
      ranks.push_back(std::async(std::launch::async, [&, r] {
        return gn::rendezvous_join("127.0.0.1", server.port(), r, world, milliseconds{5000});
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
    return gn::rendezvous_join("127.0.0.1", port, 1, 2, milliseconds{5000});
  });
  std::this_thread::sleep_for(milliseconds{200});
  gn::rendezvous_server server{port, 2};
  server.serve(id, milliseconds{5000});
  EXPECT_EQ(early.get(), id);
}

TEST(rendezvous, a_missing_rank_is_named_at_the_deadline) {
  gn::rendezvous_server server{0, 3};
  auto one = std::async(std::launch::async, [&] {
    return message_of<graphstep::nccl_error>([&] {
      static_cast<void>(gn::rendezvous_join("127.0.0.1", server.port(), 1, 3, milliseconds{5000}));
    });
  });
  std::string const what =
      message_of<graphstep::nccl_error>([&] { server.serve(make_id(1), milliseconds{300}); });
  EXPECT_NE(what.find("rank(s) 2 of 3 did not arrive"), std::string::npos) << what;
  EXPECT_NE(one.get().find("gave up"), std::string::npos) << "rank 1 is told, not left hanging";
}

TEST(rendezvous, a_wrong_port_fails_at_the_deadline) {
  std::string const what = message_of<graphstep::nccl_error>([&] {
    static_cast<void>(gn::rendezvous_join("127.0.0.1", closed_port(), 1, 2, milliseconds{300}));
  });
  EXPECT_NE(what.find("could not reach rank 0"), std::string::npos) << what;
  EXPECT_NE(what.find("MASTER_PORT"), std::string::npos) << what;
}

TEST(rendezvous, a_join_keeps_its_deadline_when_rank_zeros_queue_is_full) {
  // A listener that never accepts: once its queue is full, the kernel drops further connection
  // requests and a blocking connect() retries them for a minute or more.
  int const listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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
    static_cast<void>(
        gn::rendezvous_join("127.0.0.1", ntohs(address.sin_port), 1, 2, milliseconds{1000}));
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
  gn::rendezvous_server server{0, 2};
  auto const id = make_id(21);
  auto joined = std::async(std::launch::async, [&] {
    return gn::rendezvous_join("::1", server.port(), 1, 2, milliseconds{5000});
  });
  server.serve(id, milliseconds{5000});
  EXPECT_EQ(joined.get(), id);
}

TEST(rendezvous, a_mismatched_world_size_fails_on_both_sides) {
  gn::rendezvous_server server{0, 2};
  auto joiner = std::async(std::launch::async, [&] {
    return message_of<graphstep::usage_error>([&] {
      static_cast<void>(gn::rendezvous_join("127.0.0.1", server.port(), 1, 3, milliseconds{5000}));
    });
  });
  std::string const what =
      message_of<graphstep::usage_error>([&] { server.serve(make_id(2), milliseconds{5000}); });
  EXPECT_NE(what.find("WORLD_SIZE=3 but rank 0 with WORLD_SIZE=2"), std::string::npos) << what;
  EXPECT_NE(joiner.get().find("another WORLD_SIZE"), std::string::npos);
}

TEST(rendezvous, a_duplicate_rank_fails) {
  gn::rendezvous_server server{0, 3};
  auto first = std::async(std::launch::async, [&] {
    try {
      static_cast<void>(gn::rendezvous_join("127.0.0.1", server.port(), 1, 3, milliseconds{5000}));
    } catch (graphstep::error const&) {
    }
  });
  std::this_thread::sleep_for(milliseconds{100});
  auto second = std::async(std::launch::async, [&] {
    try {
      static_cast<void>(gn::rendezvous_join("127.0.0.1", server.port(), 1, 3, milliseconds{5000}));
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
  gn::rendezvous_server server{0, 2};
  std::thread foreign{[&] {
    int const fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<std::uint16_t>(server.port()));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
      char const garbage[] = "GET / HTTP/1.0\r\n\r\n";
      ::send(fd, garbage, sizeof garbage, MSG_NOSIGNAL);
    }
    ::close(fd);
  }};
  foreign.join();
  std::string const what =
      message_of<graphstep::nccl_error>([&] { server.serve(make_id(4), milliseconds{400}); });
  EXPECT_NE(what.find("1 connection(s) that did not speak the protocol"), std::string::npos)
      << what;
}

TEST(rendezvous, bad_arguments) {
  EXPECT_THROW(gn::rendezvous_server(70000, 2), graphstep::usage_error);
  EXPECT_THROW(gn::rendezvous_server(0, 0), graphstep::usage_error);
  EXPECT_THROW(static_cast<void>(gn::rendezvous_join("127.0.0.1", 1, 0, 2, milliseconds{10})),
               graphstep::usage_error);
  EXPECT_THROW(
      static_cast<void>(gn::rendezvous_join("no-such-host.invalid", 1, 1, 2, milliseconds{10})),
      graphstep::nccl_error);
}

TEST(rendezvous, exchange_with_one_rank_needs_no_network) {
  gn::launch_environment env;
  auto const id = make_id(5);
  EXPECT_EQ(gn::exchange_unique_id(env, id, milliseconds{10}), id);
}

TEST(rendezvous, a_port_in_use_is_refused_clearly) {
  gn::rendezvous_server first{0, 2};
  std::string const what = message_of<graphstep::nccl_error>([&] {
    gn::rendezvous_server second{first.port(), 2};
  });
  EXPECT_NE(what.find("cannot listen on port " + std::to_string(first.port())), std::string::npos)
      << what;
  EXPECT_NE(what.find("free MASTER_PORT"), std::string::npos) << what;
}

TEST(rendezvous, separate_processes_and_a_rank_that_dies) {
  // Ranks 1 and 2 are child processes; rank 3 dies before it ever connects.
  int const world = 4;
  gn::rendezvous_server server{0, world};
  auto const id = make_id(11);
  std::vector<pid_t> children;
  for (int rank = 1; rank < world; ++rank) {
    pid_t const child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      if (rank == 3) ::_exit(0);  // dies at once
      int status = 1;
      try {
        status =
            gn::rendezvous_join("127.0.0.1", server.port(), rank, world, milliseconds{5000}) == id
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
  gn::rendezvous_server server{0, world};
  auto const id = make_id(12);
  std::vector<pid_t> children;
  for (int rank = 1; rank < world; ++rank) {
    pid_t const child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      bool ok = false;
      try {
        ok = gn::rendezvous_join("127.0.0.1", server.port(), rank, world, milliseconds{5000}) == id;
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
