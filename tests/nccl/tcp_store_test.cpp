// The c10d store client (nccl/detail/tcp_store.hpp) against PyTorch's own TCPStore, both of its
// backends (libuv, which torchrun's agent serves, and the legacy one), and the NCCL id
// exchange through it. Without a Python that has torch (scripts/install-torch.sh), the tests
// that need the store report themselves skipped.

#include "nccl/detail/tcp_store.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <graphstep/error.hpp>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/error_message.hpp"
#include "common/loopback.hpp"
#include "nccl/detail/peer_watch.hpp"
#include "nccl/detail/rendezvous.hpp"

namespace gn = graphstep::nccl;
using graphstep::testing::catch_as;
using graphstep::testing::contains;
using graphstep::testing::loopback_stranger;
using graphstep::testing::message_of;
using std::chrono::milliseconds;

namespace {

// The Python that runs the store: GRAPHSTEP_TORCH_PYTHON, else the project's torch venv.
std::string torch_python() {
  if (char const* chosen = std::getenv("GRAPHSTEP_TORCH_PYTHON")) return chosen;
  std::string const venv = std::string{GRAPHSTEP_TORCH_VENV} + "/bin/python";
  return ::access(venv.c_str(), X_OK) == 0 ? venv : std::string{};
}

// PyTorch's TCPStore in a Python child process, and PyTorch's own client of it.
class python_store {
 public:
  explicit python_store(std::string const& backend) {
    std::string const python = torch_python();
    if (python.empty()) return;
    int to_child[2];
    int from_child[2];
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) return;
    child_ = ::fork();
    if (child_ == 0) {
      ::dup2(to_child[0], STDIN_FILENO);
      ::dup2(from_child[1], STDOUT_FILENO);
      for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
      std::string const script =
          std::string{GRAPHSTEP_TEST_SOURCE_DIR} + "/nccl/torchrun/c10d_store_server.py";
      ::execl(python.c_str(), python.c_str(), script.c_str(), backend.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    to_ = to_child[1];
    from_ = from_child[0];
    std::string const port = line();  // importing torch takes a few seconds
    if (!port.empty()) port_ = std::stoi(port);
  }
  ~python_store() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    if (child_ > 0) {
      int status = 0;
      ::waitpid(child_, &status, 0);
    }
  }
  python_store(python_store const&) = delete;
  python_store& operator=(python_store const&) = delete;

  [[nodiscard]] int port() const { return port_; }

  // One command, answered by PyTorch's client.
  std::string ask(std::string const& command) {
    std::string const text = command + "\n";
    if (::write(to_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) return {};
    return line();
  }

 private:
  std::string line() {
    std::string text;
    char c = 0;
    while (true) {
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, 60000) <= 0 || ::read(from_, &c, 1) != 1) return {};
      if (c == '\n') return text;
      text += c;
    }
  }

  pid_t child_{-1};
  int to_{-1};
  int from_{-1};
  int port_{0};
};

std::string hex(std::vector<std::uint8_t> const& bytes) {
  static char const digits[] = "0123456789abcdef";
  std::string text;
  for (auto const b : bytes) {
    text += digits[b >> 4];
    text += digits[b & 15];
  }
  return text;
}

// A client of whatever listens at 127.0.0.1:`port`; the error it ends with, and how long it
// took.
std::pair<graphstep::nccl_error, std::chrono::steady_clock::duration> connect_failure(
    int port, milliseconds timeout) {
  auto const started = std::chrono::steady_clock::now();
  auto error = catch_as<graphstep::nccl_error>([&] {
    gn::detail::tcp_store{"127.0.0.1", port, timeout};
  });
  return {error, std::chrono::steady_clock::now() - started};
}

class tcp_store_test : public ::testing::TestWithParam<char const*> {
 protected:
  void SetUp() override {
    if (torch_python().empty()) {
      GTEST_SKIP() << "no Python with torch: run scripts/install-torch.sh, or set "
                      "GRAPHSTEP_TORCH_PYTHON";
    }
    server_ = std::make_unique<python_store>(GetParam());
    ASSERT_GT(server_->port(), 0) << "PyTorch's TCPStore did not start";
  }
  gn::detail::tcp_store client(milliseconds timeout = milliseconds{10000}) const {
    return gn::detail::tcp_store{"127.0.0.1", server_->port(), timeout};
  }
  std::unique_ptr<python_store> server_;
};

}  // namespace

