// graphstep_core: plain C++, includes no CUDA header.
#include "nccl/detail/tcp_store.hpp"

#include <poll.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <graphstep/error.hpp>
#include <random>
#include <utility>

#include "socket.hpp"

namespace graphstep::nccl::detail {
namespace {

using clock = detail::socket_clock;

constexpr int system_error = 2;  // ncclSystemError

// c10d::detail::QueryType (TCPStoreBackend.hpp): one byte opens every request.
enum class command : std::uint8_t {
  validate = 0,
  set = 1,
  get = 3,
  add = 4,
  check = 5,
  wait = 6,
  cancel_wait = 12,
  ping = 13,
};
// A new connection must send this after `validate` before the store serves it.
constexpr std::uint32_t validation_magic = 0x3C85F7CE;
// c10d::detail::CheckResponseType and WaitResponseType.
constexpr std::uint8_t check_ready = 0;
constexpr std::uint8_t wait_stop_waiting = 0;
constexpr std::uint8_t wait_canceled = 1;
// How long the store gets to confirm a withdrawn wait.
constexpr std::chrono::seconds cancel_limit{5};

[[noreturn]] void fail(std::string const& what) {
  throw nccl_error{system_error, what};
}

// A request as c10d encodes it: integers in host byte order, strings with a 64-bit length.
class request {
 public:
  explicit request(command what) { bytes_.push_back(static_cast<std::uint8_t>(what)); }
  template <typename Integer>
  request& integer(Integer value) {
    auto const* raw = reinterpret_cast<std::uint8_t const*>(&value);
    bytes_.insert(bytes_.end(), raw, raw + sizeof value);
    return *this;
  }
  // PyTorch's TCPStore client puts "/" before every key (its keyPrefix_), so a key reads the
  // same from Python and from here.
  request& key(std::string const& name) {
    GRAPHSTEP_EXPECTS(name.size() < tcp_store_max_key_bytes,
                      "tcp_store: a key of " + std::to_string(name.size()) +
                          " bytes is longer than the store accepts (" +
                          std::to_string(tcp_store_max_key_bytes - 1) + ")");
    integer(static_cast<std::uint64_t>(name.size() + 1));
    bytes_.push_back('/');
    bytes_.insert(bytes_.end(), name.begin(), name.end());
    return *this;
  }
  request& value(std::vector<std::uint8_t> const& data) {
    GRAPHSTEP_EXPECTS(data.size() <= tcp_store_max_value_bytes,
                      "tcp_store: a value of " + std::to_string(data.size()) +
                          " bytes is larger than the store accepts (" +
                          std::to_string(tcp_store_max_value_bytes) + ")");
    integer(static_cast<std::uint64_t>(data.size()));
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    return *this;
  }
  request& keys(std::vector<std::string> const& names) {
    integer(static_cast<std::uint64_t>(names.size()));
    for (auto const& name : names) key(name);
    return *this;
  }
  [[nodiscard]] std::vector<std::uint8_t> const& bytes() const noexcept { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

}  // namespace

tcp_store::tcp_store(std::string const& host, int port, std::chrono::milliseconds timeout)
    : address_{host + ":" + std::to_string(port)}, io_timeout_{timeout} {
  GRAPHSTEP_EXPECTS(port >= 1 && port <= 65535,
                    "tcp_store: port " + std::to_string(port) + " must lie in 1..65535");
  detail::expect_positive_timeout(timeout, "tcp_store");
  // One deadline for connecting and for the store's first answer: the call ends by `timeout`.
  auto const deadline = clock::now() + timeout;
  std::string last_error;
  detail::socket_fd connection = detail::connect_before(host, port, deadline, last_error);
  if (!connection.valid()) {
    fail("tcp_store: no store answered at " + address_ + " within " +
         std::to_string(timeout.count()) + " ms (" + last_error +
         "). Under torchrun, MASTER_ADDR and MASTER_PORT name its agent's store: check that "
         "the agent still runs");
  }
  // A store echoes a ping's number; anything else is not a TCPStore (or one older than the
  // ping, PyTorch 2.4).
  std::uint32_t const nonce = std::random_device{}();
  std::vector<std::uint8_t> introduction =
      request{command::validate}.integer(validation_magic).bytes();
  std::vector<std::uint8_t> const ping = request{command::ping}.integer(nonce).bytes();
  introduction.insert(introduction.end(), ping.begin(), ping.end());
  // A peer that closed at once may make this fail; what it answered before, read below, says
  // more.
  static_cast<void>(
      detail::write_all(connection.get(), introduction.data(), introduction.size(), deadline));
  // The echo, or the first bytes of something else: 16 to show, and one to tell if there was
  // more.
  std::array<unsigned char, 17> answer{};
  std::size_t received = 0;
  auto const answered =
      detail::read_exactly(connection.get(), answer.data(), sizeof nonce, deadline, received);
  if (answered == detail::read_end::complete &&
      std::memcmp(answer.data(), &nonce, sizeof nonce) == 0) {
    fd_ = connection.release();
    return;
  }
  // Not retried: a store that is starting refuses connections (connect_before retries those)
  // until it listens, and then answers every ping; a peer that closes or answers something
  // else is another program, and retrying would only hide it until the deadline.
  std::string what;
  if (std::memcmp(answer.data(), &nonce, received) != 0) {
    what = "it answered its ping with " +
           detail::quoted_answer(connection.get(), answer.data(), answer.size(), received);
  } else if (answered == detail::read_end::closed) {
    what = "it closed the connection without answering its ping";
  } else {
    what = "it did not answer its ping within " + std::to_string(timeout.count()) + " ms";
  }
  fail("tcp_store: the process at " + address_ +
       " (MASTER_ADDR:MASTER_PORT) does not answer as a c10d TCPStore (PyTorch 2.4 or later): " +
       what +
       ". Check that MASTER_ADDR and MASTER_PORT point at the store (under torchrun, its "
       "agent's) and that no other program listens on port " +
       std::to_string(port));
}

tcp_store::~tcp_store() {
  if (fd_ >= 0) ::close(fd_);
}

std::string tcp_store::local_host() const {
  return detail::local_host(fd_);
}

tcp_store::tcp_store(tcp_store&& other) noexcept
    : fd_{std::exchange(other.fd_, -1)},
      address_{std::move(other.address_)},
      io_timeout_{other.io_timeout_} {}

tcp_store& tcp_store::operator=(tcp_store&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    address_ = std::move(other.address_);
    io_timeout_ = other.io_timeout_;
  }
  return *this;
}

void tcp_store::send_bytes(std::vector<std::uint8_t> const& message) const {
  GRAPHSTEP_EXPECTS(fd_ >= 0, "tcp_store: this client was moved from");
  if (!detail::write_all(fd_, message.data(), message.size(), clock::now() + io_timeout_)) {
    fail("tcp_store: the store at " + address_ + " closed the connection or stopped reading");
  }
}

void tcp_store::receive_bytes(void* buffer, std::size_t size, char const* what) const {
  if (!detail::read_exactly(fd_, buffer, size, clock::now() + io_timeout_)) {
    fail("tcp_store: no answer from the store at " + address_ + " to " + what + " within " +
         std::to_string(io_timeout_.count()) + " ms (it closed the connection or hangs)");
  }
}

void tcp_store::set(std::string const& key, std::vector<std::uint8_t> const& value) {
  send_bytes(request{command::set}.key(key).value(value).bytes());
}

std::vector<std::uint8_t> tcp_store::get(std::string const& key,
                                         std::chrono::milliseconds timeout) {
  // c10d's get answers an empty value for a missing key: wait for it first, as its clients do.
  if (!wait({key}, timeout)) {
    fail("tcp_store: key '" + key + "' was not set in the store at " + address_ + " within " +
         std::to_string(timeout.count()) + " ms");
  }
  send_bytes(request{command::get}.key(key).bytes());
  std::uint64_t size = 0;
  receive_bytes(&size, sizeof size, "get");
  if (size > tcp_store_max_value_bytes) {
    fail("tcp_store: the store at " + address_ + " answered a value of " + std::to_string(size) +
         " bytes for '" + key + "', more than a store holds: it is not a c10d TCPStore");
  }
  std::vector<std::uint8_t> value(size);
  if (size > 0) receive_bytes(value.data(), value.size(), "get");
  return value;
}

std::int64_t tcp_store::add(std::string const& key, std::int64_t delta) {
  send_bytes(request{command::add}.key(key).integer(delta).bytes());
  std::int64_t sum = 0;
  receive_bytes(&sum, sizeof sum, "add");
  return sum;
}

bool tcp_store::check(std::vector<std::string> const& keys) {
  send_bytes(request{command::check}.keys(keys).bytes());
  std::uint8_t answer = 0;
  receive_bytes(&answer, sizeof answer, "check");
  return answer == check_ready;
}

bool tcp_store::wait(std::vector<std::string> const& keys, std::chrono::milliseconds timeout) {
  send_bytes(request{command::wait}.keys(keys).bytes());
  std::uint8_t answer = 0;
  if (detail::read_exactly(fd_, &answer, sizeof answer, clock::now() + timeout)) {
    if (answer != wait_stop_waiting) {
      fail("tcp_store: the store at " + address_ + " answered a wait with " +
           std::to_string(answer));
    }
    return true;
  }
  // Withdraw the wait so the connection can serve the next request; the keys may have arrived
  // meanwhile, in which case the store answers "stop waiting" before "canceled".
  send_bytes(request{command::cancel_wait}.bytes());
  auto const deadline = clock::now() + cancel_limit;
  if (!detail::read_exactly(fd_, &answer, sizeof answer, deadline)) {
    fail("tcp_store: the store at " + address_ + " did not confirm a withdrawn wait");
  }
  bool const arrived = answer == wait_stop_waiting;
  if (arrived && !detail::read_exactly(fd_, &answer, sizeof answer, deadline)) {
    fail("tcp_store: the store at " + address_ + " did not confirm a withdrawn wait");
  }
  if (answer != wait_canceled) {
    fail("tcp_store: the store at " + address_ + " answered a withdrawn wait with " +
         std::to_string(answer));
  }
  return arrived;
}

}  // namespace graphstep::nccl::detail
