#pragma once

// Blocks of a memory pool that go back to it, in stream order, when this goes: the tests'
// buffers, so no test leaves memory in a pool (the pool warns then, and the test fails on it).
// Each is the library's owner, a `cuda::device_buffer` of the pool; this only keeps them.
// Declare it after the pool and the stream it uses, so it goes first.

#include <cstddef>
#include <graphstep/cuda/device_buffer.hpp>
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
  ~pool_blocks() = default;

  /// @brief `count` elements of T from the pool, allocated on the stream.
  template <typename T = float>
  T* get(std::size_t count) {
    return static_cast<T*>(blocks_.emplace_back(count * sizeof(T), stream_, pool_).data());
  }

 private:
  memory::memory_pool& pool_;
  cuda::stream_view stream_;
  std::vector<cuda::device_buffer> blocks_;
};

}  // namespace graphstep::testing