INSTANTIATE_TEST_SUITE_P(backends, tcp_store_test, ::testing::Values("libuv", "legacy"));

TEST_P(tcp_store_test, values_read_the_same_from_python_and_from_cpp) {
  auto store = client();
  std::vector<std::uint8_t> const binary{0, 1, 0, 255, 10, 13};  // zeros and line ends too
  store.set("from_cpp", binary);
  EXPECT_EQ(server_->ask("get from_cpp"), hex(binary));
  ASSERT_EQ(server_->ask("set from_python 00ff7f"), "ok");
  EXPECT_EQ(store.get("from_python", milliseconds{1000}), (std::vector<std::uint8_t>{0, 255, 127}));
  store.set("empty", {});
  EXPECT_TRUE(store.get("empty", milliseconds{1000}).empty());
}

TEST_P(tcp_store_test, add_counts_with_pythons_add_as_decimal_text) {
  auto store = client();
  EXPECT_EQ(store.add("counter", 5), 5);
  EXPECT_EQ(server_->ask("add counter 2"), "7");
  EXPECT_EQ(store.add("counter", -1), 6);
  auto const text = store.get("counter", milliseconds{1000});
  EXPECT_EQ(std::string(text.begin(), text.end()), "6");
}

TEST_P(tcp_store_test, get_waits_for_a_key_another_client_sets_later) {
  auto store = client();
  auto later = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds{300});
    auto other = client();
    other.set("late", {42});
  });
  EXPECT_EQ(store.get("late", milliseconds{10000}), std::vector<std::uint8_t>{42});
  later.get();
}

TEST_P(tcp_store_test, a_missing_key_is_named_at_the_deadline_and_the_client_stays_usable) {
  auto store = client();
  EXPECT_FALSE(store.check({"never"}));
  auto const started = std::chrono::steady_clock::now();
  EXPECT_FALSE(store.wait({"never"}, milliseconds{200}));
  std::string const what = message_of<graphstep::nccl_error>(
      [&] { static_cast<void>(store.get("never", milliseconds{200})); });
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds{3});
  EXPECT_NE(what.find("key 'never' was not set"), std::string::npos) << what;
  EXPECT_NE(what.find("within 200 ms"), std::string::npos) << what;
  // The withdrawn waits left nothing behind on the connection.
  store.set("after", {1});
  EXPECT_TRUE(store.check({"after"}));
  EXPECT_EQ(store.add("after_count", 3), 3);
}

TEST_P(tcp_store_test, keys_and_values_beyond_the_stores_limits_are_refused_before_sending) {
  auto store = client();
  std::string const what = message_of<graphstep::usage_error>(
      [&] { store.set(std::string(gn::detail::tcp_store_max_key_bytes, 'k'), {1}); });
  EXPECT_NE(what.find("longer than the store accepts"), std::string::npos) << what;
  EXPECT_THROW(
      store.set("big", std::vector<std::uint8_t>(gn::detail::tcp_store_max_value_bytes + 1)),
      graphstep::usage_error);
  store.set("still", {2});  // nothing half-sent
  EXPECT_EQ(store.get("still", milliseconds{1000}), std::vector<std::uint8_t>{2});
}

TEST_P(tcp_store_test, every_rank_gets_rank_zeros_id_whenever_rank_zero_comes) {
  int const world = 4;
  gn::unique_id_bytes root{};
  for (std::size_t i = 0; i < root.size(); ++i) root[i] = static_cast<unsigned char>(i * 7);
  std::vector<std::future<gn::unique_id_bytes>> ranks;
  for (int rank = 1; rank < world; ++rank) {
    ranks.push_back(std::async(std::launch::async, [&, rank] {
      auto store = client();
      return gn::detail::exchange_unique_id_through_store(store, "job/id/0", rank, {},
                                                          milliseconds{10000});
    }));
  }
  std::this_thread::sleep_for(milliseconds{200});  // the others wait for rank 0
  auto store = client();
  EXPECT_EQ(gn::detail::exchange_unique_id_through_store(store, "job/id/0", 0, root), root);
  for (auto& rank : ranks) EXPECT_EQ(rank.get(), root);
}

