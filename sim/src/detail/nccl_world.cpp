#include "detail/nccl_world.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

#include "detail/matmul.hpp"
#include "detail/runtime_state.hpp"

namespace graphstep::sim::detail::nccl {
namespace {

static_assert(std::atomic<std::uint64_t>::is_always_lock_free &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "the shared counters must be lock-free to live in memory shared between processes");

constexpr int max_ranks = 64;
// Bytes one rank contributes to one exchange: larger collectives take several exchanges.
constexpr std::size_t slot_bytes = std::size_t{1} << 20;
// Bytes one send moves through its channel at a time: larger messages take several chunks.
constexpr std::size_t chunk_bytes = std::size_t{1} << 17;
constexpr std::uint32_t world_magic = 0x4E43434CU;  // "NCCL"

enum rank_presence : std::int32_t { absent = 0, joined = 1, departed = 2 };

// What an exchange's ranks must agree on; written before `posted` is published.
struct exchange_header {
  std::uint32_t kind{};
  std::int32_t type{};
  std::int32_t op{};
  std::int32_t root{};
  std::uint64_t count{};
  bool operator==(exchange_header const& other) const noexcept {
    return kind == other.kind && type == other.type && op == other.op && root == other.root &&
           count == other.count;
  }
};

struct shared_rank {
  std::atomic<std::int32_t> presence;
  std::atomic<std::int32_t> pid;
  std::atomic<std::uint64_t> posted;     // the last exchange whose part this rank published
  std::atomic<std::uint64_t> consumed;   // the last exchange this rank finished reading
  std::atomic<std::uint32_t> connected;  // a bit per collective kind this rank has offered
  exchange_header exchange;
};

// What a sender wrote beside a chunk; the receiver checks the first chunk of each message.
struct chunk_header {
  std::uint64_t message{};  // the sender's messages on this channel so far, this one included
  std::uint64_t count{};
  std::int32_t type{};
  std::uint32_t first{};  // the message's first chunk
  std::uint64_t bytes{};
};

// One direction between two ranks, with a slot of chunk_bytes in the segment. The sender writes
// a chunk when the slot is free (taken == posted), then publishes posted; the receiver copies it
// out, then publishes taken.
struct channel {
  std::atomic<std::uint64_t> posted;
  std::atomic<std::uint64_t> taken;
  std::atomic<std::uint32_t> broken;  // a matched pair disagreed: the channel is dead
  std::uint64_t messages;             // written by the sender only
  chunk_header chunk;
  chunk_header refused;  // the receive that broke the channel: count and type, for the sender
};

// What both ends of a matched pair that disagree report.
std::string mismatch(int from, int to, chunk_header const& sent, chunk_header const& received) {
  return "rank " + std::to_string(to) + "'s ncclRecv(count " + std::to_string(received.count) +
         ", type " + std::to_string(received.type) + ") from rank " + std::to_string(from) +
         " was matched with rank " + std::to_string(from) + "'s ncclSend(count " +
         std::to_string(sent.count) + ", type " + std::to_string(sent.type) + ") to rank " +
         std::to_string(to) + " (their message " + std::to_string(sent.message) +
         "): a matched send and receive must agree on count and type";
}

// The segment begins with this header; the ranks' slots follow. Zero-filled by ftruncate, which
// is every field's starting value.
struct shared_header {
  std::atomic<std::uint32_t> magic;
  std::atomic<std::int32_t> ranks;
  std::atomic<std::int32_t> joined;
  std::atomic<std::uint32_t> wake;
  std::array<shared_rank, max_ranks> rank;
  std::array<std::array<channel, max_ranks>, max_ranks> channels;  // [from][to]
};

// The header, a slot per rank for collectives, then a chunk slot per ordered pair of ranks.
std::size_t segment_bytes(int ranks) {
  auto const n = static_cast<std::size_t>(ranks);
  return sizeof(shared_header) + n * slot_bytes + n * n * chunk_bytes;
}

void wake_everyone(std::atomic<std::uint32_t>& word) {
  word.fetch_add(1);
  static_cast<void>(syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT_MAX,
                            nullptr, nullptr, 0));
}

// A process that exited is gone, reaped or not: until its parent waits for it, a zombie still
// answers kill(pid, 0), so its state in /proc (proc(5): "Z", or "X" while it is reaped) decides.
bool process_gone(std::int32_t pid) {
  if (pid <= 0 || pid == getpid()) return false;
  if (kill(pid, 0) == -1 && errno == ESRCH) return true;
  std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
  std::string line;
  if (!std::getline(stat, line)) return false;
  // "pid (command) state ...": the command may hold spaces and parentheses; the state follows
  // the last ')'.
  auto const closing = line.rfind(')');
  if (closing == std::string::npos || closing + 2 >= line.size()) return false;
  char const state = line[closing + 2];
  return state == 'Z' || state == 'X';
}

// --- arithmetic: as NCCL's kernels compute (src/device/reduce_kernel.h; ncclAvg is a sum of
// inputs premultiplied by 1/nranks for floating types and a sum divided by nranks for integers,
// src/enqueue.cc). Ranks are combined in rank order, each step rounded to the element type.

template <typename T>
T combine(T a, T b, ncclRedOp_t op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ncclProd: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case ncclMax: return std::max(a, b);
      case ncclMin: return std::min(a, b);
      default: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));  // wraps, as a GPU
    }
  } else {
    switch (op) {
      case ncclProd: return a * b;
      case ncclMax: return a < b ? b : a;
      case ncclMin: return b < a ? b : a;
      default: return a + b;
    }
  }
}

