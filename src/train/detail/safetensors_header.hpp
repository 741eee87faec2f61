#pragma once

// The JSON header of a safetensors file (https://github.com/huggingface/safetensors, "Format"):
// one object whose keys name tensors, each an object {"dtype": "F32", "shape": [2, 3],
// "data_offsets": [begin, end]}, beside an optional "__metadata__" object of strings. This is
// the subset of JSON (RFC 8259) those headers use, parsed strictly, and written back.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace graphstep::train::detail {

/// @brief One tensor of a safetensors header, as the header states it.
struct safetensors_tensor {
  std::string name;
  std::string dtype;  ///< as written ("F32"); the caller maps it
  std::vector<std::uint64_t> shape;
  std::uint64_t begin{0};  ///< data_offsets[0], relative to the byte buffer after the header
  std::uint64_t end{0};    ///< data_offsets[1], one past the last byte
};

/// @brief A safetensors header: its tensors and its "__metadata__", each in the header's order.
struct safetensors_header {
  std::vector<safetensors_tensor> tensors;
  std::vector<std::pair<std::string, std::string>> metadata;
};

/// @brief Parses the header's JSON text. Strict: the text is one object and nothing after it
/// but JSON whitespace (the spaces that pad the header to 8 bytes); no key repeats, in the
/// header or in an object within it; a tensor's object has exactly the keys "dtype" (a
/// string), "shape" (an array of integers 0 or more) and "data_offsets" (an array of two such,
/// begin not after end); "__metadata__" holds strings only; numbers are plain decimal integers
/// that fit 64 bits (no sign, fraction, exponent or leading zero); strings are UTF-8 with
/// JSON's escapes (surrogate pairs joined, lone surrogates refused). Which dtypes exist and
/// whether the offsets fit the file are the caller's to check.
/// @throws error beginning with `where`, saying what was expected and at which byte
[[nodiscard]] safetensors_header parse_safetensors_header(std::string_view text,
                                                          std::string const& where);

/// @brief The JSON text of `header` (compact, "__metadata__" first when it has any entry, then
/// the tensors in order), unpadded. Every string must be valid UTF-8 (`is_utf8`).
[[nodiscard]] std::string write_safetensors_header(safetensors_header const& header);

/// @brief Whether `text` is well-formed UTF-8 (RFC 3629: no overlong form, no surrogate, nothing
/// past U+10FFFF), as JSON text must be.
[[nodiscard]] bool is_utf8(std::string_view text) noexcept;

}  // namespace graphstep::train::detail