TEST_P(tcp_store_test, a_rank_zero_that_never_publishes_is_reported_in_time) {
  auto store = client();
  std::string const what = message_of<graphstep::nccl_error>([&] {
    static_cast<void>(gn::detail::exchange_unique_id_through_store(store, "job/id/absent", 2, {},
                                                                   milliseconds{300}));
  });
  EXPECT_NE(what.find("rank 2 did not receive NCCL's id from rank 0"), std::string::npos) << what;
  store.set("job/id/short", {1, 2, 3});
  std::string const wrong = message_of<graphstep::nccl_error>([&] {
    static_cast<void>(gn::detail::exchange_unique_id_through_store(store, "job/id/short", 1, {},
                                                                   milliseconds{300}));
  });
  EXPECT_NE(wrong.find("holds 3 bytes"), std::string::npos) << wrong;
}

// Without PyTorch: what the client says when no store, or something else, answers.
TEST(tcp_store, no_store_at_the_port_fails_at_the_deadline) {
  int const port = graphstep::testing::closed_port();
  auto const started = std::chrono::steady_clock::now();
  std::string const what = message_of<graphstep::nccl_error>([&] {
    gn::detail::tcp_store{"127.0.0.1", port, milliseconds{300}};
  });
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds{3});
  EXPECT_NE(what.find("no store answered at 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << what;
}

TEST(tcp_store, a_peer_that_is_not_a_store_is_named) {
  // graphstep's own rendezvous listens but never answers a store's ping.
  gn::detail::rendezvous_server not_a_store{0, 2};
  auto const started = std::chrono::steady_clock::now();
  std::string const what = message_of<graphstep::nccl_error>([&] {
    gn::detail::tcp_store{"127.0.0.1", not_a_store.port(), milliseconds{300}};
  });
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds{3});
  EXPECT_NE(what.find("does not answer as a c10d TCPStore"), std::string::npos) << what;
}

TEST(tcp_store, a_stranger_that_closes_at_once_is_named_at_once) {
  loopback_stranger stranger{"", loopback_stranger::then::close};
  std::string const port = std::to_string(stranger.port());
  auto const [error, took] = connect_failure(stranger.port(), milliseconds{5000});
  std::string const what = error.what();
  EXPECT_EQ(error.code(), 2) << "ncclSystemError, as for any connection that fails";
  EXPECT_LT(took, std::chrono::seconds{1}) << "waited for the deadline: " << what;
  EXPECT_TRUE(contains(what, "127.0.0.1:" + port + " (MASTER_ADDR:MASTER_PORT)")) << what;
  EXPECT_TRUE(contains(what, "does not answer as a c10d TCPStore")) << what;
  EXPECT_TRUE(contains(what, "closed the connection without answering")) << what;
  EXPECT_TRUE(contains(what, "Check that MASTER_ADDR and MASTER_PORT point at the store")) << what;
  EXPECT_TRUE(contains(what, "no other program listens on port " + port)) << what;
}

TEST(tcp_store, a_stranger_that_answers_garbage_is_named_at_once) {
  // An HTTP server answers and closes; an SSH server greets and waits.
  for (auto const& [answer, after] :
       {std::pair{std::string{"HTTP/1.0 400 Bad Request\r\n\r\n"}, loopback_stranger::then::close},
        std::pair{std::string{"SSH-2.0-OpenSSH_9.6\r\n"}, loopback_stranger::then::hold}}) {
    loopback_stranger stranger{answer, after};
    std::string const port = std::to_string(stranger.port());
    auto const [error, took] = connect_failure(stranger.port(), milliseconds{5000});
    std::string const what = error.what();
    EXPECT_EQ(error.code(), 2);
    EXPECT_LT(took, std::chrono::seconds{1}) << "waited for the deadline: " << what;
    EXPECT_TRUE(contains(what, "127.0.0.1:" + port + " (MASTER_ADDR:MASTER_PORT)")) << what;
    EXPECT_TRUE(contains(what, "does not answer as a c10d TCPStore")) << what;
    EXPECT_TRUE(contains(what, answer.substr(0, 4))) << "the bytes are shown: " << what;
    EXPECT_TRUE(contains(what, "Check that MASTER_ADDR and MASTER_PORT point at the store"))
        << what;
    EXPECT_TRUE(contains(what, "no other program listens on port " + port)) << what;
  }
}