template <typename T>
void reduce_typed(unsigned char const* const* parts, int ranks, std::size_t elements,
                  ncclRedOp_t op, unsigned char* out) {
  for (std::size_t i = 0; i < elements; ++i) {
    auto read = [&](int r) {
      T value;
      std::memcpy(&value, parts[r] + i * sizeof(T), sizeof(T));
      if constexpr (std::is_floating_point_v<T>) {
        if (op == ncclAvg) value *= static_cast<T>(1.0 / ranks);
      }
      return value;
    };
    T acc = read(0);
    for (int r = 1; r < ranks; ++r) acc = combine(acc, read(r), op);
    if constexpr (std::is_integral_v<T>) {
      if (op == ncclAvg) acc = static_cast<T>(acc / static_cast<T>(ranks));
    }
    std::memcpy(out + i * sizeof(T), &acc, sizeof(T));
  }
}

// fp16 and bf16: each operation in fp32, rounded back to the type (as __hadd and __hmul round).
void reduce_half(unsigned char const* const* parts, int ranks, std::size_t elements, ncclRedOp_t op,
                 element_type type, unsigned char* out) {
  auto round = [type](float value) {
    std::uint16_t bits = 0;
    store_element(&bits, type, 0, value);
    return load_element(&bits, type, 0);
  };
  float const scale = round(static_cast<float>(1.0 / ranks));
  for (std::size_t i = 0; i < elements; ++i) {
    auto read = [&](int r) {
      float const value = load_element(parts[r], type, static_cast<std::int64_t>(i));
      return op == ncclAvg ? round(value * scale) : value;
    };
    float acc = read(0);
    for (int r = 1; r < ranks; ++r) acc = round(combine(acc, read(r), op));
    store_element(out, type, static_cast<std::int64_t>(i), acc);
  }
}

// ncclRedOpCreatePreMulSum's local step: each element times the scalar, rounded to the type
// (fp16 and bf16 multiplied in fp32, as __hmul rounds; integers wrap).
template <typename T>
void premultiply_typed(unsigned char* data, std::size_t elements, unsigned char const* scalar) {
  T factor;
  std::memcpy(&factor, scalar, sizeof(T));
  for (std::size_t i = 0; i < elements; ++i) {
    T value;
    std::memcpy(&value, data + i * sizeof(T), sizeof(T));
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      value = static_cast<T>(static_cast<U>(value) * static_cast<U>(factor));
    } else {
      value *= factor;
    }
    std::memcpy(data + i * sizeof(T), &value, sizeof(T));
  }
}

