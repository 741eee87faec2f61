#include "detail/block_workers.hpp"

#include <pthread.h>

#include <algorithm>
#include <new>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

#include "detail/guarded_memory.hpp"

namespace graphstep::sim::detail {

namespace {

// The block this thread runs, for order_after_earlier_blocks.
struct block_here {
  block_order* order{};
  unsigned block{};
  bool ordered{};  // it has waited for the blocks before it already
};
thread_local block_here here{};
thread_local bool lock_lent = false;

// Helper threads, started when a grid first needs them and kept: each waits for the next grid.
class helper_pool {
 public:
  void run(unsigned helpers, std::function<void(bool)> const& work) {
    std::unique_lock<std::mutex> lock{mutex_};
    start(helpers);
    unsigned const joining = std::min(helpers, started_);
    work_ = &work;
    lent_work_ = device_work_here();
    invited_ = joining;
    outstanding_ = joining;
    ++generation_;
    lock.unlock();
    if (joining > 0) wake_.notify_all();
    work(false);
    lock.lock();
    // Helpers that have not woken yet would find nothing left: they need not come.
    outstanding_ -= invited_;
    invited_ = 0;
    done_.wait(lock, [this] { return outstanding_ == 0; });
    work_ = nullptr;
  }

 private:
  // Called with mutex_ held.
  void start(unsigned helpers) {
    while (started_ < helpers) {
      try {
        std::thread{[this] { loop(); }}.detach();
      } catch (std::system_error const&) {
        return;  // no more threads: the grid runs on those there are
      }
      ++started_;
    }
  }

  void loop() {
    lock_lent = true;
    unsigned long long seen = 0;
    std::unique_lock<std::mutex> lock{mutex_};
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen && invited_ > 0; });
      seen = generation_;
      --invited_;
      auto const* const work = work_;
      device_work_identity const lent_work = lent_work_;
      lock.unlock();
      {
        lent_device_work const lent{lent_work};
        (*work)(true);
      }
      lock.lock();
      if (--outstanding_ == 0) done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::function<void(bool)> const* work_{};  // guarded by mutex_, as the rest
  device_work_identity lent_work_{};         // the launching thread's device work
  unsigned long long generation_{};
  unsigned started_{};
  unsigned invited_{};      // helpers that may still join this grid
  unsigned outstanding_{};  // helpers that joined, or may, and have not returned
};

// The pool lives in static storage and is made anew in a forked child, which has none of the
// parent's helper threads (pthread_atfork); it is never destroyed, as helpers wait in it until
// the process ends.
std::aligned_storage_t<sizeof(helper_pool), alignof(helper_pool)> pool_storage;
helper_pool* pool_instance = nullptr;

helper_pool& pool() {
  static bool const made = [] {
    pool_instance = new (&pool_storage) helper_pool;
    static_cast<void>(
        pthread_atfork(nullptr, nullptr, [] { pool_instance = new (&pool_storage) helper_pool; }));
    return true;
  }();
  static_cast<void>(made);
  return *pool_instance;
}

}  // namespace

block_order::block_order(unsigned count) : stop_at_{count}, finished_(count, 0) {}

std::optional<unsigned> block_order::take() {
  std::lock_guard<std::mutex> const lock{mutex_};
  if (next_ >= stop_at_) return std::nullopt;
  return next_++;
}

void block_order::finish(unsigned block, std::exception_ptr failure) {
  bool advanced = false;
  {
    std::lock_guard<std::mutex> const lock{mutex_};
    finished_[block] = 1;
    while (finished_prefix_ < finished_.size() && finished_[finished_prefix_] != 0) {
      ++finished_prefix_;
      advanced = true;
    }
    // The lowest failed block is the grid's failure; the blocks after it that have not started
    // do not (one after another, they would never run).
    if (failure && block < stop_at_) {
      stop_at_ = block;
      failure_ = std::move(failure);
    }
  }
  if (advanced) finished_more_.notify_all();
}

std::exception_ptr block_order::first_failure() const {
  return failure_;
}

void block_order::wait_for_blocks_before(unsigned block) {
  std::unique_lock<std::mutex> lock{mutex_};
  finished_more_.wait(lock, [&] { return finished_prefix_ >= block; });
}

void run_on_block_threads(unsigned helpers, std::function<void(bool)> const& work) {
  pool().run(helpers, work);
}

void order_after_earlier_blocks() noexcept {
  if (here.order == nullptr || here.ordered) return;
  here.order->wait_for_blocks_before(here.block);
  here.ordered = true;
}

bool earlier_blocks_may_run() noexcept {
  return here.order != nullptr && !here.ordered;
}

running_block::running_block(block_order& order, unsigned block) noexcept {
  here = block_here{&order, block, false};
}

running_block::~running_block() {
  here = block_here{};
}

bool platform_lock_lent() noexcept {
  return lock_lent;
}

}  // namespace graphstep::sim::detail
