#pragma once

/// @file train/checkpoint.hpp
/// @brief A training checkpoint on the host: named tensors and values, saved atomically to one
/// versioned, checksummed file and loaded back with every field verified.
///
/// The file format is specified in docs/checkpoint_format.md (little-endian; an 8-byte magic,
/// the format version, the entry count and the payload size, then the entries, then a CRC-32C
/// of everything before it). `save_safetensors` and `load_safetensors` write and read the same
/// checkpoint as a safetensors file instead, for other tools. A checkpoint holds host bytes
/// only: copying tensors to and from device memory is the caller's, so this header is plain C++
/// and needs no device.
/// graphstep_core: plain C++, includes no CUDA header.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <graphstep/dtype.hpp>
#include <graphstep/tensor.hpp>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace graphstep::train {

/// @brief What a checkpoint entry holds. The values are the format's codes (a `u32` on disk).
enum class checkpoint_kind : std::uint32_t {
  tensor,  ///< an array of `dtype` elements with a shape
  value,   ///< the bytes of a trivially copyable host object (a step count, a struct of scalars)
};

/// @brief One named entry of a checkpoint.
struct checkpoint_entry {
  checkpoint_kind kind{checkpoint_kind::tensor};
  /// Its name, unique in its checkpoint (e.g. "optimizer/master/3"), and for a tensor its shape
  /// (empty for a 0-d tensor of one element) and dtype; a value is a `uint8` tensor of its
  /// bytes, `[sizeof(T)]`, as safetensors stores it.
  tensor_spec spec;
  /// The data: for a tensor `spec.bytes()` bytes, its elements in row-major order as the caller
  /// gave them; for a value the object's bytes.
  std::vector<unsigned char> bytes;
};

/// @brief Named tensors and values, in the order added, saved to and loaded from one file.
///
/// Build one with `add_tensor` and `add_value`, `save` it; `load` it on resume and take each
/// entry back with `tensor` (checked against the dtype and shape the caller expects) or
/// `value<T>`. Not thread-safe: one thread builds or reads a checkpoint at a time (concurrent
/// `const` calls are fine).
class checkpoint {
 public:
  /// @brief The format version `save` writes, and the newest one `load` reads.
  static constexpr std::uint32_t format_version = 1;

  /// @brief Adds the tensor `spec` (its name, its shape, row-major: an empty shape is a 0-d
  /// tensor of one element, a 0 extent makes an empty one; its dtype) holding `bytes`.
  /// @throws usage_error for an unnamed spec, a name already present, more dimensions than the
  /// format holds, or bytes whose size is not `spec.bytes()`.
  void add_tensor(tensor_spec spec, std::vector<unsigned char> bytes);

  /// @brief Adds a host value of a trivially copyable `T` as its `sizeof(T)` bytes, padding
  /// included (zero-initialise a padded struct before filling it, so that its file is the same
  /// from run to run).
  /// @throws usage_error for an empty name or a name already present.
  template <class T>
  void add_value(std::string name, T const& value) {
    static_assert(std::is_trivially_copyable_v<T>,
                  "checkpoint::add_value stores an object's bytes: T must be trivially copyable");
    // Non-dependent arguments: the call is bound here, where `name` is seen to be moved.
    void const* const data = &value;
    std::size_t const size = sizeof(T);
    add_value_bytes(std::move(name), data, size);
  }

  /// @brief The tensor named as `expected`, checked against its dtype and shape.
  /// @throws usage_error naming the tensor when it is missing (listing a few names present),
  /// is a value, or has another dtype or shape (both layouts written out, e.g. "float32 [3,
  /// 4]"): the checkpoint was written by another model layout or configuration.
  [[nodiscard]] checkpoint_entry const& tensor(tensor_spec const& expected) const;