void premultiply(unsigned char* data, std::size_t elements, ncclDataType_t type,
                 unsigned char const* scalar) {
  switch (type) {
    case ncclInt8: premultiply_typed<std::int8_t>(data, elements, scalar); break;
    case ncclUint8: premultiply_typed<std::uint8_t>(data, elements, scalar); break;
    case ncclInt32: premultiply_typed<std::int32_t>(data, elements, scalar); break;
    case ncclUint32: premultiply_typed<std::uint32_t>(data, elements, scalar); break;
    case ncclInt64: premultiply_typed<std::int64_t>(data, elements, scalar); break;
    case ncclUint64: premultiply_typed<std::uint64_t>(data, elements, scalar); break;
    case ncclFloat32: premultiply_typed<float>(data, elements, scalar); break;
    case ncclFloat64: premultiply_typed<double>(data, elements, scalar); break;
    case ncclFloat16:
    case ncclBfloat16: {
      element_type const half =
          type == ncclFloat16 ? element_type::float16 : element_type::bfloat16;
      float const factor = load_element(scalar, half, 0);
      for (std::size_t i = 0; i < elements; ++i) {
        auto const at = static_cast<std::int64_t>(i);
        store_element(data, half, at, load_element(data, half, at) * factor);
      }
      break;
    }
    default: break;  // refused at the call
  }
}

void reduce(unsigned char const* const* parts, int ranks, std::size_t elements, ncclDataType_t type,
            ncclRedOp_t op, unsigned char* out) {
  switch (type) {
    case ncclInt8: reduce_typed<std::int8_t>(parts, ranks, elements, op, out); break;
    case ncclUint8: reduce_typed<std::uint8_t>(parts, ranks, elements, op, out); break;
    case ncclInt32: reduce_typed<std::int32_t>(parts, ranks, elements, op, out); break;
    case ncclUint32: reduce_typed<std::uint32_t>(parts, ranks, elements, op, out); break;
    case ncclInt64: reduce_typed<std::int64_t>(parts, ranks, elements, op, out); break;
    case ncclUint64: reduce_typed<std::uint64_t>(parts, ranks, elements, op, out); break;
    case ncclFloat32: reduce_typed<float>(parts, ranks, elements, op, out); break;
    case ncclFloat64: reduce_typed<double>(parts, ranks, elements, op, out); break;
    case ncclFloat16: reduce_half(parts, ranks, elements, op, element_type::float16, out); break;
    case ncclBfloat16: reduce_half(parts, ranks, elements, op, element_type::bfloat16, out); break;
    default: break;  // refused at the call
  }
}

}  // namespace

// The mapping of one world's segment, shared by the ranks of this process that joined it. The
// descriptor stays open for the lock that orders creating, replacing and removing the name.
class world {
 public:
  world(std::string name, int descriptor, void* mapping, std::size_t bytes) noexcept
      : name_{std::move(name)}, descriptor_{descriptor}, mapping_{mapping}, bytes_{bytes} {}
  world(world const&) = delete;
  world& operator=(world const&) = delete;
  world(world&&) = delete;
  world& operator=(world&&) = delete;
  ~world() {
    munmap(mapping_, bytes_);
    close(descriptor_);
  }
  [[nodiscard]] shared_header& header() const noexcept {
    return *static_cast<shared_header*>(mapping_);
  }
  [[nodiscard]] unsigned char* slot(int rank) const noexcept {
    return static_cast<unsigned char*>(mapping_) + sizeof(shared_header) +
           static_cast<std::size_t>(rank) * slot_bytes;
  }
  // The chunk slot of the channel from `from` to `to`, in a world of `ranks`.
  [[nodiscard]] unsigned char* chunk_slot(int ranks, int from, int to) const noexcept {
    auto const n = static_cast<std::size_t>(ranks);
    return static_cast<unsigned char*>(mapping_) + sizeof(shared_header) + n * slot_bytes +
           (static_cast<std::size_t>(from) * n + static_cast<std::size_t>(to)) * chunk_bytes;
  }
  [[nodiscard]] std::string const& name() const noexcept { return name_; }
  [[nodiscard]] int descriptor() const noexcept { return descriptor_; }

