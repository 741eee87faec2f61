// Checkpoints as safetensors files (checkpoint::save_safetensors, load_safetensors): the round
// trip bit for bit, the bytes of the mapping that docs/checkpoint_format.md shows, files of
// other writers, and a clear error for each way a file can be wrong. The Python side (the
// safetensors package and PyTorch) is in checkpoint_safetensors_python_test.cpp.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error_message.hpp"
#include "common/file_bytes.hpp"

namespace gt = graphstep::train;
using graphstep::dtype;
using graphstep::testing::bytes;
using graphstep::testing::contains;
using graphstep::testing::message_of;
using graphstep::testing::random_bytes;
using graphstep::testing::read_file;
using graphstep::testing::write_file;

namespace {

// A safetensors file as another writer would make it: the header's length, the header, the data.
bytes safetensors_file(std::string const& header, bytes const& data) {
  bytes file;
  file.reserve(8 + header.size() + data.size());
  std::uint64_t const size = header.size();
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<unsigned char>(size >> (8 * i)));
  for (char c : header) file.push_back(static_cast<unsigned char>(c));
  for (unsigned char byte : data) file.push_back(byte);
  return file;
}

std::uint64_t header_length(bytes const& file) {
  std::uint64_t size = 0;
  for (int i = 0; i < 8; ++i) size |= std::uint64_t{file[i]} << (8 * i);
  return size;
}

void expect_same(gt::checkpoint const& a, gt::checkpoint const& b) {
  ASSERT_EQ(a.entries().size(), b.entries().size());
  for (std::size_t i = 0; i < a.entries().size(); ++i) {
    gt::checkpoint_entry const& x = a.entries()[i];
    gt::checkpoint_entry const& y = b.entries()[i];
    EXPECT_EQ(x.spec, y.spec) << "entry " << i;
    EXPECT_EQ(x.kind, y.kind) << x.spec.name();
    EXPECT_EQ(x.bytes, y.bytes) << x.spec.name();
  }
}

// Every kind of entry, tensors and values interleaved as a trainer adds them.
gt::checkpoint mixed_checkpoint() {
  gt::checkpoint c;
  c.add_tensor({"model/w", {3, 4}, dtype::float32}, random_bytes(48, 1));
  c.add_value("step", std::int64_t{-42});
  c.add_tensor({"model/w16", {5, 1, 3}, dtype::float16}, random_bytes(30, 2));
  c.add_tensor({"model/wbf16", {7}, dtype::bfloat16}, random_bytes(14, 3));
  c.add_tensor({"data/tokens", {2, 3}, dtype::int32}, random_bytes(24, 4));
  c.add_tensor({"dropout/mask", {5}, dtype::uint8}, random_bytes(5, 5));
  c.add_tensor({"optimizer/exp_avg/model/w", {3, 4}, dtype::float32}, random_bytes(48, 6));
  c.add_value("optimizer/state", std::array<double, 3>{1.5, -2.0, 1e-8});
  c.add_tensor({"scalar", {}, dtype::float32}, random_bytes(4, 7));  // 0-d: one element
  c.add_tensor({"empty", {4, 0, 2}, dtype::bfloat16}, {});           // no element
  c.add_tensor({"names/\"quoted\"\\back\n\x01/\xc3\xa9\xf0\x9f\x98\x80", {1}, dtype::uint8}, {9});
  return c;
}

class checkpoint_safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    char const* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string{tmp != nullptr && *tmp != '\0' ? tmp : "/tmp"} +
                          "/graphstep-safetensors-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  [[nodiscard]] std::string file(std::string const& name) const { return dir_ + "/" + name; }

  // What loading a file of `header` and `data` throws.
  std::string load_error(std::string const& header, bytes const& data = {}) {
    std::string const path = file("bad.safetensors");
    write_file(path, safetensors_file(header, data));
    return message_of<graphstep::error>([&] { (void)gt::checkpoint::load_safetensors(path); });
  }

  std::string dir_;
};

}  // namespace

