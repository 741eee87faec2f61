// graphstep_core: plain C++, includes no CUDA header.
//
// A checkpoint as a safetensors file (https://github.com/huggingface/safetensors, "Format"): an
// 8-byte little-endian header length N, N bytes of JSON header, then the byte buffer that the
// tensors' data_offsets index. How a checkpoint maps onto it is specified in
// docs/checkpoint_format.md ("safetensors").

#include <algorithm>
#include <array>
#include <cstdint>
#include <graphstep/error.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "train/detail/checkpoint_io.hpp"
#include "train/detail/safetensors_header.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors stores tensor bytes little-endian, as the host holds them");

namespace graphstep::train {
namespace {

constexpr char const* save_name = "checkpoint::save_safetensors";
constexpr char const* load_name = "checkpoint::load_safetensors";

// The metadata keys of the mapping; the version changes when a reader of the one before
// would misread a file.
constexpr std::string_view version_key = "graphstep.checkpoint";
constexpr std::string_view mapping_version = "1";
constexpr std::string_view value_prefix = "graphstep.value:";
constexpr std::string_view own_prefix = "graphstep.";

// The reference reader refuses a longer header ("Prevent DOS attacks", safetensors' README); so
// does this one, before allocating it.
constexpr std::uint64_t largest_header = 100'000'000;

// The safetensors dtypes graphstep holds, one to one.
char const* safetensors_dtype(dtype type) {
  switch (type) {
    case dtype::float32: return "F32";
    case dtype::float16: return "F16";
    case dtype::bfloat16: return "BF16";
    case dtype::int32: return "I32";
    case dtype::uint8: return "U8";
  }
  return "?";
}

bool dtype_of_safetensors(std::string_view name, dtype& type) {
  for (dtype candidate :
       {dtype::float32, dtype::float16, dtype::bfloat16, dtype::int32, dtype::uint8}) {
    if (name == safetensors_dtype(candidate)) {
      type = candidate;
      return true;
    }
  }
  return false;
}

// The format's other dtypes (the reference implementation's `Dtype`), which graphstep has no
// counterpart for: named apart from a string that is no dtype at all.
bool is_other_safetensors_dtype(std::string_view name) {
  constexpr std::array<std::string_view, 17> others{
      "BOOL",    "F4",      "F6_E2M3",     "F6_E3M2",     "I8",  "F8_E5M2",
      "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16",
      "U32",     "C64",     "F64",         "I64",         "U64"};
  return std::find(others.begin(), others.end(), name) != others.end();
}

std::string quoted(std::string_view text) {
  return "\"" + std::string{text} + "\"";
}

std::string shape_text(std::vector<std::uint64_t> const& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::string offsets_text(detail::safetensors_tensor const& tensor) {
  return "[" + std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) + "]";
}

void put_u64(std::array<unsigned char, 8>& out, std::uint64_t value) {
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

std::uint64_t get_u64(std::array<unsigned char, 8> const& in) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 8; ++i) value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return value;
}

// Whether `text` is a decimal integer without sign or leading zero that fits `value`.
bool parse_count(std::string_view text, std::uint64_t& value) {
  if (text.empty() || text.size() > 19 || (text[0] == '0' && text.size() > 1)) return false;
  value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return true;
}

}  // namespace

void checkpoint::save_safetensors(std::string const& path) const {
  std::string const who = save_name;
  detail::safetensors_header header;
  header.metadata.emplace_back(version_key, mapping_version);
  header.tensors.reserve(entries_.size());
  for (checkpoint_entry const& entry : entries_) {
    std::string const& name = entry.spec.name();
    GRAPHSTEP_EXPECTS(detail::is_utf8(name),
                      who + ": the name of entry " + quoted(name) +
                          " is not UTF-8, which a safetensors header (JSON) must be; rename it");
    GRAPHSTEP_EXPECTS(name != "__metadata__",
                      who +
                          ": an entry is named \"__metadata__\", the key safetensors keeps for "
                          "its metadata; rename it");
    detail::safetensors_tensor tensor;
    tensor.name = name;
    // A value's spec is already U8 [its size]; the metadata marks it as a value.
    tensor.dtype = safetensors_dtype(entry.spec.type());
    tensor.shape.assign(entry.spec.shape().begin(), entry.spec.shape().end());
    if (entry.kind == checkpoint_kind::value) {
      header.metadata.emplace_back(std::string{value_prefix} + name,
                                   std::to_string(entry.bytes.size()));
    }
    header.tensors.push_back(std::move(tensor));
  }

  // The data by element size, largest first (in the entries' order within a size), as the
  // reference writer lays it out: the buffer starts 8-byte aligned, so every tensor's data is
  // aligned to its element, which readers that map the file in place want.
  std::vector<std::size_t> layout(entries_.size());
  std::iota(layout.begin(), layout.end(), std::size_t{0});
  auto const element = [&](std::size_t i) {
    checkpoint_entry const& entry = entries_[i];
    return size_in_bytes(entry.spec.type());  // a value's is uint8
  };
  std::stable_sort(layout.begin(), layout.end(),
                   [&](std::size_t a, std::size_t b) { return element(a) > element(b); });
  std::uint64_t offset = 0;
  for (std::size_t i : layout) {
    header.tensors[i].begin = offset;
    offset += entries_[i].bytes.size();
    header.tensors[i].end = offset;
  }

  std::string text = detail::write_safetensors_header(header);
  text.append((8 - text.size() % 8) % 8, ' ');  // the padding the format allows: spaces
  detail::save_atomically(path, save_name, [&](detail::save_sink& sink) {
    std::array<unsigned char, 8> length{};
    put_u64(length, text.size());
    sink.put(length.data(), length.size());
    sink.put(text.data(), text.size());
    for (std::size_t i : layout) sink.put(entries_[i].bytes.data(), entries_[i].bytes.size());
  });
}

