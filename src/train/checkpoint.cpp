// graphstep_core: plain C++, includes no CUDA header.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <graphstep/error.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <limits>
#include <string>
#include <utility>

#include "train/detail/checkpoint_io.hpp"

// The format (docs/checkpoint_format.md) is little-endian. Header fields are encoded byte by
// byte, so they read the same on any host; tensor and value bytes are stored as the caller gave
// them, which is little-endian only on a little-endian host, the only kind graphstep supports.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the checkpoint format stores tensor bytes little-endian, as the host holds them");

namespace graphstep::train {
namespace {

// --- the format ---------------------------------------------------------------------------

// 0x89 (not ASCII: a 7-bit transfer or a text file fails at once), "GSCKPT", then '\n' (a
// line-ending conversion changes it), as PNG's signature does.
constexpr std::array<unsigned char, 8> magic{0x89, 'G', 'S', 'C', 'K', 'P', 'T', '\n'};
constexpr std::uint64_t header_size = 32;  // magic, version, flags, entry count, payload size
constexpr std::uint64_t checksum_size = 4;
// The smallest entry: a value with a one-byte name and no bytes (kind, name length, name, size).
constexpr std::uint64_t smallest_entry = 4 + 4 + 1 + 8;

// The dtype codes of the format, fixed here so that reordering `dtype` cannot change files.
std::uint32_t dtype_code(dtype type) {
  switch (type) {
    case dtype::float32: return 0;
    case dtype::float16: return 1;
    case dtype::bfloat16: return 2;
    case dtype::int32: return 3;
    case dtype::uint8: return 4;
  }
  return std::numeric_limits<std::uint32_t>::max();
}

bool dtype_of_code(std::uint32_t code, dtype& type) {
  switch (code) {
    case 0: type = dtype::float32; return true;
    case 1: type = dtype::float16; return true;
    case 2: type = dtype::bfloat16; return true;
    case 3: type = dtype::int32; return true;
    case 4: type = dtype::uint8; return true;
    default: return false;
  }
}

// The elements of `shape`, or false when a dimension is negative or the count overflows.
bool element_count(std::vector<std::int64_t> const& shape, std::uint64_t& count) {
  count = 1;
  for (std::int64_t dimension : shape) {
    if (dimension < 0) return false;
    auto const d = static_cast<std::uint64_t>(dimension);
    if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / d) return false;
    count *= d;
  }
  return true;
}

// The bytes of `count` elements of `type`, or false on overflow.
bool byte_count(std::uint64_t count, dtype type, std::uint64_t& bytes) {
  std::uint64_t const element = size_in_bytes(type);
  if (count > std::numeric_limits<std::uint64_t>::max() / element) return false;
  bytes = count * element;
  return true;
}

// "float32 [3, 4]"; "float32 []" for a 0-d tensor.
std::string layout(dtype type, std::vector<std::int64_t> const& shape) {
  std::string text = std::string{name(type)} + " [";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::string quoted(std::string_view text) {
  return "\"" + std::string{text} + "\"";
}

std::string hex32(std::uint32_t value) {
  return "0x" + detail::hex_digits(value, 8);
}

void put_u32(unsigned char* out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

void put_u64(unsigned char* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

std::uint32_t get_u32(unsigned char const* in) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<std::uint32_t>(in[i]) << (8 * i);
  return value;
}

std::uint64_t get_u64(unsigned char const* in) {
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return value;
}

// --- CRC-32C, slicing-by-8 ----------------------------------------------------------------

// tables[0] is the byte-at-a-time table of the reflected polynomial 0x82F63B78; tables[k][b] is
// the CRC of byte b followed by k zero bytes, so that eight table lookups consume eight bytes.
struct crc_tables {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  constexpr crc_tables() {
    for (std::uint32_t b = 0; b < 256; ++b) {
      std::uint32_t crc = b;
      for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1U) != 0 ? 0x82F63B78U : 0U);
      t[0][b] = crc;
    }
    for (std::size_t k = 1; k < 8; ++k) {
      for (std::size_t b = 0; b < 256; ++b) {
        t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFU];
      }
    }
  }
};
constexpr crc_tables crc_table{};

// --- writing ------------------------------------------------------------------------------