TEST_F(checkpoint_safetensors, round_trip_restores_the_checkpoint_bit_for_bit) {
  gt::checkpoint const c = mixed_checkpoint();
  std::string const path = file("run.safetensors");
  c.save_safetensors(path);
  gt::checkpoint const loaded = gt::checkpoint::load_safetensors(path);
  expect_same(c, loaded);
  EXPECT_EQ(loaded.value<std::int64_t>("step"), -42);
  EXPECT_EQ(loaded.tensor({"empty", {4, 0, 2}, dtype::bfloat16}).bytes.size(), 0U);
  EXPECT_EQ(loaded.tensor({"scalar", {}, dtype::float32}).bytes.size(), 4U);

  // Restored exactly: the native format of both is the same, byte for byte, and so is the
  // safetensors file the loaded one writes.
  c.save(file("a.ckpt"));
  loaded.save(file("b.ckpt"));
  EXPECT_EQ(read_file(file("a.ckpt")), read_file(file("b.ckpt")));
  loaded.save_safetensors(file("again.safetensors"));
  EXPECT_EQ(read_file(file("again.safetensors")), read_file(path));
}

TEST_F(checkpoint_safetensors, an_empty_checkpoint_round_trips) {
  std::string const path = file("empty.safetensors");
  gt::checkpoint{}.save_safetensors(path);
  bytes const content = read_file(path);
  std::string const header{content.begin() + 8, content.end()};
  EXPECT_EQ(header, "{\"__metadata__\":{\"graphstep.checkpoint\":\"1\"}}   ");  // 48 bytes
  EXPECT_TRUE(gt::checkpoint::load_safetensors(path).entries().empty());
}

// The bytes of a small checkpoint, as docs/checkpoint_format.md shows them.
TEST_F(checkpoint_safetensors, file_bytes_follow_the_mapping_spec) {
  gt::checkpoint c;
  c.add_value("step", std::int64_t{7});
  c.add_tensor({"w", {2}, dtype::float16}, {0x00, 0x3c, 0x00, 0xc0});  // 1.0, -2.0
  c.add_tensor({"b", {}, dtype::float32}, {0x00, 0x00, 0x80, 0x3f});   // 1.0
  std::string const path = file("spec.safetensors");
  c.save_safetensors(path);

  std::string const json =
      "{\"__metadata__\":{\"graphstep.checkpoint\":\"1\",\"graphstep.value:step\":\"8\"},"
      "\"step\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[8,16]},"
      "\"w\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}";
  std::string const padded = json + std::string((8 - json.size() % 8) % 8, ' ');
  bytes const data = {0x00, 0x00, 0x80, 0x3f,                           // b, 4-byte elements
                      0x00, 0x3c, 0x00, 0xc0,                           // w, 2-byte elements
                      0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};  // step, bytes
  EXPECT_EQ(read_file(path), safetensors_file(padded, data));
}

TEST_F(checkpoint_safetensors, every_tensor_is_aligned_to_its_element_in_the_file) {
  gt::checkpoint c;
  c.add_tensor({"odd_bytes", {3}, dtype::uint8}, random_bytes(3, 1));
  c.add_tensor({"half", {3}, dtype::bfloat16}, random_bytes(6, 2));
  c.add_value("flag", std::uint8_t{1});
  c.add_tensor({"float", {5}, dtype::float32}, random_bytes(20, 3));
  c.add_tensor({"int", {1}, dtype::int32}, random_bytes(4, 4));
  std::string const path = file("aligned.safetensors");
  c.save_safetensors(path);
  bytes const content = read_file(path);
  std::uint64_t const n = header_length(content);
  EXPECT_EQ(n % 8, 0U);
  // Each entry's bytes are found at an offset of the file that is a multiple of its element.
  for (gt::checkpoint_entry const& entry : c.entries()) {
    auto const at = std::search(content.begin() + static_cast<std::ptrdiff_t>(8 + n), content.end(),
                                entry.bytes.begin(), entry.bytes.end());
    ASSERT_NE(at, content.end()) << entry.spec.name();
    std::size_t const element =
        entry.kind == gt::checkpoint_kind::tensor ? graphstep::size_in_bytes(entry.spec.type()) : 1;
    EXPECT_EQ(static_cast<std::size_t>(at - content.begin()) % element, 0U) << entry.spec.name();
  }
  expect_same(gt::checkpoint::load_safetensors(path), c);
}

