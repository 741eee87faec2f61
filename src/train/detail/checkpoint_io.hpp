#pragma once

// The file side of checkpoints, shared by graphstep's own format (checkpoint.cpp) and safetensors
// (checkpoint_safetensors.cpp): the atomic save (a locked temporary beside the file, flushed and
// renamed over it, stranded temporaries removed, the directory synced; docs/checkpoint_format.md,
// "Saving: atomic replacement"), opening a file to load, and reading at an offset. Every error
// begins with the caller's name ("checkpoint::save"), so that it says which call failed.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace graphstep::train::detail {

/// @brief An open file descriptor, closed on destruction; move-only.
class file_descriptor {
 public:
  explicit file_descriptor(int fd) noexcept : fd_{fd} {}
  file_descriptor(file_descriptor&& other) noexcept : fd_{std::exchange(other.fd_, -1)} {}
  file_descriptor& operator=(file_descriptor&&) = delete;
  file_descriptor(file_descriptor const&) = delete;
  file_descriptor& operator=(file_descriptor const&) = delete;
  ~file_descriptor();
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_;
};

/// @brief Where `save_atomically` writes the bytes of the file: buffered writes into its
/// temporary, each reported to the write hook (`set_checkpoint_write_hook`).
class save_sink {
 public:
  save_sink() = default;
  virtual ~save_sink() = default;
  save_sink(save_sink const&) = delete;
  save_sink& operator=(save_sink const&) = delete;
  save_sink(save_sink&&) = delete;
  save_sink& operator=(save_sink&&) = delete;

  /// @throws error when the write fails (a full disk, an I/O error), naming the file
  virtual void put(void const* data, std::size_t size) = 0;
};

/// @brief Writes the file at `path` atomically, as `checkpoint::save` documents: `write` puts
/// every byte of it into the sink, then the temporary is flushed, renamed over `path`, the
/// stranded temporaries of earlier saves removed and the directory synced. An exception from
/// `write` removes the temporary and propagates.
/// @throws usage_error (an empty path, one that names a directory or lies in no directory),
/// error (the file system's failures), each beginning with `caller`
void save_atomically(std::string const& path, std::string_view caller,
                     std::function<void(save_sink&)> const& write);

/// @brief Opens the regular file at `path` for reading (without blocking on a named pipe) and
/// sets `size` to its size.
/// @throws usage_error (an empty path, no file there, not a regular file), error (it cannot be
/// opened or examined), each beginning with `caller`
[[nodiscard]] file_descriptor open_for_reading(std::string const& path, std::string_view caller,
                                               std::uint64_t& size);

/// @brief Reads exactly `size` bytes at `offset` of `fd` (the file at `path`) into `out`.
/// @throws error when the read fails or the file ends first (it shrank while it was read)
void read_at(int fd, std::string const& path, std::string_view caller, void* out, std::size_t size,
             std::uint64_t offset);

/// @brief The system's text for the errno value `code`.
[[nodiscard]] std::string errno_text(int code);

/// @brief `digits` lowercase hexadecimal digits of `value`, the most significant first.
[[nodiscard]] std::string hex_digits(std::uint64_t value, int digits);

}  // namespace graphstep::train::detail