// Large enough that a checkpoint of many small entries costs few system calls.
constexpr std::size_t io_buffer_size = std::size_t{1} << 20;
// Linux reads at most 0x7ffff000 bytes a call.
constexpr std::size_t largest_read = std::size_t{64} << 20;

// Puts the file's bytes into the sink of an atomic save, keeping the CRC-32C of what it wrote.
class file_writer {
 public:
  explicit file_writer(detail::save_sink& sink) : sink_{sink} {}

  void put(void const* data, std::size_t size) {
    crc_ = detail::crc32c(crc_, data, size);
    sink_.put(data, size);
  }
  void put_u32(std::uint32_t value) {
    std::array<unsigned char, 4> bytes{};
    train::put_u32(bytes.data(), value);
    put(bytes.data(), bytes.size());
  }
  void put_u64(std::uint64_t value) {
    std::array<unsigned char, 8> bytes{};
    train::put_u64(bytes.data(), value);
    put(bytes.data(), bytes.size());
  }

  // Appends the CRC-32C of everything written before it.
  void finish() {
    std::array<unsigned char, 4> bytes{};
    train::put_u32(bytes.data(), crc_);
    sink_.put(bytes.data(), bytes.size());
  }

 private:
  detail::save_sink& sink_;
  std::uint32_t crc_{0};
};

std::uint64_t payload_size(std::vector<checkpoint_entry> const& entries) {
  std::uint64_t size = 0;
  for (checkpoint_entry const& entry : entries) {
    size += 4 + 4 + entry.spec.name().size() + 8 + entry.bytes.size();
    if (entry.kind == checkpoint_kind::tensor) size += 4 + 4 + 8 * entry.spec.shape().size();
  }
  return size;
}

// --- reading ------------------------------------------------------------------------------

// A problem with the structure of a file whose size matched its header: reported as such only
// when the checksum holds (else the file is corrupt, and the checksum says so).
struct malformed {
  std::string what;
};

// Reads the file sequentially through a buffer, keeping the CRC-32C of what it read.
class file_reader {
 public:
  file_reader(int fd, std::string const& path) : fd_{fd}, path_{path} {}

  void read(void* out, std::size_t size) {
    if (size == 0) return;
    auto* to = static_cast<unsigned char*>(out);
    std::size_t const total = size;
    std::size_t const buffered = std::min(size, end_ - begin_);
    std::memcpy(to, buffer_.data() + begin_, buffered);
    begin_ += buffered;
    to += buffered;
    size -= buffered;
    if (size >= buffer_.size()) {
      read_some(to, size, size);
    } else if (size > 0) {
      begin_ = 0;
      end_ = read_some(buffer_.data(), buffer_.size(), size);
      std::memcpy(to, buffer_.data(), size);
      begin_ = size;
    }
    crc_ = detail::crc32c(crc_, out, total);
  }
  std::uint32_t read_u32() {
    std::array<unsigned char, 4> bytes{};
    read(bytes.data(), bytes.size());
    return get_u32(bytes.data());
  }
  std::uint64_t read_u64() {
    std::array<unsigned char, 8> bytes{};
    read(bytes.data(), bytes.size());
    return get_u64(bytes.data());
  }
  [[nodiscard]] std::uint32_t crc() const noexcept { return crc_; }

 private:
  // Reads at least `least` and at most `most` bytes; the size was checked against the file's,
  // so an early end means the file shrank while it was read.
  std::size_t read_some(unsigned char* out, std::size_t most, std::size_t least) {
    std::size_t done = 0;
    while (done < least) {
      ssize_t const got = ::read(fd_, out + done, std::min(most - done, largest_read));
      if (got < 0) {
        if (errno == EINTR) continue;
        throw error{"checkpoint::load: cannot read " + path_ + ": " + detail::errno_text(errno)};
      }
      if (got == 0) {
        throw error{"checkpoint::load: " + path_ +
                    " is truncated: it became shorter while it was read (is another process "
                    "writing it in place?)"};
      }
      done += static_cast<std::size_t>(got);
    }
    return done;
  }

  int fd_;
  std::string const& path_;
  std::vector<unsigned char> buffer_ = std::vector<unsigned char>(std::size_t{1} << 16);
  std::size_t begin_{0};
  std::size_t end_{0};
  std::uint32_t crc_{0};
};