  /// @brief The value `name`, read back as a `T` (trivially copyable and default
  /// constructible).
  /// @throws usage_error naming the value when it is missing, is a tensor, or holds other than
  /// `sizeof(T)` bytes.
  template <class T>
  [[nodiscard]] T value(std::string_view name) const {
    static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>,
                  "checkpoint::value reads an object's bytes back: T must be trivially copyable "
                  "and default constructible");
    checkpoint_entry const& entry = value_entry(name, sizeof(T));
    T result{};
    std::memcpy(&result, entry.bytes.data(), sizeof(T));
    return result;
  }

  /// @brief Whether an entry (tensor or value) is named `name`.
  [[nodiscard]] bool contains(std::string_view name) const noexcept;

  /// @brief Every entry, in the order added (or stored in the file).
  [[nodiscard]] std::vector<checkpoint_entry> const& entries() const noexcept { return entries_; }

  /// @brief Writes the checkpoint to `path`, atomically: the bytes go to a new temporary file
  /// in the same directory (`<path>.partial.<16 hex digits>`), which is flushed and fsync'ed,
  /// then renamed over `path`, and the directory is fsync'ed. A crash at any point leaves the
  /// earlier file at `path` intact (and may leave the temporary behind); an error removes the
  /// temporary before it is reported. Each save holds its temporary under `flock(LOCK_EX)`
  /// until the rename; after the rename it removes the temporaries that saves to `path` left
  /// behind when they died: regular files named `<path>.partial.` and exactly 16 lowercase hex
  /// digits that no one holds locked, so a save still in progress (in this process or another)
  /// keeps its own. Nothing else is removed, and a failure to remove one is not reported (the
  /// next save tries again). `path` names the file itself: a symbolic link there is replaced,
  /// not followed, and the new file gets the default permissions (0666 less the umask).
  /// @throws usage_error when the caller is at fault: an empty path, a directory that does not
  /// exist, a path that names a directory.
  /// @throws error for any other failure of the file system (permissions, a full disk, an
  /// I/O error), with the path and the system's reason.
  void save(std::string const& path) const;

  /// @brief Reads the checkpoint at `path` and verifies it: the magic, the version (a newer one
  /// is refused, saying so), the size against the header (truncation), the CRC-32C (a mismatch
  /// says the file is corrupt), and every entry (kind, name, dtype, shape, sizes). No size read
  /// from the file is trusted for an allocation beyond the file's own size.
  /// @throws usage_error when no file is at `path`.
  /// @throws error for a file that cannot be read, is no checkpoint, is truncated or corrupt, or
  /// was written by a newer format version; the message names the path and what was found.
  [[nodiscard]] static checkpoint load(std::string const& path);

  /// @brief Writes the checkpoint to `path` as a safetensors file
  /// (https://github.com/huggingface/safetensors), atomically as `save` does, for tools that
  /// read that format (the `safetensors` package, PyTorch, Hugging Face). Every entry becomes a
  /// tensor of the same name: a tensor keeps its shape and maps its dtype one to one (float32
  /// F32, float16 F16, bfloat16 BF16, int32 I32, uint8 U8); a value becomes a U8 tensor of its
  /// bytes, shape [size], marked in `__metadata__` as `"graphstep.value:<name>": "<size>"`.
  /// `__metadata__` also holds `"graphstep.checkpoint": "1"`. The header lists the entries in
  /// their order; their data is laid out by element size, largest first, so that each tensor's
  /// data is aligned to its element. docs/checkpoint_format.md specifies the mapping.
  /// @throws usage_error for a name that is not UTF-8 or is `__metadata__` (safetensors cannot
  /// hold it), and for what `save` refuses.
  /// @throws error for any other failure of the file system, as `save`.
  void save_safetensors(std::string const& path) const;

  /// @brief Reads the safetensors file at `path`, written by `save_safetensors` or by another
  /// tool, and verifies it: the header's length against the file, its JSON (strictly: no
  /// repeated name, no unknown key in a tensor), every dtype (one of F32, F16, BF16, I32, U8),
  /// every shape against its data offsets, and the offsets (together they cover the byte buffer
  /// exactly: no overlap, no gap, nothing past its end). The entries come back in the header's
  /// order; those marked `graphstep.value:<name>` as values, every other as a tensor. Metadata
  /// keys not beginning with `graphstep.` are ignored. Every byte is checked before it is
  /// allocated, so memory stays within the file's size.
  /// @throws usage_error when no file is at `path`.
  /// @throws error for a file that cannot be read, is truncated, is no safetensors file, holds a
  /// dtype graphstep has no counterpart for (F64, I64, F8_E4M3, ...: convert it first), or was
  /// written by a newer graphstep; the message names the path, the tensor and what was found.
  [[nodiscard]] static checkpoint load_safetensors(std::string const& path);

 private:
  void add_value_bytes(std::string name, void const* data, std::size_t size);
  void add_entry(checkpoint_entry entry);
  [[nodiscard]] checkpoint_entry const& value_entry(std::string_view name, std::size_t size) const;
  [[nodiscard]] std::string missing_entry(std::string_view name) const;

  std::vector<checkpoint_entry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;  // name -> position in entries_
};

namespace detail {

/// @brief CRC-32C (Castagnoli: polynomial 0x1EDC6F41, reflected 0x82F63B78, initial value and
/// final XOR 0xFFFFFFFF) of `size` bytes, continuing from `crc`, the CRC-32C of the bytes before
/// them (0 for none), as zlib's `crc32` continues. CRC-32C("123456789") is 0xE3069283.
[[nodiscard]] std::uint32_t crc32c(std::uint32_t crc, void const* data, std::size_t size) noexcept;

/// @brief For tests: called by `checkpoint::save` and `save_safetensors` after each write to the
/// temporary file with the bytes written to it so far. It may throw (the save then fails as on
/// an I/O error) or end the process (a crash mid-write). `nullptr` (the default) calls nothing.
using checkpoint_write_hook = void (*)(std::uint64_t bytes_written);

/// @brief Installs `hook` for every later save in the process and returns the one before.
checkpoint_write_hook set_checkpoint_write_hook(checkpoint_write_hook hook) noexcept;

}  // namespace detail
}  // namespace graphstep::train