// A file as PyTorch's writer makes it: other metadata, the data in another order than the
// header's, escapes in names, whitespace; every entry comes back a tensor, in the header's order.
TEST_F(checkpoint_safetensors, loads_the_file_of_another_writer) {
  std::string const header =
      "{ \"__metadata__\" : {\"format\": \"pt\"},\n"
      "  \"caf\\u00e9\\ud83d\\ude00\\/x\": {\"shape\": [2], \"dtype\": \"I32\", "
      "\"data_offsets\": [8, 16]},\n"
      "  \"a\": {\"dtype\": \"BF16\", \"shape\": [2, 2], \"data_offsets\": [0, 8]},\n"
      "  \"z\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [16, 16]}\n}   ";
  bytes const data = {1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0};
  std::string const path = file("torch.safetensors");
  write_file(path, safetensors_file(header, data));
  gt::checkpoint const c = gt::checkpoint::load_safetensors(path);
  ASSERT_EQ(c.entries().size(), 3U);
  std::string const name = "caf\xc3\xa9\xf0\x9f\x98\x80/x";
  EXPECT_EQ(c.entries()[0].spec.name(), name);
  EXPECT_EQ(c.entries()[1].spec.name(), "a");
  EXPECT_EQ(c.entries()[2].spec.name(), "z");
  EXPECT_EQ(c.tensor({name, {2}, dtype::int32}).bytes, (bytes{0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0}));
  EXPECT_EQ(c.tensor({"a", {2, 2}, dtype::bfloat16}).bytes, (bytes{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(c.tensor({"z", {0}, dtype::uint8}).bytes.empty());
  EXPECT_FALSE(c.contains("__metadata__"));
}

// --- what a file can get wrong ------------------------------------------------------------

TEST_F(checkpoint_safetensors, an_unknown_dtype_is_refused_by_name) {
  std::string m = load_error(R"({"w":{"dtype":"X","shape":[1],"data_offsets":[0,1]}})", {0});
  EXPECT_TRUE(contains(m, "tensor \"w\" has the dtype \"X\", which is no safetensors dtype")) << m;
  for (std::string const other : {"F8_E4M3", "F64", "I64", "BOOL"}) {
    std::string const header =
        R"({"w":{"dtype":")" + other + R"(","shape":[1],"data_offsets":[0,1]}})";
    m = load_error(header, {0});
    EXPECT_TRUE(contains(m, "tensor \"w\" is " + other + ", which graphstep has no dtype for"))
        << m;
    EXPECT_TRUE(contains(m, "F32, F16, BF16, I32 and U8: convert the tensor")) << m;
  }
  // The dtype names are case-sensitive, as in the format.
  m = load_error(R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", {0, 0, 0, 0});
  EXPECT_TRUE(contains(m, "no safetensors dtype")) << m;
}

TEST_F(checkpoint_safetensors, a_shape_that_does_not_match_the_data_offsets_is_refused) {
  std::string const m =
      load_error(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", bytes(20));
  EXPECT_TRUE(contains(m,
                       "tensor \"w\" is F32 [2, 3], 24 bytes, but its data_offsets [0, 20] "
                       "hold 20: the shape does not match the data offsets"))
      << m;
  std::string const overflow =
      load_error(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})");
  EXPECT_TRUE(contains(overflow, "whose size does not fit 64 bits")) << overflow;
  std::string const huge =
      load_error(R"({"w":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,0]}})");
  EXPECT_TRUE(contains(huge, "whose size does not fit 64 bits")) << huge;
}

TEST_F(checkpoint_safetensors, a_shape_other_than_the_one_expected_on_load_is_refused) {
  gt::checkpoint c;
  c.add_tensor({"model/w", {2, 3}, dtype::float32}, random_bytes(24, 1));
  std::string const path = file("run.safetensors");
  c.save_safetensors(path);
  gt::checkpoint const loaded = gt::checkpoint::load_safetensors(path);
  std::string const m = message_of([&] {
    (void)loaded.tensor({"model/w", {3, 2}, dtype::float32});
  });
  EXPECT_TRUE(contains(m,
                       "tensor \"model/w\" is float32 [2, 3] in the checkpoint, but "
                       "float32 [3, 2] is expected (the shape differs)"))
      << m;
  std::string const type = message_of([&] {
    (void)loaded.tensor({"model/w", {2, 3}, dtype::bfloat16});
  });
  EXPECT_TRUE(contains(type, "the dtype differs")) << type;
}

TEST_F(checkpoint_safetensors, overlapping_offsets_are_refused) {
  std::string const m = load_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                   R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                   bytes(8));
  EXPECT_TRUE(contains(m,
                       "tensor \"b\" has data_offsets [4, 8], which overlap those of tensor "
                       "\"a\" [0, 8]"))
      << m;
  // Two tensors on the same bytes, as a polyglot file would have them.
  std::string const same = load_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                      R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                                      bytes(4));
  EXPECT_TRUE(contains(same, "which overlap those of tensor")) << same;
}

TEST_F(checkpoint_safetensors, offsets_past_the_data_or_with_gaps_are_refused) {
  std::string m = load_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", bytes(4));
  EXPECT_TRUE(contains(m,
                       "is truncated (or its header is corrupt): tensor \"a\" has "
                       "data_offsets [0, 8], past the end of the 4 bytes of data"))
      << m;
  m = load_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", bytes(8));
  EXPECT_TRUE(contains(m, "the bytes [0, 4) of the data belong to no tensor")) << m;
  m = load_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", bytes(6));
  EXPECT_TRUE(contains(m, "its last 2 bytes (of 6 after the header) belong to no tensor")) << m;
  m = load_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", bytes(8));
  EXPECT_TRUE(contains(m, "has data_offsets [8, 4], which end before they begin")) << m;
  m = load_error(
      R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}})");
  EXPECT_TRUE(contains(m, "past the end of the 0 bytes of data")) << m;
}

