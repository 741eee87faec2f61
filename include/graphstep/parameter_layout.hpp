#pragma once

/// @file parameter_layout.hpp
/// @brief Where each parameter tensor of a model lies in one flat buffer of weights (and, at
/// the same offsets, one of gradients): its `tensor_spec` (name, shape, dtype), its parameter
/// group and its offset in elements, built once by the model and taken by everything that walks
/// its tensors (the data-parallel bucket plan, the optimizer, the checkpoint), which see a
/// buffer's tensors through `view`. `memory::parameter_buffer` is a buffer made from a layout,
/// or one that adopts a trainer's own buffer (`parameter_layout::adopting`, `add_at`).
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <graphstep/dtype.hpp>
#include <graphstep/tensor.hpp>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace graphstep {

/// @brief One tensor of a parameter layout.
struct parameter_slot {
  tensor_spec spec;        ///< named; at least one element
  std::uint32_t group{0};  ///< the optimizer's parameter group
  /// Elements of `spec.type()` from the start of the buffer to the tensor's first; its byte
  /// offset, `byte_offset()`, is a multiple of the layout's alignment.
  std::size_t offset{};

  /// @brief `offset × size_in_bytes(spec.type())`.
  [[nodiscard]] std::size_t byte_offset() const noexcept {
    return offset * size_in_bytes(spec.type());
  }
};

/// @brief The tensors of a model in one flat buffer, in the order they are added. Add them in
/// the order the backward pass finishes their gradients (last layer first): the gradients it
/// has finished are then always a prefix of the gradient buffer, which a data-parallel step
/// reduces in buckets while the backward goes on (`nccl::plan_buckets`). Each tensor starts on
/// an `alignment` boundary; the gaps belong to no tensor.
///
/// A buffer that exists already (a C trainer's one allocation, its tensors at offsets it
/// computed) is described by a layout made with `adopting(buffer_bytes)`: each tensor is placed
/// at the byte offset it has there with `add_at`, which checks the offset against the buffer's
/// size, the dtype's alignment and the tensors placed before, and moves nothing.
class parameter_layout {
 public:
  /// @param alignment bytes; a power of two, at least 16 (the widest vector access of the
  /// kernels), 256 by default (the alignment of CUDA allocations)
  /// @throws usage_error (an alignment that is not a power of two, or below 16)
  explicit parameter_layout(std::size_t alignment = 256);

  /// @brief Adds the tensor `spec` after those added before, in parameter group `group`, and
  /// returns its index.
  /// @throws usage_error (an unnamed spec or a repeated name, an empty shape or an extent below
  /// 1, a type that is not floating, a buffer that would outgrow a `size_t`); the layout is
  /// left as it was
  /// @throws usage_error (also: a layout made by `adopting`, whose tensors are placed with
  /// `add_at`)
  std::size_t add(tensor_spec spec, std::uint32_t group = 0);

  /// @brief A layout of an existing buffer of `buffer_bytes`, whose tensors are placed at the
  /// offsets they have there with `add_at`. Its `buffer_bytes()` is `buffer_bytes` from the
  /// start, and its `alignment()` 16 (no offset is rounded).
  /// @throws usage_error (zero bytes)
  [[nodiscard]] static parameter_layout adopting(std::size_t buffer_bytes);
  /// @brief Adds the tensor `spec` at `byte_offset` bytes from the start of the adopted
  /// buffer, in parameter group `group`, and returns its index. Tensors may be added in any
  /// order; the bytes between them belong to no tensor.
  /// @throws usage_error (a layout not made by `adopting`; an offset that is not a multiple of
  /// the dtype's size; a tensor that ends past the buffer; one that overlaps a tensor added
  /// before, naming it; and what `add` refuses); the layout is left as it was
  std::size_t add_at(tensor_spec spec, std::size_t byte_offset, std::uint32_t group = 0);
  /// @brief Whether the layout was made by `adopting`.
  [[nodiscard]] bool adopted() const noexcept { return adopted_; }

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
  /// @brief Bytes of the whole buffer: the end of the last slot, rounded up to the alignment.
  [[nodiscard]] std::size_t buffer_bytes() const noexcept { return buffer_bytes_; }
  /// @brief Bytes from the start of the buffer to the end of tensor `index`'s slot (the start
  /// of the next, or `buffer_bytes()`): the extent of the gradients finished once it is. In an
  /// adopted layout, the end of the tensor itself.
  /// @throws usage_error (no such index)
  [[nodiscard]] std::size_t bytes_through(std::size_t index) const;
  [[nodiscard]] std::size_t alignment() const noexcept { return alignment_; }
  /// @brief The index of the first tensor whose dtype is not the first tensor's, or none (none
  /// for an empty layout): what a view of the whole buffer as one dtype
  /// (`memory::parameter_buffer::span`) and a bucketed all-reduce (`nccl::plan_buckets`) ask.
  [[nodiscard]] std::optional<std::size_t> first_of_another_dtype() const noexcept;

  /// @brief Tensor `index` of the buffer this layout describes at `base` (weights or
  /// gradients), named and shaped as its slot.
  /// @throws usage_error (no such index, a null base, a base not aligned to the tensor's dtype)
  [[nodiscard]] tensor_view view(void* base, std::size_t index) const;
  /// @brief Tensor `name` of the buffer at `base`.
  /// @throws usage_error (no tensor of that name; as above)
  [[nodiscard]] tensor_view view(void* base, std::string const& name) const;

 private:
  // Checks what every tensor must be (named, unique, floating, at least one element).
  void expect_valid(tensor_spec const& spec) const;

  std::size_t alignment_;
  std::size_t buffer_bytes_{};
  bool adopted_{false};
  std::map<std::size_t, std::size_t> by_offset_;  // adopted: byte offset -> index
  std::vector<parameter_slot> slots_;
  std::unordered_map<std::string, std::size_t> index_;  // by name
};

}  // namespace graphstep
