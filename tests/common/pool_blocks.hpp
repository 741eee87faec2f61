#pragma once

// Blocks of a memory pool that go back to it, in stream order, when this goes: the tests'
// buffers, so no test leaves memory in a pool (the pool warns then, and the test fails on it).
// Declare it after the pool and the stream it uses, so it goes first.

#include <cstddef>
#include <graphstep/cuda/stream.hpp>
#include <graphstep/memory/memory_pool.hpp>
#include <vector>

namespace graphstep::testing {

class pool_blocks {
 public:
  pool_blocks(memory::memory_pool& pool, cuda::stream_view stream) : pool_{pool}, stream_{stream} {}
  pool_blocks(pool_blocks const&) = delete;
  pool_blocks& operator=(pool_blocks const&) = delete;
  pool_blocks(pool_blocks&&) = delete;
  pool_blocks& operator=(pool_blocks&&) = delete;
  ~pool_blocks() {
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) pool_.deallocate(*it, stream_);
  }

  /// @brief `count` elements of T from the pool, allocated on the stream.
  template <typename T = float>
  T* get(std::size_t count) {
    blocks_.push_back(pool_.allocate(count * sizeof(T), stream_));
    return static_cast<T*>(blocks_.back());
  }

 private:
  memory::memory_pool& pool_;
  cuda::stream_view stream_;
  std::vector<void*> blocks_;
};

}  // namespace graphstep::testing