 private:
  std::string name_;
  int descriptor_;
  void* mapping_;
  std::size_t bytes_;
};

namespace {

// Whether `name` still names the segment open as `descriptor` (glibc keeps POSIX shared memory
// in /dev/shm): another process may have removed or replaced it since it was opened.
bool still_named(int descriptor, std::string const& name) {
  struct stat by_descriptor {};
  struct stat by_name {};
  return fstat(descriptor, &by_descriptor) == 0 &&
         stat(("/dev/shm" + name).c_str(), &by_name) == 0 &&
         by_descriptor.st_dev == by_name.st_dev && by_descriptor.st_ino == by_name.st_ino;
}

// A rank that joined and is still there: its process lives and it has not left.
bool present(shared_rank const& rank) {
  return rank.presence.load() == joined && !process_gone(rank.pid.load());
}

// A world some ranks joined, none of them still there, that never became complete (the name is
// removed once every rank has joined): what a job killed during its rendezvous leaves behind,
// which a job reusing its NCCL_COMM_ID must not join.
bool abandoned(shared_header const& header) {
  std::int32_t const ranks = header.ranks.load();
  if (ranks <= 0 || header.joined.load() >= ranks) return false;
  for (std::int32_t r = 0; r < ranks && r < max_ranks; ++r) {
    if (present(header.rank.at(static_cast<std::size_t>(r)))) return false;
  }
  return true;
}

}  // namespace

void remove_abandoned_worlds() noexcept {
  DIR* const directory = opendir("/dev/shm");
  if (directory == nullptr) return;
  while (dirent const* entry = readdir(directory)) {
    std::string const name = std::string{"/"} + entry->d_name;
    if (name.rfind("/graphstep-nccl-", 0) != 0) continue;
    int const fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) continue;
    struct stat status {};
    // A segment being joined is locked: left for its ranks.
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && still_named(fd, name) && fstat(fd, &status) == 0 &&
        static_cast<std::size_t>(status.st_size) >= sizeof(shared_header)) {
      void* const mapping = mmap(nullptr, sizeof(shared_header), PROT_READ, MAP_SHARED, fd, 0);
      if (mapping != MAP_FAILED) {
        if (abandoned(*static_cast<shared_header const*>(mapping))) shm_unlink(name.c_str());
        munmap(mapping, sizeof(shared_header));
      }
    }
    close(fd);  // and the lock with it
  }
  closedir(directory);
}

peer_failure peer_failure_mode() {
  char const* const value = std::getenv("GRAPHSTEP_SIM_NCCL_PEER_FAILURE");
  return value != nullptr && std::strcmp(value, "remote_error") == 0 ? peer_failure::remote_error
                                                                     : peer_failure::hang;
}

char const* name(collective_kind kind) noexcept {
  switch (kind) {
    case collective_kind::all_reduce: return "AllReduce";
    case collective_kind::reduce: return "Reduce";
    case collective_kind::reduce_scatter: return "ReduceScatter";
    case collective_kind::all_gather: return "AllGather";
    case collective_kind::broadcast: return "Broadcast";
    case collective_kind::send: return "Send";
    case collective_kind::receive: return "Recv";
  }
  return "?";
}

std::size_t element_bytes(ncclDataType_t type) noexcept {
  switch (type) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}

