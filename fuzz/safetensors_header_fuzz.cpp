// libFuzzer target: the JSON header of a safetensors file, which load_safetensors reads from
// files it does not trust. The fuzzer's bytes are either the header itself or, more often, a
// sequence of JSON tokens of the header's grammar (braces, keys, dtypes, numbers at the limits,
// escapes, surrogates), so that nearly-valid headers occur. The parser must refuse what it
// refuses with graphstep::error alone, and a header it accepts must hold offsets that begin no
// later than they end, no name twice, and write back to text that parses to the same header.
// Build and run with scripts/fuzz.sh.

#include <array>
#include <cstdint>
#include <graphstep/error.hpp>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_input.hpp"
#include "train/detail/safetensors_header.hpp"

namespace gtd = graphstep::train::detail;

namespace {

using graphstep::fuzz::fail;
using graphstep::fuzz::reader;

// Single tokens, and whole members and objects, so that random draws reach accepted headers.
constexpr std::array<std::string_view, 48> tokens{
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    " ",
    "\n",
    "\"dtype\"",
    "\"shape\"",
    "\"data_offsets\"",
    "\"__metadata__\"",
    "\"F32\"",
    "\"BF16\"",
    "\"U8\"",
    "\"X\"",
    "\"a\"",
    "\"b\"",
    "\"a\"",
    "\"\\u00e9\"",
    "\"\\ud83d\\ude00\"",
    "\"\\ud800\"",
    "\"\\udc00\"",
    "\"\\\"\\\\\\/\\n\"",
    "\"\\q\"",
    "\"\t\"",
    "\"\xc3\xa9\"",
    "\"\xff\"",
    "0",
    "1",
    "8",
    "00",
    "-1",
    "1.5",
    "2e3",
    "18446744073709551615",
    "18446744073709551616",
    "\"",
    "\\",
    "x",
    R"("dtype":"F32")",
    R"("shape":[2,3])",
    R"("shape":[])",
    R"("data_offsets":[0,24])",
    R"("data_offsets":[8,0])",
    R"({"dtype":"U8","shape":[0],"data_offsets":[0,0]})",
    R"({"dtype":"I32","shape":[1],"data_offsets":[4,8]})",
    R"({"k":"v","graphstep.x":""})"};

bool same(gtd::safetensors_header const& a, gtd::safetensors_header const& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    auto const& x = a.tensors[i];
    auto const& y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.begin != y.begin ||
        x.end != y.end) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  if (size == 0) return 0;
  std::string text;
  if (data[0] % 4 == 0) {  // the bytes themselves
    text.assign(reinterpret_cast<char const*>(data) + 1, size - 1);
  } else {  // tokens of the grammar
    reader in{data + 1, size - 1};
    while (!in.done()) text += tokens[in.next(tokens.size())];
  }
  if (!gtd::is_utf8(text)) return 0;  // load_safetensors refuses it before parsing

  gtd::safetensors_header header;
  try {
    header = gtd::parse_safetensors_header(text, "fuzz");
  } catch (graphstep::error const&) {
    return 0;  // refused, as it may be
  }
  std::set<std::string> names;
  for (auto const& tensor : header.tensors) {
    if (tensor.begin > tensor.end || !names.insert(tensor.name).second) fail();
    if (tensor.name == "__metadata__") fail();
  }
  std::string const written = gtd::write_safetensors_header(header);
  if (!gtd::is_utf8(written)) fail();
  try {
    if (!same(gtd::parse_safetensors_header(written, "fuzz"), header)) fail();
  } catch (graphstep::error const&) {
    fail();  // what the writer wrote must parse
  }
  return 0;
}
