// graphstep_core: plain C++, includes no CUDA header.
#include "train/detail/checkpoint_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <graphstep/error.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace graphstep::train::detail {
namespace {

std::atomic<checkpoint_write_hook> write_hook{nullptr};

// Large enough that a checkpoint of many small entries costs few system calls; tensors at least
// this large are written straight from their own storage.
constexpr std::size_t io_buffer_size = std::size_t{1} << 20;
// Linux reads and writes at most 0x7ffff000 bytes a call; smaller writes also let the hook see
// progress.
constexpr std::size_t largest_io = std::size_t{64} << 20;

// A temporary is named `<checkpoint>.partial.` and this many lowercase hex digits.
constexpr std::string_view partial_infix = ".partial.";
constexpr int partial_digits = 16;

// A new file beside the checkpoint, removed again unless `commit` renamed it into place. It is
// held under flock(LOCK_EX) until then, which tells the cleanup of other saves
// (remove_stranded_temporaries) that it is being written; the kernel releases the lock when
// the process ends, however it ends.
class temporary_file {
 public:
  temporary_file(std::string const& path, std::string_view caller) : path_{path}, caller_{caller} {
    std::random_device random;
    for (int attempt = 0; attempt < 16; ++attempt) {
      std::uint64_t const nonce = (std::uint64_t{random()} << 32) | random();
      name_ = path + std::string{partial_infix} + hex_digits(nonce, partial_digits);
      fd_ = ::open(name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) {
        if (lock_still_linked()) return;
        ::close(std::exchange(fd_, -1));  // a cleanup removed it before the lock: another name
        continue;
      }
      if (errno != EEXIST) break;
    }
    int const code = errno;
    std::string const problem =
        caller_ + ": cannot create " + name_ + " to write " + path + ": " + errno_text(code);
    if (code == ENOENT || code == ENOTDIR) {
      throw usage_error{problem + "; the directory must exist: create it before saving"};
    }
    throw error{problem};
  }
  temporary_file(temporary_file const&) = delete;
  temporary_file& operator=(temporary_file const&) = delete;
  ~temporary_file() {
    if (!committed_) ::unlink(name_.c_str());  // before the lock goes with the descriptor
    if (fd_ >= 0) ::close(fd_);
  }

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] std::string const& name() const noexcept { return name_; }

  // Flushes the file to the device, closes it and renames it over the checkpoint's path.
  void commit() {
    if (::fsync(fd_) != 0) fail("cannot flush " + name_ + " to the disk");
    // The lock belongs to the open file, not to a descriptor: a duplicate keeps it past the
    // close until the rename, so that no cleanup removes the finished file before it is in place.
    file_descriptor const lock{::fcntl(fd_, F_DUPFD_CLOEXEC, 0)};
    if (lock.get() < 0) fail("cannot duplicate the descriptor of " + name_);
    int const fd = std::exchange(fd_, -1);
    // close() reports write errors that some file systems (NFS) defer to it.
    if (::close(fd) != 0) fail("cannot close " + name_);
    if (::rename(name_.c_str(), path_.c_str()) != 0) {
      int const code = errno;
      std::string const problem =
          caller_ + ": cannot rename " + name_ + " to " + path_ + ": " + errno_text(code);
      if (code == EISDIR || code == ENOTDIR) {
        throw usage_error{problem + "; the path names a directory: name the checkpoint file"};
      }
      throw error{problem};
    }
    committed_ = true;
  }

  [[noreturn]] void fail(std::string const& what) const {
    throw error{caller_ + ": " + what + " (writing " + path_ + "): " + errno_text(errno)};
  }

 private:
  // Takes the lock, and says whether the file is still there: a cleanup may have locked and
  // removed it between the open and the lock. Where the file system has no flock, the file
  // stays unlocked, and the cleanups there cannot lock it either, so they leave it.
  [[nodiscard]] bool lock_still_linked() const {
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) return true;
    }
    struct stat status {};
    return ::fstat(fd_, &status) != 0 || status.st_nlink > 0;
  }

  std::string path_;
  std::string caller_;
  std::string name_;
  int fd_{-1};
  bool committed_{false};
};

// Writes through a buffer into the temporary file; tensors of the buffer's size or more go
// straight from their own storage.
class buffered_sink final : public save_sink {
 public:
  explicit buffered_sink(temporary_file const& file) : file_{file} {
    buffer_.reserve(io_buffer_size);
  }

  void put(void const* data, std::size_t size) override {
    auto const* bytes = static_cast<unsigned char const*>(data);
    if (buffer_.size() + size > io_buffer_size) flush();
    if (size >= io_buffer_size) {
      write_out(bytes, size);
    } else {
      buffer_.insert(buffer_.end(), bytes, bytes + size);
    }
  }