checkpoint checkpoint::load_safetensors(std::string const& path) {
  std::uint64_t file_size = 0;
  detail::file_descriptor const fd = detail::open_for_reading(path, load_name, file_size);
  std::string const where = std::string{load_name} + ": " + path;

  if (file_size < 8) {
    throw error{where + " is truncated or no safetensors file: its " + std::to_string(file_size) +
                " bytes end inside the 8-byte length of the header that begins a safetensors "
                "file"};
  }
  std::array<unsigned char, 8> length_bytes{};
  detail::read_at(fd.get(), path, load_name, length_bytes.data(), length_bytes.size(), 0);
  std::uint64_t const header_size = get_u64(length_bytes);
  if (header_size > file_size - 8) {
    throw error{where +
                " is truncated or no safetensors file: its first 8 bytes give a header of " +
                std::to_string(header_size) + " bytes, past the end of the file (" +
                std::to_string(file_size) + " bytes in all)"};
  }
  if (header_size > largest_header) {
    throw error{where + " is no safetensors file the reference reader accepts: its header has " +
                std::to_string(header_size) + " bytes, more than the format's limit of " +
                std::to_string(largest_header)};
  }
  std::string text(static_cast<std::size_t>(header_size), '\0');
  detail::read_at(fd.get(), path, load_name, text.data(), text.size(), 8);
  if (!detail::is_utf8(text)) {
    throw error{where + ": the header is not UTF-8, which a safetensors header (JSON) must be"};
  }
  detail::safetensors_header const header = detail::parse_safetensors_header(text, where);

  // The metadata: graphstep's own keys; the others (a writer's "format": "pt") are not ours.
  std::vector<std::pair<std::string_view, std::uint64_t>> values;  // name, size
  for (auto const& [key, value] : header.metadata) {
    std::string_view const k = key;
    if (k.substr(0, own_prefix.size()) != own_prefix) continue;
    if (k == version_key) {
      std::uint64_t version = 0;
      if (!parse_count(value, version) || version == 0) {
        throw error{where + ": the metadata's " + quoted(version_key) + " is " + quoted(value) +
                    ", which is no version of graphstep's mapping (\"1\")"};
      }
      if (value != mapping_version) {
        throw error{where + " was written by a newer graphstep (its " + quoted(version_key) +
                    " is " + quoted(value) + "); this one reads version " +
                    std::string{mapping_version} + ": load it with a newer graphstep"};
      }
    } else if (k.substr(0, value_prefix.size()) == value_prefix) {
      std::uint64_t size = 0;
      if (!parse_count(value, size)) {
        throw error{where + ": the metadata's " + quoted(key) + " is " + quoted(value) +
                    ", which is no byte count"};
      }
      values.emplace_back(k.substr(value_prefix.size()), size);
    } else {
      throw error{where + ": the metadata holds the key " + quoted(key) +
                  ", which this graphstep does not know (a newer graphstep wrote the file?)"};
    }
  }

  // Each tensor: its dtype, and its shape against its data_offsets.
  std::vector<checkpoint_entry> entries(header.tensors.size());
  for (std::size_t i = 0; i < header.tensors.size(); ++i) {
    detail::safetensors_tensor const& t = header.tensors[i];
    std::string const which = where + ": tensor " + quoted(t.name);
    if (t.name.empty()) {
      throw error{where + ": a tensor has an empty name, which a checkpoint entry cannot have"};
    }
    checkpoint_entry& entry = entries[i];
    dtype type{};
    if (!dtype_of_safetensors(t.dtype, type)) {
      if (is_other_safetensors_dtype(t.dtype)) {
        throw error{which + " is " + t.dtype +
                    ", which graphstep has no dtype for; it holds F32, F16, BF16, I32 and U8: "
                    "convert the tensor before saving it (e.g. tensor.to(torch.float32) or "
                    ".to(torch.int32))"};
      }
      throw error{which + " has the dtype " + quoted(t.dtype) +
                  ", which is no safetensors dtype (F32, F16, BF16, I32, U8, F64, I64, ...)"};
    }
    std::uint64_t elements = 1;
    for (std::uint64_t dimension : t.shape) {
      if (dimension > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          (dimension != 0 && elements > std::numeric_limits<std::uint64_t>::max() / dimension)) {
        throw error{which + " has the shape " + shape_text(t.shape) +
                    ", whose size does not fit 64 bits"};
      }
      elements *= dimension;
    }
    std::uint64_t const element = size_in_bytes(type);
    if (elements > std::numeric_limits<std::uint64_t>::max() / element) {
      throw error{which + " has the shape " + shape_text(t.shape) +
                  ", whose size does not fit 64 bits"};
    }
    std::uint64_t const bytes = elements * element;
    if (t.end - t.begin != bytes) {
      throw error{which + " is " + t.dtype + " " + shape_text(t.shape) + ", " +
                  std::to_string(bytes) + " bytes, but its data_offsets " + offsets_text(t) +
                  " hold " + std::to_string(t.end - t.begin) +
                  ": the shape does not match the data offsets"};
    }
    // Checked above: each extent fits an int64, and the bytes 64 bits.
    entry.spec =
        tensor_spec{t.name, std::vector<std::int64_t>(t.shape.begin(), t.shape.end()), type};
  }

  // The data_offsets together cover the byte buffer exactly, as the format requires: no tensor
  // overlaps another, no byte belongs to none, none lies past the buffer's end.
  std::uint64_t const buffer_size = file_size - 8 - header_size;
  std::vector<std::size_t> by_offset(header.tensors.size());
  std::iota(by_offset.begin(), by_offset.end(), std::size_t{0});
  std::sort(by_offset.begin(), by_offset.end(), [&](std::size_t a, std::size_t b) {
    auto const& x = header.tensors[a];
    auto const& y = header.tensors[b];
    return std::pair{x.begin, x.end} < std::pair{y.begin, y.end};
  });
  std::uint64_t covered = 0;
  std::size_t previous = by_offset.size();
  for (std::size_t i : by_offset) {
    detail::safetensors_tensor const& t = header.tensors[i];
    if (t.end > buffer_size) {
      throw error{where + " is truncated (or its header is corrupt): tensor " + quoted(t.name) +
                  " has data_offsets " + offsets_text(t) + ", past the end of the " +
                  std::to_string(buffer_size) + " bytes of data after the header"};
    }
    if (t.begin < covered) {
      detail::safetensors_tensor const& other = header.tensors[previous];
      throw error{where + ": tensor " + quoted(t.name) + " has data_offsets " + offsets_text(t) +
                  ", which overlap those of tensor " + quoted(other.name) + " " +
                  offsets_text(other) + "; each tensor's data must have bytes of its own"};
    }
    if (t.begin > covered) {
      throw error{where + ": the bytes [" + std::to_string(covered) + ", " +
                  std::to_string(t.begin) + ") of the data belong to no tensor (the next, " +
                  quoted(t.name) + ", begins at " + std::to_string(t.begin) +
                  "); the format allows no gap"};
    }
    covered = t.end;
    previous = i;
  }
  if (covered != buffer_size) {
    throw error{where + ": its last " + std::to_string(buffer_size - covered) + " bytes (of " +
                std::to_string(buffer_size) +
                " after the header) belong to no tensor; the format allows no gap"};
  }

  // The values: a U8 tensor of the stated size each.
  for (auto const& value : values) {
    std::string const name{value.first};
    std::uint64_t const size = value.second;
    auto const found = std::find_if(entries.begin(), entries.end(), [&](checkpoint_entry const& e) {
      return e.spec.name() == name;
    });
    std::string const mark = where + ": the metadata's " + quoted(std::string{value_prefix} + name);
    if (found == entries.end()) {
      throw error{mark + " marks a value, but no tensor is named " + quoted(name)};
    }
    std::vector<std::int64_t> const& found_shape = found->spec.shape();
    if (found->spec.type() != dtype::uint8 || found_shape.size() != 1 ||
        static_cast<std::uint64_t>(found_shape[0]) != size) {
      std::vector<std::uint64_t> const shape(found_shape.begin(), found_shape.end());
      throw error{mark + " marks a value of " + std::to_string(size) +
                  " bytes, but the tensor is " + safetensors_dtype(found->spec.type()) + " " +
                  shape_text(shape) + ", not U8 [" + std::to_string(size) + "]"};
    }
    found->kind = checkpoint_kind::value;  // its spec, U8 [size], is what add_value gives it
  }

  // The data, read in the file's order; each size was checked against the file above.
  for (std::size_t i : by_offset) {
    detail::safetensors_tensor const& t = header.tensors[i];
    entries[i].bytes.resize(static_cast<std::size_t>(t.end - t.begin));
    detail::read_at(fd.get(), path, load_name, entries[i].bytes.data(), entries[i].bytes.size(),
                    8 + header_size + t.begin);
  }

  checkpoint result;
  for (checkpoint_entry& entry : entries) result.add_entry(std::move(entry));
  return result;
}

}  // namespace graphstep::train