ncclResult_t rank_link::join(ncclUniqueId const& id, int ranks, int rank,
                             std::unique_ptr<rank_link>& out, std::string& error) {
  if (ranks > max_ranks) {
    error = "the simulated NCCL models at most " + std::to_string(max_ranks) + " ranks, not " +
            std::to_string(ranks);
    return ncclInvalidArgument;
  }
  // ncclGetUniqueId writes a name for the segment (NUL-terminated) into the id.
  std::string const segment{id.internal, strnlen(id.internal, sizeof id.internal)};
  if (segment.rfind("/graphstep-nccl-", 0) != 0) {
    error =
        "the ncclUniqueId was not made by ncclGetUniqueId (did every rank receive rank 0's "
        "id intact?)";
    return ncclInvalidArgument;
  }
  remove_abandoned_worlds();
  std::size_t const bytes = segment_bytes(ranks);
  std::shared_ptr<world> shared;
  // Creating, replacing and removing the name happen under an exclusive lock of the segment, so
  // that every joining rank ends up in the one segment the name holds while it joins.
  while (shared == nullptr) {
    int const fd = shm_open(segment.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
      error = "shm_open(" + segment +
              ") failed: " + std::strerror(errno);  // NOLINT(concurrency-mt-unsafe)
      return ncclSystemError;
    }
    if (flock(fd, LOCK_EX) != 0 || !still_named(fd, segment)) {
      close(fd);  // removed or replaced meanwhile: open what the name holds now
      continue;
    }
    struct stat status {};
    bool const sized =
        fstat(fd, &status) == 0 && (static_cast<std::size_t>(status.st_size) >= bytes ||
                                    ftruncate(fd, static_cast<off_t>(bytes)) == 0);
    void* const mapping =
        sized ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (mapping == MAP_FAILED) {
      int const saved_errno = errno;
      close(fd);
      // NOLINTNEXTLINE(concurrency-mt-unsafe): errors of one call, read at once
      error = "mapping the shared segment " + segment + " failed: " + std::strerror(saved_errno);
      return ncclSystemError;
    }
    shared = std::make_shared<world>(segment, fd, mapping, bytes);
    if (abandoned(shared->header())) {
      shm_unlink(segment.c_str());
      shared.reset();  // unlocks; the next round creates the segment afresh
    }
  }
  struct unlock_at_exit {
    int fd;
    unlock_at_exit(unlock_at_exit const&) = delete;
    unlock_at_exit& operator=(unlock_at_exit const&) = delete;
    unlock_at_exit(unlock_at_exit&&) = delete;
    unlock_at_exit& operator=(unlock_at_exit&&) = delete;
    ~unlock_at_exit() { flock(fd, LOCK_UN); }
  } const unlock{shared->descriptor()};
  shared_header& header = shared->header();
  std::int32_t expected = 0;
  if (!header.ranks.compare_exchange_strong(expected, ranks) && expected != ranks) {
    error = "rank " + std::to_string(rank) + " was told of " + std::to_string(ranks) +
            " ranks, but another rank of the same unique id of " + std::to_string(expected) +
            ": every rank must pass the same nranks";
    return ncclInvalidUsage;
  }
  std::int32_t was = absent;
  if (!header.rank[rank].presence.compare_exchange_strong(was, joined)) {
    error = "rank " + std::to_string(rank) +
            " of this unique id has joined already: every rank "
            "must pass a distinct rank";
    return ncclInvalidUsage;
  }
  header.magic.store(world_magic);
  header.rank[rank].pid.store(static_cast<std::int32_t>(getpid()));
  if (header.joined.fetch_add(1) + 1 == ranks) {
    shm_unlink(segment.c_str());  // every rank has it mapped: the name is no longer needed
  }
  wake_everyone(header.wake);
  out.reset(new rank_link{std::move(shared), rank, ranks});
  return ncclSuccess;
}

rank_link::rank_link(std::shared_ptr<world> shared, int rank, int ranks) noexcept
    : world_{std::move(shared)}, rank_{rank}, ranks_{ranks} {}

rank_link::~rank_link() {
  leave();
}

