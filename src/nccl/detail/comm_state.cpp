#include "comm_state.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <graphstep/graphs/capture_scope.hpp>
#include <graphstep/log.hpp>
#include <string>
#include <thread>
#include <unordered_map>

#include "detail/logger.hpp"

namespace graphstep::nccl::detail {
namespace {

// Every live communicator state by handle. The entries do not keep the states alive; each
// entry remembers its state's address so that a state leaving removes its own entry only.
struct registry {
  struct entry {
    comm_state const* state{};
    std::weak_ptr<comm_state> weak;
  };
  std::mutex mutex;
  std::unordered_map<ncclComm_t, entry> entries;
};

registry& the_registry() {
  // Never destroyed: states held by objects with static storage may leave it at exit.
  static auto* const instance = new registry;  // NOLINT(cppcoreguidelines-owning-memory)
  return *instance;
}

// With the registry locked: the state registered for `handle`, if it is still alive.
std::shared_ptr<comm_state> live_entry(registry& r, ncclComm_t handle) {
  auto const found = r.entries.find(handle);
  return found == r.entries.end() ? nullptr : found->second.weak.lock();
}

void enter(registry& r, ncclComm_t handle, std::shared_ptr<comm_state> const& state) {
  r.entries[handle] = registry::entry{state.get(), state};
}

comm_shape query_shape(ncclComm_t handle) {
  comm_shape shape;
  GRAPHSTEP_NCCL_TRY(ncclCommUserRank(handle, &shape.rank));
  GRAPHSTEP_NCCL_TRY(ncclCommCount(handle, &shape.size));
  GRAPHSTEP_NCCL_TRY(ncclCommCuDevice(handle, &shape.device));
  return shape;
}

// A handle that is not graphstep's: NCCL refusing it as invalid is the caller's mistake (it
// was destroyed, aborted, or is still initializing); other results are NCCL's errors.
comm_shape query_borrowed_shape(ncclComm_t handle) {
  comm_shape shape;
  auto check = [](ncclResult_t status, char const* call) {
    if (status == ncclSuccess) return;
    if (status == ncclInvalidArgument || status == ncclInvalidUsage) {
      throw usage_error{std::string{"nccl_comm_view: NCCL refuses the ncclComm_t ("} + call +
                        " returned " + graphstep::detail::nccl_result_name(status) + ": " +
                        ncclGetErrorString(status) +
                        "): view a communicator that is initialized and neither destroyed nor "
                        "aborted"};
    }
    graphstep::detail::throw_nccl_error(static_cast<int>(status), ncclGetErrorString(status), call,
                                        __FILE__, __LINE__);
  };
  check(ncclCommUserRank(handle, &shape.rank), "ncclCommUserRank");
  check(ncclCommCount(handle, &shape.size), "ncclCommCount");
  check(ncclCommCuDevice(handle, &shape.device), "ncclCommCuDevice");
  return shape;
}

}  // namespace

namespace {

// Releases under way on their own threads; the process waits for them at exit, a bounded time
// (a release held up by a graph the program never destroyed must not hang the exit).
class pending_releases {
 public:
  void wait_at_exit() {
    std::unique_lock<std::mutex> lock{mutex_};
    done_.wait_for(lock, std::chrono::seconds{5}, [this] { return count_ == 0; });
  }
  void started() {
    std::lock_guard<std::mutex> const lock{mutex_};
    ++count_;
  }
  void finished() {
    std::lock_guard<std::mutex> const lock{mutex_};
    if (--count_ == 0) done_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  int count_{};
};

pending_releases& releases() {
  // Never destroyed: a release still under way after the wait at exit may yet finish.
  static auto* const instance = [] {
    auto* made = new pending_releases;  // NOLINT(cppcoreguidelines-owning-memory)
    static_cast<void>(std::atexit([] { releases().wait_at_exit(); }));
    return made;
  }();
  return *instance;
}

void release_now(ncclComm_t handle, bool abort) noexcept {
  ncclResult_t const status = abort ? ncclCommAbort(handle) : ncclCommDestroy(handle);
  if (status != ncclSuccess) {
    graphstep::detail::log_lazily(log_level::error, [&] {
      return std::string{abort ? "ncclCommAbort" : "ncclCommDestroy"} +
             " of a communicator failed: " + ncclGetErrorString(status);
    });
  }
}

}  // namespace

void comm_deleter::operator()(pointer handle) const noexcept {
  if (handle == nullptr) return;
  ncclResult_t async_error = ncclSuccess;
  if (ncclCommGetAsyncError(handle, &async_error) != ncclSuccess) async_error = ncclSystemError;
  bool const in_error =
      abort_on_release || (async_error != ncclSuccess && async_error != ncclInProgress);
  auto& pending = releases();
  try {
    pending.started();
    std::thread{[handle, in_error, &pending] {
      release_now(handle, in_error);
      pending.finished();
    }}.detach();
  } catch (std::exception const&) {
    pending.finished();
    release_now(handle, in_error);  // no thread to be had: release here
  }
}

// Takes the handle first, so it is released even when a query throws.
std::shared_ptr<comm_state> comm_state::make_owned(ncclComm_t handle, int slot) {
  std::unique_ptr<ncclComm, comm_deleter> guard{handle};
  comm_shape const shape = query_shape(handle);
  auto state = std::make_shared<comm_state>(key{}, handle, shape, slot, true);
  static_cast<void>(guard.release());  // the state owns it now
  return state;
}

// In the functions below, a state fetched from the registry is declared before the registry's
// lock: were it the last reference, its destructor (which takes the lock) runs after the unlock.

std::shared_ptr<comm_state> comm_state::create(ncclComm_t handle, int slot) {
  std::shared_ptr<comm_state> state = make_owned(handle, slot);
  registry& r = the_registry();
  std::lock_guard<std::mutex> lock{r.mutex};
  enter(r, handle, state);
  return state;
}

std::shared_ptr<comm_state> comm_state::adopt(ncclComm_t handle, int slot) {
  GRAPHSTEP_EXPECTS(handle != nullptr, "nccl_comm::adopt: the handle is null");
  registry& r = the_registry();
  std::shared_ptr<comm_state> state;
  std::lock_guard<std::mutex> lock{r.mutex};
  state = live_entry(r, handle);
  if (state != nullptr) {
    // Two owners would destroy it twice: refuse, and leave the handle to its owner.
    GRAPHSTEP_EXPECTS(!state->owned(),
                      "nccl_comm::adopt: an nccl_comm already owns this communicator; take a "
                      "view of it (nccl_comm::view) instead");
    state->slot_.store(slot);
    state->owned_.store(true);
    return state;
  }
  state = make_owned(handle, slot);
  enter(r, handle, state);
  return state;
}

std::shared_ptr<comm_state> comm_state::borrow(ncclComm_t handle) {
  GRAPHSTEP_EXPECTS(handle != nullptr,
                    "nccl_comm_view: the ncclComm_t is null; make the communicator first "
                    "(ncclCommInitRank, ncclCommInitAll, ncclCommSplit) or view an nccl_comm");
  registry& r = the_registry();
  std::shared_ptr<comm_state> state;
  // Held across the queries, so two threads viewing the same new handle share one state.
  std::lock_guard<std::mutex> lock{r.mutex};
  state = live_entry(r, handle);
  if (state != nullptr) return state;
  state = std::make_shared<comm_state>(key{}, handle, query_borrowed_shape(handle), 0, false);
  enter(r, handle, state);
  return state;
}

comm_state::comm_state(key /*passkey*/, ncclComm_t handle, comm_shape shape, int slot,
                       bool owned) noexcept
    : key_{handle}, shape_{shape}, handle_{handle}, slot_{slot}, owned_{owned} {}

comm_state::~comm_state() {
  forget();
  // An owner always closes first; this only releases a handle whose owner never came to be.
  if (owned_.load()) comm_deleter{abort_on_release_.load()}(handle_.exchange(nullptr));
}

void comm_state::forget() noexcept {
  registry& r = the_registry();
  std::lock_guard<std::mutex> lock{r.mutex};
  auto const found = r.entries.find(key_);
  if (found != r.entries.end() && found->second.state == this) r.entries.erase(found);
}

void comm_state::abort(std::string const& reason) noexcept {
  try {
    std::lock_guard<std::mutex> lock{failure_mutex_};
    if (failure_.empty()) failure_ = reason;
  } catch (...) {
    // Keeping the reason is best effort; the abort itself must happen.
  }
  // A call holds the mutex for microseconds: on graphstep's non-blocking communicators no NCCL
  // call waits for peers. A call on a blocking communicator made elsewhere may be stuck inside
  // NCCL, which only the abort itself releases, so do not wait for it forever.
  bool const locked = enqueue_mutex_.try_lock_for(std::chrono::seconds{2});
  if (!aborted_.exchange(true)) {
    forget();  // ncclCommAbort frees the communicator: NCCL may hand out its address again
    comm_deleter{true}(handle_.exchange(nullptr));
  }
  if (locked) enqueue_mutex_.unlock();
}

peer_lost_handler comm_state::abort_when_a_peer_is_lost() {
  return [weak = weak_from_this()](std::string const& reason) {
    if (auto const state = weak.lock()) {
      state->abort("peer watch on rank " + std::to_string(state->rank()) + ": " + reason);
    }
  };
}

void comm_state::watch_peers(std::unique_ptr<peer_watch> watch) noexcept {
  std::lock_guard<std::mutex> lock{watch_mutex_};
  peer_watch_ = std::move(watch);
}

void comm_state::close(bool in_order) noexcept {
  {
    // Before the enqueue lock: the watch's thread may be aborting, which takes that lock.
    std::unique_ptr<peer_watch> watch;
    {
      std::lock_guard<std::mutex> lock{watch_mutex_};
      watch = std::move(peer_watch_);
    }
    if (watch != nullptr && in_order && !aborted_.load() && !abort_on_release_.load()) {
      watch->leave();
    }
  }
  bool const locked = enqueue_mutex_.try_lock_for(std::chrono::seconds{2});
  forget();
  closed_.store(true);
  if (owned_.load()) comm_deleter{abort_on_release_.load()}(handle_.exchange(nullptr));
  if (locked) enqueue_mutex_.unlock();
}

std::optional<std::string> comm_state::failure_reason() const {
  if (!aborted_.load()) return std::nullopt;
  std::lock_guard<std::mutex> lock{failure_mutex_};
  return failure_;
}

void comm_state::throw_if_aborted(char const* what) const {
  if (auto const reason = failure_reason()) {
    throw nccl_error{static_cast<int>(ncclInvalidUsage),
                     std::string{what} + ": the communicator (rank " + std::to_string(rank()) +
                         " of " + std::to_string(size()) + ") was aborted: " + *reason +
                         ". Create a new communicator (and capture again) to go on"};
  }
  if (closed_.load()) {
    throw usage_error{std::string{what} + ": the communicator (rank " + std::to_string(rank()) +
                      " of " + std::to_string(size()) +
                      ") was destroyed with its nccl_comm; a view must not outlive it"};
  }
}

void comm_state::fail(ncclResult_t status, char const* call_name) {
  abort_on_release_.store(true);
  graphstep::detail::throw_nccl_error(static_cast<int>(status), ncclGetErrorString(status),
                                      call_name, __FILE__, __LINE__);
}

ncclResult_t async_result(ncclComm_t handle) noexcept {
  ncclResult_t state = ncclSuccess;
  ncclResult_t const read = ncclCommGetAsyncError(handle, &state);
  return read == ncclSuccess ? state : read;
}

void comm_state::wait_until_ready(char const* what, char const* call_name) {
  auto pause = std::chrono::microseconds{10};
  while (true) {
    ncclResult_t state = ncclSuccess;
    {
      std::lock_guard<std::timed_mutex> lock{enqueue_mutex_};
      throw_if_aborted(what);
      state = async_result(handle_.load());
    }
    if (state == ncclSuccess) {
      joined_group();
      return;
    }
    if (state != ncclInProgress) fail(state, call_name);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds{1000});
  }
}

namespace {

struct open_group {
  int depth{};
  std::vector<std::shared_ptr<comm_state>> members;
};
thread_local open_group this_threads_group;

}  // namespace

void group_members::open() {
  ++this_threads_group.depth;
}

std::vector<std::shared_ptr<comm_state>> group_members::close() {
  if (this_threads_group.depth == 0 || --this_threads_group.depth > 0) return {};
  return std::exchange(this_threads_group.members, {});
}

void group_members::add(std::shared_ptr<comm_state> state) {
  auto& members = this_threads_group.members;
  if (this_threads_group.depth == 0 ||
      std::find(members.begin(), members.end(), state) != members.end()) {
    return;
  }
  members.push_back(std::move(state));
}

void comm_state::joined_group() {
  if (this_threads_group.depth > 0) group_members::add(shared_from_this());
}

std::optional<ncclResult_t> comm_state::async_error(std::chrono::milliseconds wait) noexcept {
  // The handle may only be read while no abort or close can free it.
  if (!enqueue_mutex_.try_lock_for(wait)) return std::nullopt;
  std::optional<ncclResult_t> result;
  if (ncclComm* const raw = handle_.load(); raw != nullptr && !aborted_.load() && !closed_.load()) {
    ncclResult_t async = ncclSuccess;
    result = ncclCommGetAsyncError(raw, &async) == ncclSuccess ? async : ncclSystemError;
  }
  enqueue_mutex_.unlock();
  return result;
}

bool comm_state::warmed_up(collective_kind kind) const {
  std::lock_guard<std::mutex> lock{log_mutex_};
  return warmed_up_.count(static_cast<int>(kind)) != 0;
}

void comm_state::ran_eagerly(collective_kind kind) {
  std::lock_guard<std::mutex> lock{log_mutex_};
  warmed_up_.insert(static_cast<int>(kind));
}

void comm_state::captured(collective_record const& record, graphs::capture_ref capture) {
  std::lock_guard<std::mutex> lock{log_mutex_};
  captured_.emplace_back(record, std::move(capture));
}

collective_log comm_state::kept_captured() const {
  collective_log kept;
  for (auto const& [record, capture] : captured_) {
    if (!capture.abandoned()) kept.record(record);
  }
  return kept;
}

collective_log comm_state::captured() const {
  std::lock_guard<std::mutex> lock{log_mutex_};
  return kept_captured();
}

collective_log comm_state::take_captured() {
  std::lock_guard<std::mutex> lock{log_mutex_};
  collective_log taken = kept_captured();
  captured_.clear();
  return taken;
}

}  // namespace graphstep::nccl::detail