TEST_F(checkpoint_safetensors, a_header_length_past_the_end_of_the_file_is_refused) {
  bytes content = safetensors_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", {1});
  content[0] = static_cast<unsigned char>(content[0] + 2);  // 2 bytes past the end
  std::string const path = file("long.safetensors");
  write_file(path, content);
  std::string m =
      message_of<graphstep::error>([&] { (void)gt::checkpoint::load_safetensors(path); });
  EXPECT_TRUE(contains(m,
                       "is truncated or no safetensors file: its first 8 bytes give a header "
                       "of 55 bytes, past the end of the file (62 bytes in all)"))
      << m;

  // A graphstep checkpoint in its own format is no safetensors file: its magic reads as a
  // length far past its end.
  gt::checkpoint c;
  c.add_value("step", std::int64_t{1});
  c.save(file("native.ckpt"));
  m = message_of<graphstep::error>(
      [&] { (void)gt::checkpoint::load_safetensors(file("native.ckpt")); });
  EXPECT_TRUE(contains(m, "is truncated or no safetensors file")) << m;
}

TEST_F(checkpoint_safetensors, a_header_over_the_formats_limit_is_refused_before_it_is_read) {
  // A sparse file: 100 MB of header would be allocated by a reader that trusted it.
  std::string const path = file("huge.safetensors");
  bytes head(8);
  std::uint64_t const n = 100'000'008;
  for (int i = 0; i < 8; ++i) head[i] = static_cast<unsigned char>(n >> (8 * i));
  write_file(path, head);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(8 + n)), 0);
  std::string const m =
      message_of<graphstep::error>([&] { (void)gt::checkpoint::load_safetensors(path); });
  EXPECT_TRUE(contains(m,
                       "its header has 100000008 bytes, more than the format's limit of "
                       "100000000"))
      << m;
}