[[noreturn]] void throw_checksum_error(std::string const& path, std::uint32_t computed,
                                       std::uint32_t stored) {
  throw error{"checkpoint::load: " + path + " is corrupt: the CRC-32C of its contents is " +
              hex32(computed) + ", but the checksum stored at its end is " + hex32(stored) +
              " (checksum mismatch): the file was damaged after it was written (a failing disk, "
              "an interrupted copy); restore it from a copy or resume from an earlier checkpoint"};
}

// Throws the checksum error unless the last four bytes of the file are the CRC-32C of the rest.
// Reads with pread, so the position of a reader on the same descriptor stays where it was.
void verify_checksum(int fd, std::string const& path, std::uint64_t file_size) {
  std::vector<unsigned char> buffer(io_buffer_size);
  std::uint64_t const covered = file_size - checksum_size;
  std::uint64_t offset = 0;
  std::uint32_t crc = 0;
  while (offset < covered) {
    auto const size =
        static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), covered - offset));
    detail::read_at(fd, path, "checkpoint::load", buffer.data(), size, offset);
    crc = detail::crc32c(crc, buffer.data(), size);
    offset += size;
  }
  std::array<unsigned char, 4> stored{};
  detail::read_at(fd, path, "checkpoint::load", stored.data(), stored.size(), covered);
  if (get_u32(stored.data()) != crc) throw_checksum_error(path, crc, get_u32(stored.data()));
}

std::string hex_bytes(unsigned char const* bytes, std::size_t size) {
  std::string text;
  for (std::size_t i = 0; i < size; ++i)
    text += (i > 0 ? " " : "") + detail::hex_digits(bytes[i], 2);
  return text;
}

// The entries after the header; every size is checked against the bytes left before allocating.
std::vector<checkpoint_entry> read_entries(file_reader& reader, std::uint64_t count,
                                           std::uint64_t payload) {
  std::uint64_t left = payload;
  std::vector<checkpoint_entry> entries;
  entries.reserve(static_cast<std::size_t>(std::min(count, payload / smallest_entry)));
  std::map<std::string, std::size_t, std::less<>> names;
  for (std::uint64_t i = 0; i < count; ++i) {
    checkpoint_entry entry;
    std::string name;
    dtype type{dtype::uint8};  // a value's: its bytes
    std::vector<std::int64_t> shape;
    auto const where = [&] {
      return "entry " + std::to_string(i) + (name.empty() ? "" : " " + quoted(name));
    };
    auto const take = [&](std::uint64_t size, char const* what) {
      if (size > left) {
        throw malformed{
            where() + ": its " + what + " needs " + std::to_string(size) + " bytes, but only " +
            std::to_string(left) + " bytes of the payload are left (the header promises " +
            std::to_string(count) + " entries in " + std::to_string(payload) + " bytes)"};
      }
      left -= size;
    };

    take(8, "kind and name length");
    std::uint32_t const kind = reader.read_u32();
    if (kind > static_cast<std::uint32_t>(checkpoint_kind::value)) {
      throw malformed{where() + " has kind " + std::to_string(kind) +
                      ", which is neither tensor (0) nor value (1)"};
    }
    entry.kind = static_cast<checkpoint_kind>(kind);
    std::uint32_t const name_size = reader.read_u32();
    if (name_size == 0) throw malformed{where() + " has an empty name"};
    take(name_size, "name");
    name.resize(name_size);
    reader.read(name.data(), name_size);
    if (names.count(name) != 0) {
      throw malformed{where() + " repeats the name of entry " +
                      std::to_string(names.find(name)->second)};
    }

    std::uint64_t expected_bytes = 0;
    if (entry.kind == checkpoint_kind::tensor) {
      take(8, "dtype and rank");
      std::uint32_t const code = reader.read_u32();
      if (!dtype_of_code(code, type)) {
        throw malformed{where() + " has dtype code " + std::to_string(code) +
                        ", which is no dtype (0 float32, 1 float16, 2 bfloat16)"};
      }
      std::uint32_t const rank = reader.read_u32();
      take(std::uint64_t{8} * rank, "shape");
      shape.resize(rank);
      for (std::int64_t& dimension : shape) {
        dimension = static_cast<std::int64_t>(reader.read_u64());
      }
      std::uint64_t elements = 0;
      if (!element_count(shape, elements) || !byte_count(elements, type, expected_bytes)) {
        throw malformed{where() + " has the shape " + layout(type, shape) +
                        ", which has a negative dimension or more elements than fit 64 bits"};
      }
    }
    take(8, "byte count");
    std::uint64_t const size = reader.read_u64();
    if (entry.kind == checkpoint_kind::tensor && size != expected_bytes) {
      throw malformed{where() + " is a tensor " + layout(type, shape) + " of " +
                      std::to_string(expected_bytes) + " bytes, but its byte count is " +
                      std::to_string(size)};
    }
    take(size, "data");
    entry.bytes.resize(static_cast<std::size_t>(size));
    reader.read(entry.bytes.data(), entry.bytes.size());
    if (entry.kind == checkpoint_kind::value) shape = {static_cast<std::int64_t>(size)};
    // Checked above: the extents are not negative and the bytes fit 64 bits.
    entry.spec = tensor_spec{name, std::move(shape), type};
    names.emplace(std::move(name), static_cast<std::size_t>(i));
    entries.push_back(std::move(entry));
  }
  if (left != 0) {
    throw malformed{std::to_string(left) + " bytes of the payload follow its last entry (entry " +
                    std::to_string(count) + " of " + std::to_string(count) + ")"};
  }
  return entries;
}

}  // namespace