TEST(tcp_store, a_silent_stranger_is_named_at_the_deadline) {
  loopback_stranger stranger{"", loopback_stranger::then::hold};
  std::string const port = std::to_string(stranger.port());
  auto const [error, took] = connect_failure(stranger.port(), milliseconds{300});
  std::string const what = error.what();
  EXPECT_EQ(error.code(), 2);
  EXPECT_GE(took, milliseconds{300}) << "gave up before the deadline: " << what;
  EXPECT_LT(took, milliseconds{1500}) << what;
  EXPECT_TRUE(contains(what, "127.0.0.1:" + port + " (MASTER_ADDR:MASTER_PORT)")) << what;
  EXPECT_TRUE(contains(what, "does not answer as a c10d TCPStore")) << what;
  EXPECT_TRUE(contains(what, "within 300 ms")) << what;
  EXPECT_TRUE(contains(what, "Check that MASTER_ADDR and MASTER_PORT point at the store")) << what;
  EXPECT_TRUE(contains(what, "no other program listens on port " + port)) << what;
}

TEST(tcp_store, bad_arguments) {
  EXPECT_THROW(gn::detail::tcp_store("127.0.0.1", 0, milliseconds{10}), graphstep::usage_error);
  EXPECT_THROW(gn::detail::tcp_store("127.0.0.1", 70000, milliseconds{10}), graphstep::usage_error);
}

// Under torchrun, rank 0 publishes its peer watch's host|port in the store beside the id, and
// every other rank's watch connects there; a value that is not one is named.
TEST_P(tcp_store_test, the_peer_watch_meets_where_rank_zero_published_it) {
  int const world = 3;
  std::string const key = "job/id/watch";
  gn::detail::peer_watch_listener listener;
  int const watch_port = listener.port();
  std::vector<std::future<gn::detail::peer_watch_meeting>> others;
  for (int rank = 1; rank < world; ++rank) {
    others.push_back(std::async(std::launch::async, [&] {
      auto store = client();
      return gn::detail::find_peer_watch(store, key, milliseconds{10000});
    }));
  }
  auto store = client();
  gn::detail::publish_peer_watch(store, key, watch_port);
  auto served = std::async(std::launch::async, [&] {
    return gn::detail::peer_watch::serve(std::move(listener), world, 1, milliseconds{10000}, {});
  });
  std::vector<std::unique_ptr<gn::detail::peer_watch>> watches;
  for (auto& other : others) {
    auto const meeting = other.get();
    EXPECT_FALSE(meeting.host.empty());
    EXPECT_EQ(meeting.port, watch_port);
    int const rank = static_cast<int>(watches.size()) + 1;
    watches.push_back(gn::detail::peer_watch::join(meeting.host, meeting.port, rank, world, 1,
                                                   milliseconds{10000}, {}));
  }
  auto const rank0 = served.get();
  ASSERT_NE(rank0, nullptr) << "every rank's watch connected to rank 0's";
  rank0->leave();
  for (auto& watch : watches) watch->leave();

  std::string const text = "localhost:80";  // host:port, not host|port
  store.set(gn::detail::peer_watch_store_key("job/id/bad"), {text.begin(), text.end()});
  std::string const what = message_of<graphstep::nccl_error>([&] {
    static_cast<void>(gn::detail::find_peer_watch(store, "job/id/bad", milliseconds{1000}));
  });
  EXPECT_NE(what.find("not rank 0's peer watch as host|port"), std::string::npos) << what;
}