void rank_link::leave() noexcept {
  shared_header& header = world_->header();
  if (header.rank[rank_].presence.exchange(departed) == departed) return;
  wake_everyone(header.wake);
  // The last rank of a world that never became complete takes its name along: nobody is left
  // to remove it, and the segment would outlive the job.
  if (flock(world_->descriptor(), LOCK_EX) != 0) return;
  if (abandoned(header) && still_named(world_->descriptor(), world_->name())) {
    shm_unlink(world_->name().c_str());
  }
  flock(world_->descriptor(), LOCK_UN);
}

bool rank_link::everyone_joined() const noexcept {
  return world_->header().joined.load() >= ranks_;
}

std::atomic<std::uint32_t>* rank_link::wake_word() const noexcept {
  return &world_->header().wake;
}

void rank_link::wait_for_change(std::uint32_t seen, int timeout_ms) const noexcept {
  timespec const timeout{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1'000'000};
  static_cast<void>(syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(wake_word()), FUTEX_WAIT,
                            seen, &timeout, nullptr, 0));
}

int rank_link::departed_peer() const noexcept {
  shared_header const& header = world_->header();
  for (int r = 0; r < ranks_; ++r) {
    if (r == rank_) continue;
    std::int32_t const presence = header.rank[r].presence.load();
    if (presence == departed || (presence == joined && process_gone(header.rank[r].pid.load()))) {
      return r;
    }
  }
  return -1;
}

void rank_link::offer_connection(collective_kind kind) noexcept {
  shared_header& header = world_->header();
  std::uint32_t const bit = 1U << static_cast<std::uint32_t>(kind);
  if ((header.rank[rank_].connected.fetch_or(bit) & bit) == 0) wake_everyone(header.wake);
}

ncclResult_t rank_link::wait_connected(collective_kind kind,
                                       std::atomic<bool> const& stop) const noexcept {
  shared_header const& header = world_->header();
  std::uint32_t const bit = 1U << static_cast<std::uint32_t>(kind);
  bool const remote_errors = peer_failure_mode() == peer_failure::remote_error;
  auto everyone = [&] {
    for (int r = 0; r < ranks_; ++r) {
      if ((header.rank[r].connected.load() & bit) == 0) return false;
    }
    return true;
  };
  ncclResult_t result = ncclSuccess;
  wait_until([&] {
    if (everyone()) return true;
    if (stop.load()) {
      result = ncclInternalError;
    } else if (remote_errors && departed_peer() >= 0) {
      result = ncclRemoteError;
    }
    return result != ncclSuccess;
  });
  return result;
}