TEST_F(checkpoint_safetensors, a_truncated_file_is_refused_wherever_it_ends) {
  std::string const whole_path = file("whole.safetensors");
  mixed_checkpoint().save_safetensors(whole_path);
  bytes const whole = read_file(whole_path);
  std::string const path = file("cut.safetensors");
  for (std::size_t size = 0; size < whole.size(); ++size) {
    write_file(path, bytes(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(size)));
    std::string const m =
        message_of<graphstep::error>([&] { (void)gt::checkpoint::load_safetensors(path); });
    EXPECT_TRUE(contains(m, "truncated")) << "cut to " << size << " bytes: " << m;
  }
}

TEST_F(checkpoint_safetensors, malformed_json_is_refused_saying_where) {
  std::string const tensor = R"("dtype":"U8","shape":[1],"data_offsets":[0,1])";
  struct bad {
    std::string header;
    std::string says;
  };
  std::vector<bad> const cases = {
      {"", "the header must begin with '{'"},
      {" {}", "the header must begin with '{'"},
      {"[]", "the header must begin with '{'"},
      {"{", "expected a key (a string), found the end of the header"},
      {R"({"a":{)" + tensor + "}", "expected ',' or '}' after a value, found the end"},
      {R"({"a":{)" + tensor + "},}", "expected a key (a string), found '}'"},
      {R"({"a" {)" + tensor + "}}", "expected ':' after a key, found '{'"},
      {R"({a:1})", "expected a key (a string), found 'a'"},
      {R"({"a":{)" + tensor + "}} x", "only spaces may pad the header"},
      {R"({"a":{)" + tensor + "}}{}", "but '{' follows it"},
      {R"({"a":1})", "the value of \"a\" is not an object"},
      {R"({"a":{"dtype":"U8","shape":[1]}})", "tensor \"a\" has no \"data_offsets\""},
      {R"({"a":{"dtype":"U8","data_offsets":[0,1]}})", "tensor \"a\" has no \"shape\""},
      {R"({"a":{"shape":[1],"data_offsets":[0,1]}})", "tensor \"a\" has no \"dtype\""},
      {R"({"a":{)" + tensor + R"(,"strides":[1]}})",
       "tensor \"a\" has the unknown key \"strides\""},
      {R"({"a":{"dtype":7,"shape":[1],"data_offsets":[0,1]}})",
       "dtype of tensor \"a\" is not a string"},
      {R"({"a":{"dtype":"U8","shape":1,"data_offsets":[0,1]}})",
       "the shape of tensor \"a\" is not an array"},
      {R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", "holds a negative number"},
      {R"({"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}})",
       "holds a number that is not an integer"},
      {R"({"a":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}})",
       "holds a number that is not an integer"},
      {R"({"a":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}})",
       "holds a number with a leading zero"},
      {R"({"a":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]}})",
       "larger than 2^64 - 1"},
      {R"({"a":{"dtype":"U8","shape":[1,],"data_offsets":[0,1]}})",
       "expected an integer in the shape"},
      {R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", "has 3 data_offsets"},
      {R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[1]}})", "has 1 data_offsets"},
      {R"({"a":{"dtype":"U8","shape":[1],"data_offsets":"0,1"}})",
       "data_offsets of tensor \"a\" is not an array"},
      {R"({"__metadata__":{"k":1},"a":{)" + tensor + "}}",
       "the value of \"k\" in \"__metadata__\" is not a string"},
      {R"({"__metadata__":[],"a":{)" + tensor + "}}", "expected '{', found '['"},
      {R"({"a\q":{)" + tensor + "}}", "the unknown escape \\q"},
      {R"({"a\u12":{)" + tensor + "}}", "four hexadecimal digits after \\u"},
      {R"({"a\udc00":{)" + tensor + "}}", "a lone low surrogate \\uDC00"},
      {R"({"a\ud800x":{)" + tensor + "}}", "a high surrogate \\uD800 without its low half"},
      {R"({"a\ud800\u0041":{)" + tensor + "}}", "followed by \\u0041, which is no low surrogate"},
      {"{\"a\tb\":{" + tensor + "}}", "a string holds a control character unescaped"},
      {R"({"a":{)" + tensor + "}, \"b", "expected the '\"' that ends a string"},
      {"{\"\xff\":{" + tensor + "}}", "the header is not UTF-8"},
      {"{\"\xc0\xaf\":{" + tensor + "}}", "the header is not UTF-8"},      // overlong '/'
      {"{\"\xed\xa0\x80\":{" + tensor + "}}", "the header is not UTF-8"},  // a surrogate
  };
  for (bad const& c : cases) {
    std::string const m = load_error(c.header, {0});
    EXPECT_TRUE(contains(m, c.says)) << c.header << "\n  says: " << m;
    if (c.says.find("UTF-8") == std::string::npos && !c.header.empty()) {
      EXPECT_TRUE(contains(m, "the JSON header is malformed")) << c.header << "\n  says: " << m;
      EXPECT_TRUE(contains(m, "(byte ")) << m;
    }
  }
}