// --- checkpoint ---------------------------------------------------------------------------

void checkpoint::add_entry(checkpoint_entry entry) {
  std::string const& name = entry.spec.name();
  GRAPHSTEP_EXPECTS(!name.empty(),
                    "checkpoint: an entry needs a name (e.g. \"optimizer/master/3\")");
  GRAPHSTEP_EXPECTS(name.size() <= std::numeric_limits<std::uint32_t>::max(),
                    "checkpoint: an entry's name must be shorter than 4 GiB");
  GRAPHSTEP_EXPECTS(index_.count(name) == 0,
                    "checkpoint: an entry named " + quoted(name) +
                        " is already present; give each tensor and value its own name");
  index_.emplace(name, entries_.size());
  entries_.push_back(std::move(entry));
}

void checkpoint::add_tensor(tensor_spec spec, std::vector<unsigned char> bytes) {
  std::string const which = "checkpoint: tensor " + quoted(spec.name());
  GRAPHSTEP_EXPECTS(spec.shape().size() <= std::numeric_limits<std::uint32_t>::max(),
                    which + " has more dimensions than the format holds (2^32 - 1)");
  GRAPHSTEP_EXPECTS(bytes.size() == spec.bytes(),
                    which + " is " + layout(spec.type(), spec.shape()) + ", which is " +
                        std::to_string(spec.bytes()) + " bytes, but " +
                        std::to_string(bytes.size()) +
                        " bytes were given; pass product(shape) * size_in_bytes(type) bytes");
  add_entry(checkpoint_entry{checkpoint_kind::tensor, std::move(spec), std::move(bytes)});
}

void checkpoint::add_value_bytes(std::string name, void const* data, std::size_t size) {
  auto const* bytes = static_cast<unsigned char const*>(data);
  add_entry(checkpoint_entry{
      checkpoint_kind::value,
      tensor_spec{std::move(name), {static_cast<std::int64_t>(size)}, dtype::uint8},
      std::vector<unsigned char>(bytes, bytes + size)});
}

bool checkpoint::contains(std::string_view name) const noexcept {
  return index_.find(name) != index_.end();
}

std::string checkpoint::missing_entry(std::string_view name) const {
  if (entries_.empty()) return "the checkpoint holds no entries";
  // The names closest to the one asked for (the longest common prefix), so that "layer/3/w"
  // missing shows "layer/2/w" and its neighbours rather than the first entries.
  std::vector<std::pair<std::size_t, std::size_t>> ranked;  // (-common prefix, position)
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    std::string const& other = entries_[i].spec.name();
    std::size_t common = 0;
    while (common < other.size() && common < name.size() && other[common] == name[common]) {
      ++common;
    }
    ranked.emplace_back(std::numeric_limits<std::size_t>::max() - common, i);
  }
  std::size_t const shown = std::min<std::size_t>(5, ranked.size());
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(shown),
                    ranked.end());
  std::sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(shown),
            [](auto const& a, auto const& b) { return a.second < b.second; });
  std::string text = "the checkpoint holds " + std::to_string(entries_.size()) + " entr" +
                     (entries_.size() == 1 ? "y" : "ies") + ", among them ";
  for (std::size_t i = 0; i < shown; ++i) {
    if (i > 0) text += ", ";
    text += quoted(entries_[ranked[i].second].spec.name());
  }
  return text;
}