ncclResult_t rank_link::run(collective_call const& call, std::atomic<bool> const& stop) {
  shared_header& header = world_->header();
  std::size_t const size = element_bytes(call.type);
  auto const ranks = static_cast<std::size_t>(ranks_);
  auto const me = static_cast<std::size_t>(rank_);
  if (size == 0) return ncclInvalidArgument;  // refused at the call
  // The elements one rank contributes; reduce_scatter contributes a block for every rank.
  std::size_t const contributed =
      call.kind == collective_kind::reduce_scatter ? call.count * ranks : call.count;
  std::size_t const per_exchange = slot_bytes / size;
  bool const remote_errors = peer_failure_mode() == peer_failure::remote_error;
  // Every rank must run the same reduction: a pre-multiplied sum is one of its own (its handle
  // is each communicator's).
  std::int32_t const op = call.premultiplied ? static_cast<std::int32_t>(ncclNumOps)
                                             : static_cast<std::int32_t>(call.op);
  exchange_header const mine{static_cast<std::uint32_t>(call.kind),
                             static_cast<std::int32_t>(call.type), op, call.root, call.count};
  bool peer_left = false;
  // Parks until every rank's counter has reached `at_least`, this rank is aborted, or (in
  // remote_error mode) a peer left.
  auto wait_for_all = [&](std::atomic<std::uint64_t> shared_rank::*counter,
                          std::uint64_t at_least) {
    auto everyone = [&] {
      for (std::size_t r = 0; r < ranks; ++r) {
        if ((header.rank[r].*counter).load(std::memory_order_acquire) < at_least) return false;
      }
      return true;
    };
    wait_for_other_processes(
        [&] {
          if (everyone() || stop.load()) return true;
          peer_left = remote_errors && departed_peer() >= 0;
          return peer_left;
        },
        wake_word());
    return everyone() && !stop.load();
  };
  for (std::size_t first = 0; first < contributed; first += per_exchange) {
    std::size_t const elements = std::min(per_exchange, contributed - first);
    std::uint64_t const exchange = exchanges_ + 1;
    if (!wait_for_all(&shared_rank::consumed, exchange - 1)) break;  // this rank's slot is free
    shared_rank& self = header.rank[me];
    self.exchange = mine;
    bool const sends = call.kind != collective_kind::broadcast || call.root == rank_;
    if (sends) {
      std::memcpy(world_->slot(rank_), static_cast<unsigned char const*>(call.send) + first * size,
                  elements * size);
      if (call.premultiplied)
        premultiply(world_->slot(rank_), elements, call.type, call.scalar.data());
    }
    self.posted.store(exchange, std::memory_order_release);
    wake_everyone(header.wake);
    if (!wait_for_all(&shared_rank::posted, exchange)) break;
    for (std::size_t r = 0; r < ranks; ++r) {
      if (header.rank[r].exchange == mine) continue;
      exchange_header const& theirs = header.rank[r].exchange;
      static_cast<void>(std::fprintf(
          stderr,
          "graphstep simulated NCCL: rank %d runs %s(count %llu, type %d, op %d, root %d) while "
          "rank %zu runs %s(count %llu, type %d, op %d, root %d) at the same point: collectives "
          "must be issued in the same order with the same arguments on every rank; this one "
          "hangs, as it may on a GPU, until the communicator is aborted\n",
          rank_, name(call.kind), static_cast<unsigned long long>(call.count), call.type, call.op,
          call.root, r, name(static_cast<collective_kind>(theirs.kind)),
          static_cast<unsigned long long>(theirs.count), theirs.type, theirs.op, theirs.root));
      wait_for_other_processes([&] { return stop.load(); }, wake_word());
      return ncclSuccess;
    }
    std::array<unsigned char const*, max_ranks> parts{};
    for (std::size_t r = 0; r < ranks; ++r) parts.at(r) = world_->slot(static_cast<int>(r));
    auto* const out = static_cast<unsigned char*>(call.receive);
    switch (call.kind) {
      case collective_kind::all_reduce:
        reduce(parts.data(), ranks_, elements, call.type, call.op, out + first * size);
        break;
      case collective_kind::reduce:
        if (call.root == rank_)
          reduce(parts.data(), ranks_, elements, call.type, call.op, out + first * size);
        break;
      case collective_kind::reduce_scatter: {
        // This rank's block of the contributions: [me·count, (me+1)·count).
        std::size_t const begin = std::max(first, me * call.count);
        std::size_t const end = std::min(first + elements, (me + 1) * call.count);
        if (begin < end) {
          std::array<unsigned char const*, max_ranks> shifted{};
          for (std::size_t r = 0; r < ranks; ++r)
            shifted.at(r) = parts.at(r) + (begin - first) * size;
          reduce(shifted.data(), ranks_, end - begin, call.type, call.op,
                 out + (begin - me * call.count) * size);
        }
        break;
      }
      case collective_kind::all_gather:
        for (std::size_t r = 0; r < ranks; ++r) {
          std::memcpy(out + (r * call.count + first) * size, parts.at(r), elements * size);
        }
        break;
      case collective_kind::broadcast:
        std::memcpy(out + first * size, parts.at(static_cast<std::size_t>(call.root)),
                    elements * size);
        break;
      case collective_kind::send:
      case collective_kind::receive: break;  // exchange()
    }
    self.consumed.store(exchange, std::memory_order_release);
    wake_everyone(header.wake);
    exchanges_ = exchange;
  }
  return peer_left ? ncclRemoteError : ncclSuccess;
}