TEST_F(checkpoint_safetensors, duplicate_names_are_refused) {
  std::string const t = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  std::string m = load_error(R"({"w":)" + t + R"(,"w":)" + t + "}", {0});
  EXPECT_TRUE(contains(m, "the key \"w\" appears twice in the header")) << m;
  m = load_error(R"({"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", {0});
  EXPECT_TRUE(contains(m, "tensor \"w\" has the key \"dtype\" twice")) << m;
  m = load_error(R"({"__metadata__":{"k":"1","k":"2"},"w":)" + t + "}", {0});
  EXPECT_TRUE(contains(m, "the key \"k\" appears twice in \"__metadata__\"")) << m;
  m = load_error(R"({"__metadata__":{},"__metadata__":{},"w":)" + t + "}", {0});
  EXPECT_TRUE(contains(m, "the key \"__metadata__\" appears twice")) << m;
  // The same name, once escaped: equal once decoded.
  m = load_error(R"({"w":)" + t + R"(,"\u0077":)" + t + "}", {0});
  EXPECT_TRUE(contains(m, "the key \"w\" appears twice in the header")) << m;
  m = load_error(R"({"":)" + t + "}", {0});
  EXPECT_TRUE(contains(m, "a tensor has an empty name")) << m;
}

TEST_F(checkpoint_safetensors, graphsteps_metadata_is_checked) {
  std::string const t = R"({"dtype":"U8","shape":[8],"data_offsets":[0,8]})";
  std::string const f = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  auto const with = [](std::string const& metadata, std::string const& tensor) {
    return R"({"__metadata__":{)" + metadata + R"(},"step":)" + tensor + "}";
  };
  std::string m = load_error(with(R"("graphstep.checkpoint":"2")", t), bytes(8));
  EXPECT_TRUE(contains(m,
                       "was written by a newer graphstep (its \"graphstep.checkpoint\" is "
                       "\"2\"); this one reads version 1"))
      << m;
  m = load_error(with(R"("graphstep.checkpoint":"one")", t), bytes(8));
  EXPECT_TRUE(contains(m, "which is no version of graphstep's mapping")) << m;
  m = load_error(with(R"("graphstep.shards":"2")", t), bytes(8));
  EXPECT_TRUE(contains(m,
                       "the metadata holds the key \"graphstep.shards\", which this graphstep "
                       "does not know"))
      << m;
  m = load_error(with(R"("graphstep.value:step":"8","graphstep.value:loss":"4")", t), bytes(8));
  EXPECT_TRUE(contains(m,
                       "\"graphstep.value:loss\" marks a value, but no tensor is named "
                       "\"loss\""))
      << m;
  m = load_error(with(R"("graphstep.value:step":"8")", f), bytes(8));
  EXPECT_TRUE(contains(m, "marks a value of 8 bytes, but the tensor is F32 [2], not U8 [8]")) << m;
  m = load_error(with(R"("graphstep.value:step":"4")", t), bytes(8));
  EXPECT_TRUE(contains(m, "marks a value of 4 bytes, but the tensor is U8 [8], not U8 [4]")) << m;
  m = load_error(with(R"("graphstep.value:step":"-8")", t), bytes(8));
  EXPECT_TRUE(contains(m, "is \"-8\", which is no byte count")) << m;

  // A marked value loads as a value; other writers' metadata is not graphstep's.
  std::string const path = file("value.safetensors");
  bytes data(8);
  data[0] = 5;
  write_file(path, safetensors_file(with(R"("graphstep.value:step":"8","format":"pt")", t), data));
  gt::checkpoint const c = gt::checkpoint::load_safetensors(path);
  EXPECT_EQ(c.value<std::int64_t>("step"), 5);
  EXPECT_EQ(c.entries()[0].kind, gt::checkpoint_kind::value);
}

TEST_F(checkpoint_safetensors, save_refuses_names_safetensors_cannot_hold) {
  gt::checkpoint metadata;
  metadata.add_value("__metadata__", 1);
  std::string m = message_of([&] { metadata.save_safetensors(file("a.safetensors")); });
  EXPECT_TRUE(contains(m, "an entry is named \"__metadata__\", the key safetensors keeps")) << m;
  gt::checkpoint latin1;
  latin1.add_tensor({"caf\xe9", {1}, dtype::uint8}, {1});
  m = message_of([&] { latin1.save_safetensors(file("b.safetensors")); });
  EXPECT_TRUE(contains(m, "is not UTF-8, which a safetensors header (JSON) must be")) << m;
  EXPECT_FALSE(std::filesystem::exists(file("a.safetensors")));
  EXPECT_FALSE(std::filesystem::exists(file("b.safetensors")));
}

TEST_F(checkpoint_safetensors, missing_files_and_paths_are_the_callers_error) {
  std::string m =
      message_of([&] { (void)gt::checkpoint::load_safetensors(file("absent.safetensors")); });
  EXPECT_TRUE(contains(m, "checkpoint::load_safetensors: cannot open")) << m;
  EXPECT_TRUE(contains(m, "no checkpoint is there: check the path")) << m;
  m = message_of([&] { (void)gt::checkpoint::load_safetensors(dir_); });
  EXPECT_TRUE(contains(m, "is not a regular file")) << m;
  m = message_of([&] { gt::checkpoint{}.save_safetensors(file("no/such/dir/x.safetensors")); });
  EXPECT_TRUE(contains(m, "checkpoint::save_safetensors: cannot create")) << m;
  EXPECT_TRUE(contains(m, "the directory must exist")) << m;
  m = message_of([&] { gt::checkpoint{}.save_safetensors(""); });
  EXPECT_TRUE(contains(m, "checkpoint::save_safetensors: the path is empty")) << m;
}

namespace {
void fail_after_the_header(std::uint64_t written) {
  if (written > 8) throw std::runtime_error{"disk unplugged"};
}
}  // namespace

TEST_F(checkpoint_safetensors, a_failed_save_keeps_the_earlier_file) {
  std::string const path = file("run.safetensors");
  gt::checkpoint const before = mixed_checkpoint();
  before.save_safetensors(path);
  gt::checkpoint bigger;
  bigger.add_tensor({"w", {1 << 19}, dtype::float32}, random_bytes(std::size_t{1} << 21, 9));
  auto const previous = gt::detail::set_checkpoint_write_hook(&fail_after_the_header);
  EXPECT_THROW(bigger.save_safetensors(path), std::runtime_error);
  gt::detail::set_checkpoint_write_hook(previous);
  std::vector<std::string> names;
  for (auto const& entry : std::filesystem::directory_iterator{dir_}) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{"run.safetensors"});  // no temporary left
  expect_same(gt::checkpoint::load_safetensors(path), before);
}