namespace {
constexpr char const* another_layout =
    "; the checkpoint was written by another model layout or configuration: build the model as "
    "the run that wrote it did, or convert the checkpoint";
}  // namespace

checkpoint_entry const& checkpoint::tensor(tensor_spec const& expected_spec) const {
  std::string const& name = expected_spec.name();
  dtype const type = expected_spec.type();
  std::vector<std::int64_t> const& shape = expected_spec.shape();
  std::string const expected = layout(type, shape);
  auto const found = index_.find(name);
  GRAPHSTEP_EXPECTS(found != index_.end(), "checkpoint: no tensor " + quoted(name) + " (expected " +
                                               expected + "); " + missing_entry(name) +
                                               another_layout);
  checkpoint_entry const& entry = entries_[found->second];
  GRAPHSTEP_EXPECTS(entry.kind == checkpoint_kind::tensor,
                    "checkpoint: " + quoted(name) + " is a value of " +
                        std::to_string(entry.bytes.size()) + " bytes, not a tensor (expected " +
                        expected + ")" + another_layout);
  bool const same_type = entry.spec.type() == type;
  bool const same_shape = entry.spec.shape() == shape;
  GRAPHSTEP_EXPECTS(same_type && same_shape, "checkpoint: tensor " + quoted(name) + " is " +
                                                 layout(entry.spec.type(), entry.spec.shape()) +
                                                 " in the checkpoint, but " + expected +
                                                 " is expected (" +
                                                 (same_type    ? "the shape differs"
                                                  : same_shape ? "the dtype differs"
                                                               : "dtype and shape differ") +
                                                 ")" + another_layout);
  return entry;
}

checkpoint_entry const& checkpoint::value_entry(std::string_view name, std::size_t size) const {
  auto const found = index_.find(name);
  GRAPHSTEP_EXPECTS(found != index_.end(), "checkpoint: no value " + quoted(name) + " (of " +
                                               std::to_string(size) + " bytes); " +
                                               missing_entry(name) + another_layout);
  checkpoint_entry const& entry = entries_[found->second];
  GRAPHSTEP_EXPECTS(entry.kind == checkpoint_kind::value,
                    "checkpoint: " + quoted(name) + " is a tensor " +
                        layout(entry.spec.type(), entry.spec.shape()) +
                        ", not a value; read it with tensor()");
  GRAPHSTEP_EXPECTS(entry.bytes.size() == size,
                    "checkpoint: value " + quoted(name) + " holds " +
                        std::to_string(entry.bytes.size()) + " bytes, but is read as a type of " +
                        std::to_string(size) + " bytes; read it as the type it was added as" +
                        another_layout);
  return entry;
}

void checkpoint::save(std::string const& path) const {
  detail::save_atomically(path, "checkpoint::save", [&](detail::save_sink& sink) {
    file_writer writer{sink};
    writer.put(magic.data(), magic.size());
    writer.put_u32(format_version);
    writer.put_u32(0);  // flags
    writer.put_u64(entries_.size());
    writer.put_u64(payload_size(entries_));
    for (checkpoint_entry const& entry : entries_) {
      writer.put_u32(static_cast<std::uint32_t>(entry.kind));
      writer.put_u32(static_cast<std::uint32_t>(entry.spec.name().size()));
      writer.put(entry.spec.name().data(), entry.spec.name().size());
      if (entry.kind == checkpoint_kind::tensor) {
        writer.put_u32(dtype_code(entry.spec.type()));
        writer.put_u32(static_cast<std::uint32_t>(entry.spec.shape().size()));
        for (std::int64_t dimension : entry.spec.shape()) {
          writer.put_u64(static_cast<std::uint64_t>(dimension));
        }
      }
      writer.put_u64(entry.bytes.size());
      writer.put(entry.bytes.data(), entry.bytes.size());
    }
    writer.finish();
  });
}

