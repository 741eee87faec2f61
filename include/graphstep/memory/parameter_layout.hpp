#pragma once

/// @file memory/parameter_layout.hpp
/// @brief Where each parameter tensor of a model lies in one flat buffer of weights (and, at
/// the same offsets, one of gradients): names, shapes, dtypes and parameter groups, built once
/// by the model and taken by everything that walks its tensors (the data-parallel bucket plan,
/// the optimizer, the checkpoint). Plain C++.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/dtype.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace graphstep::memory {

/// @brief One tensor of a parameter layout.
struct parameter_slot {
  std::string name;
  std::vector<std::int64_t> shape;
  dtype type{dtype::float32};
  std::uint32_t group{0};  ///< the optimizer's parameter group
  std::size_t count{};     ///< elements: the product of the shape
  std::size_t offset{};    ///< bytes from the start of the buffer, a multiple of the alignment
  std::size_t bytes{};     ///< of its slot: count x element size, rounded up to the alignment
};

/// @brief The tensors of a model in one flat buffer, in the order they are added. Add them in
/// the order the backward pass finishes their gradients (last layer first): the gradients it
/// has finished are then always a prefix of the gradient buffer, which a data-parallel step
/// reduces in buckets while the backward goes on (`nccl::plan_buckets`). Each tensor starts on
/// an `alignment` boundary; the gaps belong to no tensor.
class parameter_layout {
 public:
  /// @param alignment bytes; a power of two, at least 16 (the widest vector access of the
  /// kernels), 256 by default (the alignment of CUDA allocations)
  /// @throws usage_error (an alignment that is not a power of two, or below 16)
  explicit parameter_layout(std::size_t alignment = 256);

  /// @brief Adds a tensor after those added before and returns its index.
  /// @throws usage_error (an empty or repeated name, an empty shape or a dimension below 1, an
  /// unknown dtype, a size that overflows)
  std::size_t add(std::string name, std::vector<std::int64_t> shape, dtype type,
                  std::uint32_t group = 0);

  [[nodiscard]] std::size_t size() const noexcept { return slots_.size(); }
  [[nodiscard]] bool empty() const noexcept { return slots_.empty(); }
  /// @throws usage_error (no such index)
  [[nodiscard]] parameter_slot const& at(std::size_t index) const;
  /// @brief The tensor's index, or none.
  [[nodiscard]] std::optional<std::size_t> find(std::string const& name) const;
  /// @brief The tensor's slot.
  /// @throws usage_error (no tensor of that name, naming the layout's size)
  [[nodiscard]] parameter_slot const& at(std::string const& name) const;
  [[nodiscard]] std::vector<parameter_slot> const& slots() const noexcept { return slots_; }
  /// @brief Bytes of the whole buffer: the end of the last slot.
  [[nodiscard]] std::size_t buffer_bytes() const noexcept { return buffer_bytes_; }
  [[nodiscard]] std::size_t alignment() const noexcept { return alignment_; }

 private:
  std::size_t alignment_;
  std::size_t buffer_bytes_{};
  std::vector<parameter_slot> slots_;
  std::unordered_map<std::string, std::size_t> index_;  // by name
};

}  // namespace graphstep::memory