  void flush() {
    write_out(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

 private:
  void write_out(unsigned char const* data, std::size_t size) {
    while (size > 0) {
      ssize_t const written = ::write(file_.fd(), data, std::min(size, largest_io));
      if (written < 0) {
        if (errno == EINTR) continue;
        file_.fail("cannot write " + file_.name());
      }
      data += written;
      size -= static_cast<std::size_t>(written);
      written_ += static_cast<std::uint64_t>(written);
      if (auto hook = write_hook.load()) hook(written_);
    }
  }

  temporary_file const& file_;
  std::vector<unsigned char> buffer_;
  std::uint64_t written_{0};
};

std::string directory_of(std::string const& path) {
  std::size_t const slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Whether `name` is `base` + ".partial." + 16 lowercase hex digits: the name of a temporary of
// a save to `base`, and nothing else.
bool is_temporary_of(std::string_view name, std::string_view base) {
  if (name.size() != base.size() + partial_infix.size() + partial_digits) return false;
  if (name.substr(0, base.size()) != base) return false;
  if (name.substr(base.size(), partial_infix.size()) != partial_infix) return false;
  std::string_view const digits = name.substr(base.size() + partial_infix.size());
  return std::all_of(digits.begin(), digits.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Removes the temporaries that saves to `path` left behind when their process died mid-write:
// each regular file of the name that no one holds locked (a save in progress holds its lock;
// the kernel released a dead process's). Best effort: the new checkpoint is in place already,
// and what cannot be removed now is tried again at the next save.
void remove_stranded_temporaries(std::string const& path) {
  std::string const directory = directory_of(path);
  std::string_view const base = std::string_view{path}.substr(path.rfind('/') + 1);
  std::unique_ptr<DIR, int (*)(DIR*)> const listing{::opendir(directory.c_str()), &::closedir};
  if (!listing) return;
  int const at = ::dirfd(listing.get());
  std::vector<std::string> candidates;
  while (dirent const* entry = ::readdir(listing.get())) {
    if (is_temporary_of(entry->d_name, base)) candidates.emplace_back(entry->d_name);
  }
  for (std::string const& name : candidates) {
    // No link is followed, and a named pipe does not block the open.
    file_descriptor const fd{
        ::openat(at, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
    struct stat opened {};
    if (fd.get() < 0 || ::fstat(fd.get(), &opened) != 0 || !S_ISREG(opened.st_mode)) continue;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // being written
    // Only the file that was locked: the name may have been renamed into place meanwhile.
    struct stat named {};
    if (::fstatat(at, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
        named.st_dev != opened.st_dev || named.st_ino != opened.st_ino) {
      continue;
    }
    ::unlinkat(at, name.c_str(), 0);
  }
}

// Makes the rename durable: the directory entry reaches the disk.
void sync_directory(std::string const& path, std::string_view caller) {
  std::string const directory = directory_of(path);
  int const fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int code = 0;
  if (fd < 0) {
    code = errno;
  } else {
    // Some file systems cannot sync a directory (EINVAL): nothing more can be done there.
    if (::fsync(fd) != 0 && errno != EINVAL) code = errno;
    ::close(fd);
  }
  if (code != 0) {
    throw error{std::string{caller} + ": " + path + " is written, but its directory " + directory +
                " could not be synced (" + errno_text(code) +
                "): the new file may not survive a crash of the machine"};
  }
}

}  // namespace

file_descriptor::~file_descriptor() {
  if (fd_ >= 0) ::close(fd_);
}

void save_atomically(std::string const& path, std::string_view caller,
                     std::function<void(save_sink&)> const& write) {
  std::string const who{caller};
  GRAPHSTEP_EXPECTS(!path.empty(), who + ": the path is empty; name the file to write");
  GRAPHSTEP_EXPECTS(path.back() != '/',
                    who + ": " + path + " names a directory; name the checkpoint file");
  temporary_file file{path, caller};
  buffered_sink sink{file};
  write(sink);
  sink.flush();
  file.commit();
  remove_stranded_temporaries(path);  // before the sync, which makes the removals durable too
  sync_directory(path, caller);
}

file_descriptor open_for_reading(std::string const& path, std::string_view caller,
                                 std::uint64_t& size) {
  std::string const who{caller};
  GRAPHSTEP_EXPECTS(!path.empty(), who + ": the path is empty; name the file to read");
  // Without blocking: opening a named pipe for reading would wait for a writer; it is refused
  // below as any file that is not a regular one (for which O_NONBLOCK changes nothing).
  file_descriptor fd{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (fd.get() < 0) {
    int const code = errno;
    std::string const problem = who + ": cannot open " + path + ": " + errno_text(code);
    if (code == ENOENT || code == ENOTDIR) {
      throw usage_error{problem + "; no checkpoint is there: check the path"};
    }
    throw error{problem};
  }
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0) {
    throw error{who + ": cannot stat " + path + ": " + errno_text(errno)};
  }
  if (!S_ISREG(status.st_mode)) {
    throw usage_error{who + ": " + path +
                      " is not a regular file (a directory, a named pipe, a device?); name the "
                      "checkpoint file"};
  }
  size = static_cast<std::uint64_t>(status.st_size);
  return fd;
}

void read_at(int fd, std::string const& path, std::string_view caller, void* out, std::size_t size,
             std::uint64_t offset) {
  auto* to = static_cast<unsigned char*>(out);
  std::size_t done = 0;
  while (done < size) {
    ssize_t const got = ::pread(fd, to + done, std::min(size - done, largest_io),
                                static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw error{std::string{caller} + ": cannot read " + path + ": " + errno_text(errno)};
    }
    if (got == 0) {
      throw error{std::string{caller} + ": " + path +
                  " is truncated: it became shorter while it was read (is another process "
                  "writing it in place?)"};
    }
    done += static_cast<std::size_t>(got);
  }
}

std::string errno_text(int code) {
  return std::generic_category().message(code);
}

std::string hex_digits(std::uint64_t value, int digits) {
  constexpr std::string_view digit = "0123456789abcdef";
  std::string text(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4) {
    text[static_cast<std::size_t>(i)] = digit[value & 0xFU];
  }
  return text;
}

checkpoint_write_hook set_checkpoint_write_hook(checkpoint_write_hook hook) noexcept {
  return write_hook.exchange(hook);
}

}  // namespace graphstep::train::detail