checkpoint checkpoint::load(std::string const& path) {
  std::uint64_t file_size = 0;
  detail::file_descriptor const fd = detail::open_for_reading(path, "checkpoint::load", file_size);
  std::string const where = "checkpoint::load: " + path;

  file_reader reader{fd.get(), path};
  std::array<unsigned char, header_size> header{};
  std::size_t const head = static_cast<std::size_t>(std::min<std::uint64_t>(file_size, 8));
  reader.read(header.data(), head);
  if (!std::equal(header.begin(), header.begin() + static_cast<std::ptrdiff_t>(head),
                  magic.begin())) {
    throw error{where + " is not a graphstep checkpoint: it starts with " +
                hex_bytes(header.data(), head) + ", a checkpoint with " +
                hex_bytes(magic.data(), magic.size())};
  }
  if (file_size < header_size) {
    throw error{where + " is truncated: its " + std::to_string(file_size) +
                " bytes end inside the " + std::to_string(header_size) +
                "-byte header; the save that wrote it did not finish, or the copy was cut short"};
  }
  reader.read(header.data() + 8, header_size - 8);
  std::uint32_t const version = get_u32(header.data() + 8);
  std::uint32_t const flags = get_u32(header.data() + 12);
  std::uint64_t const count = get_u64(header.data() + 16);
  std::uint64_t const payload = get_u64(header.data() + 24);

  // Every version keeps this header and ends with the CRC-32C of all before it, so the size and
  // the checksum are checked before the version: a damaged version field reads as corruption.
  std::uint64_t const promised =
      payload > std::numeric_limits<std::uint64_t>::max() - header_size - checksum_size
          ? std::numeric_limits<std::uint64_t>::max()
          : header_size + payload + checksum_size;
  if (file_size < promised) {
    throw error{where + " is truncated (or its header is corrupt): it has " +
                std::to_string(file_size) + " bytes, but its header promises " +
                std::to_string(payload) + " bytes of entries, " + std::to_string(promised) +
                " bytes in all; the save that wrote it did not finish, or the copy was cut short"};
  }
  if (file_size > promised) {
    throw error{where + " is corrupt: it has " + std::to_string(file_size) + " bytes, " +
                std::to_string(file_size - promised) + " more than its header promises (" +
                std::to_string(promised) + ")"};
  }
  if (version != format_version || flags != 0) {
    verify_checksum(fd.get(), path, file_size);
    if (version > format_version) {
      throw error{where + " was written in checkpoint format version " + std::to_string(version) +
                  " by a newer graphstep; this one reads versions up to " +
                  std::to_string(format_version) + ": load it with a newer graphstep"};
    }
    if (version == 0) {
      throw error{where + " is corrupt: its format version is 0, which no writer uses"};
    }
    throw error{where + " is corrupt: its reserved flags are " + hex32(flags) +
                ", which format version 1 leaves 0"};
  }

  checkpoint result;
  try {
    result.entries_ = read_entries(reader, count, payload);
  } catch (malformed const& problem) {
    verify_checksum(fd.get(), path, file_size);  // a damaged file: say that, not what it broke
    throw error{where +
                " is malformed although its checksum holds (a writer other than "
                "graphstep's, or a bug in it): " +
                problem.what};
  }
  std::uint32_t const computed = reader.crc();
  std::array<unsigned char, 4> stored{};
  reader.read(stored.data(), stored.size());
  if (get_u32(stored.data()) != computed) {
    throw_checksum_error(path, computed, get_u32(stored.data()));
  }
  for (std::size_t i = 0; i < result.entries_.size(); ++i) {
    result.index_.emplace(result.entries_[i].spec.name(), i);
  }
  return result;
}

// --- detail -------------------------------------------------------------------------------

namespace detail {

std::uint32_t crc32c(std::uint32_t crc, void const* data, std::size_t size) noexcept {
  auto const& t = crc_table.t;
  auto const* p = static_cast<unsigned char const*>(data);
  std::uint32_t c = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    std::uint32_t const low = c ^ get_u32(p);
    std::uint32_t const high = get_u32(p + 4);
    c = t[7][low & 0xFFU] ^ t[6][(low >> 8) & 0xFFU] ^ t[5][(low >> 16) & 0xFFU] ^ t[4][low >> 24] ^
        t[3][high & 0xFFU] ^ t[2][(high >> 8) & 0xFFU] ^ t[1][(high >> 16) & 0xFFU] ^
        t[0][high >> 24];
  }
  for (; size > 0; --size, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xFFU];
  return ~c;
}

}  // namespace detail
}  // namespace graphstep::train