ncclResult_t rank_link::exchange(collective_call const* calls, std::size_t count,
                                 std::atomic<bool> const& stop, std::string& error) {
  shared_header& header = world_->header();
  bool const remote_errors = peer_failure_mode() == peer_failure::remote_error;
  struct progress {
    std::size_t offset{};  // bytes moved so far
    std::uint64_t last{};  // a send's last chunk, once all are posted
    bool started{};        // its first chunk has moved
    bool done{};
  };
  std::vector<progress> state(count);
  std::size_t remaining = count;
  while (remaining > 0) {
    std::uint32_t const seen = wake_word()->load();
    bool moved = false;
    // Only the first unfinished send to a peer, and receive from a peer, may move: a pair's
    // messages match in issue order.
    std::uint64_t sending = 0;
    std::uint64_t receiving = 0;
    for (std::size_t i = 0; i < count; ++i) {
      collective_call const& call = calls[i];
      progress& op = state[i];
      if (op.done) continue;
      bool const sends = call.kind == collective_kind::send;
      std::uint64_t const peer_bit = std::uint64_t{1} << static_cast<unsigned>(call.root);
      std::uint64_t& busy = sends ? sending : receiving;
      if ((busy & peer_bit) != 0) continue;
      busy |= peer_bit;
      int const from = sends ? rank_ : call.root;
      int const to = sends ? call.root : rank_;
      channel& line =
          header.channels.at(static_cast<std::size_t>(from)).at(static_cast<std::size_t>(to));
      if (line.broken.load(std::memory_order_acquire) != 0) {
        error = mismatch(from, to, line.chunk, line.refused);
        return ncclInvalidUsage;
      }
      std::size_t const bytes = call.count * element_bytes(call.type);
      unsigned char* const slot = world_->chunk_slot(ranks_, from, to);
      if (sends && (!op.started || op.offset < bytes)) {
        if (line.taken.load(std::memory_order_acquire) != line.posted.load()) continue;
        std::size_t const part = std::min(chunk_bytes, bytes - op.offset);
        if (!op.started) ++line.messages;
        line.chunk = chunk_header{line.messages, call.count, static_cast<std::int32_t>(call.type),
                                  op.started ? 0U : 1U, part};
        if (part > 0) {
          std::memcpy(slot, static_cast<unsigned char const*>(call.send) + op.offset, part);
        }
        op.offset += part;
        op.started = true;
        op.last = line.posted.fetch_add(1, std::memory_order_release) + 1;
      } else if (sends) {
        if (line.taken.load(std::memory_order_acquire) < op.last) continue;
        op.done = true;
        --remaining;
      } else {
        if (line.posted.load(std::memory_order_acquire) == line.taken.load()) continue;
        chunk_header const chunk = line.chunk;
        if (!op.started && (chunk.count != call.count || chunk.type != call.type)) {
          line.refused =
              chunk_header{chunk.message, call.count, static_cast<std::int32_t>(call.type), 1U, 0};
          error = mismatch(from, to, chunk, line.refused);
          line.broken.store(1, std::memory_order_release);
          wake_everyone(header.wake);
          return ncclInvalidUsage;
        }
        if (chunk.bytes > 0) {
          std::memcpy(static_cast<unsigned char*>(call.receive) + op.offset, slot, chunk.bytes);
        }
        op.offset += chunk.bytes;
        op.started = true;
        line.taken.fetch_add(1, std::memory_order_release);
        if (op.offset >= bytes) {
          op.done = true;
          --remaining;
        }
      }
      moved = true;
    }
    if (moved) {
      wake_everyone(header.wake);
      continue;
    }
    if (remaining == 0) break;
    bool peer_left = false;
    wait_for_other_processes(
        [&] {
          if (wake_word()->load() != seen || stop.load()) return true;
          peer_left = remote_errors && departed_peer() >= 0;
          return peer_left;
        },
        wake_word());
    if (stop.load()) return ncclSuccess;  // aborted: outputs unspecified
    if (peer_left) return ncclRemoteError;
  }
  return ncclSuccess;
}

}  // namespace graphstep::sim::detail::nccl
