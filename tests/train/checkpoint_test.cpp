// Checkpoints (train/checkpoint.hpp): the round trip, the bytes of the format, what adding and
// reading refuse, what loading a damaged file says, that a save interrupted at any point
// leaves the checkpoint before it in place, and that the next save removes the temporary such a
// save left and nothing else. Each test writes into a directory of its own.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
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

// A struct of scalars, as a trainer keeps its loop state; no padding.
struct loop_state {
  std::int64_t step;
  double loss_scale;
  float learning_rate;
  std::uint32_t epoch;
};

void put_u32(bytes& file, std::size_t at, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) file[at + i] = static_cast<unsigned char>(value >> (8 * i));
}

void put_u64(bytes& file, std::size_t at, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) file[at + i] = static_cast<unsigned char>(value >> (8 * i));
}

// Rewrites the trailing CRC-32C after a field was changed, so that loading gets past the
// checksum to the field.
void fix_checksum(bytes& file) {
  put_u32(file, file.size() - 4, gt::detail::crc32c(0, file.data(), file.size() - 4));
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

// Every file of `directory`, by name.
std::vector<std::string> files_in(std::string const& directory) {
  std::vector<std::string> names;
  for (auto const& file : std::filesystem::directory_iterator{directory}) {
    names.push_back(file.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A small checkpoint of every kind of entry.
gt::checkpoint small_checkpoint() {
  gt::checkpoint c;
  c.add_value("step", std::int64_t{1234});
  c.add_tensor({"w", {2, 3}, dtype::float32}, random_bytes(24, 1));
  c.add_tensor({"b", {3}, dtype::bfloat16}, random_bytes(6, 2));
  return c;
}

class checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    char const* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string{tmp != nullptr && *tmp != '\0' ? tmp : "/tmp"} + "/graphstep-checkpoint-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    std::error_code ignored;
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ignored);
    std::filesystem::remove_all(dir_, ignored);
  }
  [[nodiscard]] std::string file(std::string const& name) const { return dir_ + "/" + name; }

  // Saves `c`, applies `damage` to the file's bytes, and returns what loading it throws.
  template <class Damage>
  std::string load_damaged(gt::checkpoint const& c, Damage&& damage) {
    std::string const path = file("damaged.ckpt");
    c.save(path);
    bytes content = read_file(path);
    damage(content);
    write_file(path, content);
    return message_of<graphstep::error>([&] { (void)gt::checkpoint::load(path); });
  }

  std::string dir_;
};

}  // namespace

TEST(checkpoint_crc32c, matches_the_known_test_vector) {
  // The check value of CRC-32C (RFC 3720 §B.4; the "check" of the CRC catalogue).
  EXPECT_EQ(gt::detail::crc32c(0, "123456789", 9), 0xE3069283U);
  EXPECT_EQ(gt::detail::crc32c(0, nullptr, 0), 0U);
  // RFC 3720 §B.4: 32 bytes of zeros, 32 of 0xFF.
  bytes const zeros(32, 0x00);
  bytes const ones(32, 0xFF);
  EXPECT_EQ(gt::detail::crc32c(0, zeros.data(), zeros.size()), 0x8A9136AAU);
  EXPECT_EQ(gt::detail::crc32c(0, ones.data(), ones.size()), 0x62A8AB43U);
}

TEST(checkpoint_crc32c, continues_across_pieces_of_any_alignment) {
  bytes const data = random_bytes(1000, 7);
  std::uint32_t const whole = gt::detail::crc32c(0, data.data(), data.size());
  for (std::size_t split : {0, 1, 3, 7, 8, 9, 500, 999, 1000}) {
    std::uint32_t const first = gt::detail::crc32c(0, data.data(), split);
    EXPECT_EQ(gt::detail::crc32c(first, data.data() + split, data.size() - split), whole)
        << "split at " << split;
  }
  // Byte at a time, the slicing-by-8 loop never runs: the same result.
  std::uint32_t bytewise = 0;
  for (unsigned char byte : data) bytewise = gt::detail::crc32c(bytewise, &byte, 1);
  EXPECT_EQ(bytewise, whole);
}

TEST_F(checkpoint, round_trip_keeps_every_entry_bit_for_bit) {
  gt::checkpoint c;
  c.add_tensor({"model/w", {3, 4}, dtype::float32}, random_bytes(48, 1));
  c.add_tensor({"model/w16", {5, 1, 2}, dtype::float16}, random_bytes(20, 2));
  c.add_tensor({"model/wbf16", {7}, dtype::bfloat16}, random_bytes(14, 3));
  c.add_tensor({"data/tokens", {2, 3}, dtype::int32}, random_bytes(24, 6));
  c.add_tensor({"dropout/mask", {5}, dtype::uint8}, random_bytes(5, 7));
  c.add_tensor({"scalar", {}, dtype::float32}, random_bytes(4, 4));  // 0-d: one element
  c.add_tensor({"empty", {4, 0, 2}, dtype::bfloat16}, {});           // no element
  c.add_tensor({"large", {1 << 19}, dtype::float32}, random_bytes(std::size_t{1} << 21, 5));
  c.add_value("step", std::int64_t{-42});
  loop_state state{};
  state.step = 1000;
  state.loss_scale = 65536.0;
  state.learning_rate = 3e-4F;
  state.epoch = 3;
  c.add_value("loop", state);
  // NaN payloads and signed zeros survive: the bytes are copied, never converted.
  float const odd[3] = {-0.0F, std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::denorm_min()};
  bytes odd_bytes(sizeof odd);
  std::memcpy(odd_bytes.data(), odd, sizeof odd);
  odd_bytes[5] = 0x01;  // a NaN with a payload bit set
  c.add_tensor({"odd", {3}, dtype::float32}, odd_bytes);

  std::string const path = file("run.ckpt");
  c.save(path);
  gt::checkpoint const loaded = gt::checkpoint::load(path);
  expect_same(c, loaded);
  EXPECT_EQ(loaded.entries()[0].spec.name(), "model/w");
  EXPECT_EQ(loaded.entries().back().spec.name(), "odd");

  EXPECT_EQ(loaded.value<std::int64_t>("step"), -42);
  auto const back = loaded.value<loop_state>("loop");
  EXPECT_EQ(std::memcmp(&back, &state, sizeof state), 0);
  EXPECT_EQ(loaded.tensor({"odd", {3}, dtype::float32}).bytes, odd_bytes);
  EXPECT_EQ(loaded.tensor({"scalar", {}, dtype::float32}).bytes.size(), 4U);
  EXPECT_TRUE(loaded.tensor({"empty", {4, 0, 2}, dtype::bfloat16}).bytes.empty());
  EXPECT_EQ(loaded.tensor({"data/tokens", {2, 3}, dtype::int32}).bytes.size(), 24U);
  EXPECT_EQ(loaded.tensor({"dropout/mask", {5}, dtype::uint8}).bytes.size(), 5U);
  EXPECT_TRUE(loaded.contains("model/w16"));
  EXPECT_FALSE(loaded.contains("model"));
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"run.ckpt"});  // no temporary left

  // The same checkpoint saves to the same bytes.
  std::string const again = file("again.ckpt");
  loaded.save(again);
  EXPECT_EQ(read_file(again), read_file(path));
}

TEST_F(checkpoint, an_empty_checkpoint_round_trips) {
  std::string const path = file("empty.ckpt");
  gt::checkpoint{}.save(path);
  EXPECT_EQ(read_file(path).size(), 36U);  // header and checksum
  EXPECT_TRUE(gt::checkpoint::load(path).entries().empty());
}

// The bytes of a small checkpoint, field by field, as docs/checkpoint_format.md shows them.
TEST_F(checkpoint, file_bytes_follow_the_format_spec) {
  gt::checkpoint c;
  c.add_value("step", std::int64_t{7});
  c.add_tensor({"w", {2}, dtype::float16}, {0x00, 0x3c, 0x00, 0xc0});  // 1.0, -2.0
  std::string const path = file("spec.ckpt");
  c.save(path);

  bytes expected = {
      0x89, 'G', 'S', 'C', 'K', 'P', 'T', '\n',  // magic
      1, 0, 0, 0,                                // version
      0, 0, 0, 0,                                // flags
      2, 0, 0, 0, 0, 0, 0, 0,                    // entry count
      65, 0, 0, 0, 0, 0, 0, 0,                   // payload bytes (28 + 37)
      // entry 0: value "step", 8 bytes
      1, 0, 0, 0, 4, 0, 0, 0, 's', 't', 'e', 'p', 8, 0, 0, 0, 0, 0, 0, 0,  //
      7, 0, 0, 0, 0, 0, 0, 0,
      // entry 1: tensor "w", float16 (1), rank 1, [2], 4 bytes
      0, 0, 0, 0, 1, 0, 0, 0, 'w', 1, 0, 0, 0, 1, 0, 0, 0,  //
      2, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0,       //
      0x00, 0x3c, 0x00, 0xc0,                               // the data
      0, 0, 0, 0,                                           // CRC-32C, filled in below
  };
  fix_checksum(expected);
  EXPECT_EQ(read_file(path), expected);
}

TEST_F(checkpoint, add_tensor_refuses_what_cannot_be_stored) {
  gt::checkpoint c;
  c.add_tensor({"w", {2}, dtype::float32}, bytes(8));

  std::string m = message_of([&] { c.add_tensor({"", {1}, dtype::float32}, bytes(4)); });
  EXPECT_TRUE(contains(m, "needs a name")) << m;
  m = message_of([&] { c.add_tensor({"w", {2}, dtype::float32}, bytes(8)); });
  EXPECT_TRUE(contains(m, "\"w\" is already present")) << m;
  m = message_of([&] { c.add_value("w", 1); });
  EXPECT_TRUE(contains(m, "\"w\" is already present")) << m;
  m = message_of([&] { c.add_tensor({"n", {2, -3}, dtype::float32}, bytes(0)); });
  // What no tensor_spec can be is refused where the spec is made, before the checkpoint.
  EXPECT_TRUE(contains(m, "[2, -3] float32 has a negative extent")) << m;
  m = message_of([&] { c.add_tensor({"s", {3, 4}, dtype::float16}, bytes(23)); });
  EXPECT_TRUE(contains(m, "tensor \"s\" is float16 [3, 4], which is 24 bytes, but 23 bytes")) << m;
  m = message_of([&] { c.add_tensor({"d", {1}, static_cast<dtype>(7)}, bytes(4)); });
  EXPECT_TRUE(contains(m, "'d' has an unknown dtype (7)")) << m;
  m = message_of([&] {
    c.add_tensor({"o", {std::int64_t{1} << 40, std::int64_t{1} << 40}, dtype::float32}, {});
  });
  EXPECT_TRUE(contains(m, "has too many elements")) << m;
  m = message_of([&] { c.add_value("", 1.0); });
  EXPECT_TRUE(contains(m, "needs a name")) << m;

  // Nothing refused was added.
  ASSERT_EQ(c.entries().size(), 1U);
  EXPECT_EQ(c.entries()[0].spec.name(), "w");
}

TEST_F(checkpoint, tensor_of_another_dtype_names_both_layouts) {
  gt::checkpoint const c = small_checkpoint();
  std::string const m = message_of([&] { (void)c.tensor({"w", {2, 3}, dtype::float16}); });
  EXPECT_TRUE(contains(m,
                       "tensor \"w\" is float32 [2, 3] in the checkpoint, but float16 [2, 3] "
                       "is expected (the dtype differs)"))
      << m;
  EXPECT_TRUE(contains(m, "written by another model layout or configuration")) << m;
}

TEST_F(checkpoint, tensor_of_another_shape_names_both_layouts) {
  gt::checkpoint const c = small_checkpoint();
  std::string m = message_of([&] { (void)c.tensor({"w", {3, 2}, dtype::float32}); });
  EXPECT_TRUE(contains(m,
                       "tensor \"w\" is float32 [2, 3] in the checkpoint, but float32 [3, 2] "
                       "is expected (the shape differs)"))
      << m;
  EXPECT_TRUE(contains(m, "another model layout or configuration")) << m;
  m = message_of([&] { (void)c.tensor({"b", {}, dtype::float32}); });
  EXPECT_TRUE(contains(m,
                       "is bfloat16 [3] in the checkpoint, but float32 [] is expected (dtype "
                       "and shape differ)"))
      << m;
  EXPECT_NO_THROW((void)c.tensor({"b", {3}, dtype::bfloat16}));
}

TEST_F(checkpoint, missing_tensor_lists_the_closest_names_present) {
  gt::checkpoint c;
  for (int i = 0; i < 8; ++i) {
    c.add_tensor({"other/" + std::to_string(i), {1}, dtype::float32}, bytes(4));
  }
  for (int i = 0; i < 3; ++i) {
    c.add_tensor({"layer/" + std::to_string(i) + "/w", {1}, dtype::float32}, bytes(4));
  }
  std::string const m = message_of([&] { (void)c.tensor({"layer/3/w", {4}, dtype::float32}); });
  EXPECT_TRUE(contains(m, "no tensor \"layer/3/w\" (expected float32 [4])")) << m;
  EXPECT_TRUE(contains(m, "holds 11 entries")) << m;
  EXPECT_TRUE(contains(m, "\"layer/0/w\", \"layer/1/w\", \"layer/2/w\"")) << m;
  EXPECT_TRUE(contains(m, "another model layout or configuration")) << m;

  std::string const none = message_of([&] {
    (void)gt::checkpoint{}.tensor({"w", {1}, dtype::float32});
  });
  EXPECT_TRUE(contains(none, "holds no entries")) << none;
}

TEST_F(checkpoint, a_value_is_not_a_tensor_nor_a_tensor_a_value) {
  gt::checkpoint const c = small_checkpoint();
  std::string m = message_of([&] { (void)c.tensor({"step", {2}, dtype::float32}); });
  EXPECT_TRUE(contains(m, "\"step\" is a value of 8 bytes, not a tensor (expected float32 [2])"))
      << m;
  m = message_of([&] { (void)c.value<std::int64_t>("w"); });
  EXPECT_TRUE(contains(m, "\"w\" is a tensor float32 [2, 3], not a value")) << m;
}

TEST_F(checkpoint, value_of_another_size_is_refused) {
  gt::checkpoint const c = small_checkpoint();
  std::string m = message_of([&] { (void)c.value<std::int32_t>("step"); });
  EXPECT_TRUE(contains(m, "value \"step\" holds 8 bytes, but is read as a type of 4 bytes")) << m;
  m = message_of([&] { (void)c.value<std::int64_t>("steps"); });
  EXPECT_TRUE(contains(m, "no value \"steps\"")) << m;
  EXPECT_TRUE(contains(m, "\"step\"")) << m;  // the name present that it resembles
  EXPECT_EQ(c.value<std::int64_t>("step"), 1234);
}

TEST_F(checkpoint, every_flipped_byte_is_detected) {
  std::string const path = file("flip.ckpt");
  small_checkpoint().save(path);
  bytes const good = read_file(path);
  for (std::size_t at = 0; at < good.size(); ++at) {
    bytes damaged = good;
    damaged[at] ^= 0x10;
    write_file(path, damaged);
    std::string const m = message_of<graphstep::error>([&] { (void)gt::checkpoint::load(path); });
    if (at < 8) {
      EXPECT_TRUE(contains(m, "is not a graphstep checkpoint")) << "byte " << at << ": " << m;
    } else if (at >= 24 && at < 32) {  // the payload size: the file seems cut short or too long
      EXPECT_TRUE(contains(m, "promises")) << "byte " << at << ": " << m;
    } else {  // the version, the flags and the entry count included
      EXPECT_TRUE(contains(m, "is corrupt")) << "byte " << at << ": " << m;
      EXPECT_TRUE(contains(m, "checksum mismatch")) << "byte " << at << ": " << m;
    }
  }
}

TEST_F(checkpoint, truncated_files_are_refused_at_every_length) {
  std::string const path = file("cut.ckpt");
  small_checkpoint().save(path);
  bytes const good = read_file(path);
  for (std::size_t size = 0; size < good.size(); ++size) {
    write_file(path, bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(size)));
    std::string const m = message_of<graphstep::error>([&] { (void)gt::checkpoint::load(path); });
    EXPECT_TRUE(contains(m, "is truncated")) << "cut at " << size << ": " << m;
    EXPECT_TRUE(contains(m, path)) << m;
  }
  bytes longer = good;
  longer.push_back(0);
  write_file(path, longer);
  std::string const m = message_of<graphstep::error>([&] { (void)gt::checkpoint::load(path); });
  EXPECT_TRUE(contains(m, "1 more than its header promises")) << m;
}

TEST_F(checkpoint, a_file_of_another_kind_is_not_a_checkpoint) {
  std::string const path = file("other.bin");
  write_file(path, {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                    0,    0,   0,   0,   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  std::string const m = message_of<graphstep::error>([&] { (void)gt::checkpoint::load(path); });
  EXPECT_TRUE(contains(m, path + " is not a graphstep checkpoint: it starts with 7f 45 4c 46"))
      << m;
  EXPECT_TRUE(contains(m, "89 47 53 43 4b 50 54 0a")) << m;
}

TEST_F(checkpoint, a_newer_version_is_refused_saying_so) {
  std::string const m = load_damaged(small_checkpoint(), [](bytes& file) {
    put_u32(file, 8, 2);
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "format version 2 by a newer graphstep")) << m;
  EXPECT_TRUE(contains(m, "reads versions up to 1")) << m;
}

TEST_F(checkpoint, reserved_flags_and_version_0_are_refused) {
  std::string m = load_damaged(small_checkpoint(), [](bytes& file) {
    put_u32(file, 12, 1);
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "reserved flags are 0x00000001")) << m;
  m = load_damaged(small_checkpoint(), [](bytes& file) {
    put_u32(file, 8, 0);
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "format version is 0")) << m;
}

// Length fields of 2^60 or so, with the checksum made to match, so that the parser, not the
// checksum, meets them: each is refused as a graphstep::error (an attempt to allocate it would
// throw std::bad_alloc instead, or succeed lazily and fail on the read).
TEST_F(checkpoint, huge_length_fields_are_refused_without_allocating_them) {
  gt::checkpoint c;
  c.add_tensor({"w", {2}, dtype::float32}, bytes(8));
  // Entry 0 at offset 32: kind 32, name length 36, name 40, dtype 41, rank 45, dim 49, size 57.
  auto const huge = std::uint64_t{1} << 60;

  std::string m = load_damaged(c, [&](bytes& file) { put_u64(file, 24, huge); });
  EXPECT_TRUE(contains(m, "is truncated (or its header is corrupt)")) << m;
  EXPECT_TRUE(contains(m, "promises " + std::to_string(huge) + " bytes of entries")) << m;

  m = load_damaged(c, [&](bytes& file) {
    put_u64(file, 16, huge);  // entry count
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "malformed although its checksum holds")) << m;
  EXPECT_TRUE(contains(m, "entry 1: its kind and name length needs 8 bytes, but only 0")) << m;

  m = load_damaged(c, [&](bytes& file) {
    put_u32(file, 36, 0x80000000U);  // name length
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "entry 0: its name needs 2147483648 bytes")) << m;

  m = load_damaged(c, [&](bytes& file) {
    put_u32(file, 45, 0x80000000U);  // rank
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "entry 0 \"w\": its shape needs 17179869184 bytes")) << m;

  m = load_damaged(c, [&](bytes& file) {
    put_u64(file, 49, huge / 4);  // dimension: float32 [2^58], 2^60 bytes
    put_u64(file, 57, huge);      // byte count to match
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "entry 0 \"w\": its data needs " + std::to_string(huge) + " bytes")) << m;

  m = load_damaged(c, [&](bytes& file) {
    put_u64(file, 49, ~std::uint64_t{0});  // dimension -1
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "float32 [-1], which has a negative dimension")) << m;
}

TEST_F(checkpoint, malformed_entries_with_a_matching_checksum_are_named) {
  gt::checkpoint c;
  c.add_tensor({"w", {2}, dtype::float32}, bytes(8));
  std::string m = load_damaged(c, [](bytes& file) {
    put_u32(file, 32, 5);  // kind
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "entry 0 has kind 5, which is neither tensor (0) nor value (1)")) << m;
  m = load_damaged(c, [](bytes& file) {
    put_u32(file, 41, 9);  // dtype
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "entry 0 \"w\" has dtype code 9")) << m;
  m = load_damaged(c, [](bytes& file) {
    put_u64(file, 57, 4);  // byte count of a float32 [2]
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "is a tensor float32 [2] of 8 bytes, but its byte count is 4")) << m;

  gt::checkpoint two;
  two.add_value("a", std::int32_t{1});
  two.add_value("b", std::int32_t{2});
  m = load_damaged(two, [](bytes& file) {
    file[32 + 8] = 'b';  // entry 0 renamed to "b"
    fix_checksum(file);
  });
  EXPECT_TRUE(contains(m, "entry 1 \"b\" repeats the name of entry 0")) << m;
}

TEST_F(checkpoint, save_replaces_an_earlier_checkpoint) {
  std::string const path = file("run.ckpt");
  small_checkpoint().save(path);
  gt::checkpoint next;
  next.add_value("step", std::int64_t{2000});
  next.save(path);
  expect_same(gt::checkpoint::load(path), next);
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"run.ckpt"});
}

namespace {
// The write hooks of the tests below. The hook is a plain function pointer (no state, no
// allocation in the library); these tests set and clear it around one save.
constexpr std::uint64_t stop_after = std::uint64_t{3} << 20;

void kill_mid_write(std::uint64_t written) {
  if (written >= stop_after) ::raise(SIGKILL);
}

void fail_mid_write(std::uint64_t written) {
  if (written >= stop_after) throw std::runtime_error{"disk unplugged"};
}

// About 8 MiB in entries of 1.5 MiB: the save writes them one by one, so a hook at 3 MiB stops
// it with part of the file written.
gt::checkpoint big_checkpoint() {
  gt::checkpoint c;
  for (std::uint32_t i = 0; i < 5; ++i) {
    c.add_tensor({"layer/" + std::to_string(i), {3, 1 << 17}, dtype::float32},
                 random_bytes(std::size_t{3} << 19, 100 + i));
  }
  c.add_value("step", std::int64_t{99});
  return c;
}
}  // namespace

// A crash mid-save, made deterministic: the child process kills itself (SIGKILL, no cleanup, no
// destructors, as the kernel or an out-of-memory kill would) once 3 MiB of the new file are
// written, instead of the parent killing it at a moment that depends on the machine's speed.
TEST_F(checkpoint, a_crash_mid_save_leaves_the_earlier_checkpoint) {
  std::string const path = file("run.ckpt");
  gt::checkpoint const before = small_checkpoint();
  before.save(path);

  pid_t const child = ::fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    gt::detail::set_checkpoint_write_hook(&kill_mid_write);
    try {
      big_checkpoint().save(path);
    } catch (...) {
    }
    ::_exit(3);  // the hook did not stop the save
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;

  expect_same(gt::checkpoint::load(path), before);
  // The crash left its temporary, recognisably named, partly written.
  std::vector<std::string> const names = files_in(dir_);
  ASSERT_EQ(names.size(), 2U);
  EXPECT_EQ(names[0], "run.ckpt");
  EXPECT_EQ(names[1].rfind("run.ckpt.partial.", 0), 0U) << names[1];
  auto const partial = std::filesystem::file_size(file(names[1]));
  EXPECT_GE(partial, stop_after);
  EXPECT_LT(partial, std::uint64_t{8} << 20);
  // A stranded temporary is no obstacle to the next save.
  big_checkpoint().save(path);
  expect_same(gt::checkpoint::load(path), big_checkpoint());
}

namespace {
// The save of a child process that stops mid-write and waits to be killed: a save still in
// progress, as another process's would be. It tells the parent through a pipe once 3 MiB are
// written.
int paused_save_signal = -1;

void pause_mid_write(std::uint64_t written) {
  if (written < stop_after) return;
  char const ready = 1;
  static_cast<void>(::write(paused_save_signal, &ready, 1));
  for (;;) ::pause();
}

// The paused save of `c` to `path` in a child process, killed when this goes out of scope.
class paused_save {
 public:
  paused_save(gt::checkpoint const& c, std::string const& path) {
    int ends[2];
    if (::pipe(ends) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ends[0]);
      paused_save_signal = ends[1];
      gt::detail::set_checkpoint_write_hook(&pause_mid_write);
      try {
        c.save(path);
      } catch (...) {
      }
      ::_exit(3);  // the hook did not pause the save
    }
    ::close(ends[1]);
    char ready = 0;
    paused_ = pid_ > 0 && ::read(ends[0], &ready, 1) == 1;
    ::close(ends[0]);
  }
  paused_save(paused_save const&) = delete;
  paused_save& operator=(paused_save const&) = delete;
  ~paused_save() { kill(); }

  [[nodiscard]] bool paused() const noexcept { return paused_; }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_{-1};
  bool paused_{false};
};

// The names of `directory` that start with `prefix`.
std::vector<std::string> files_starting_with(std::string const& directory,
                                             std::string const& prefix) {
  std::vector<std::string> names = files_in(directory);
  names.erase(std::remove_if(names.begin(), names.end(),
                             [&](std::string const& n) { return n.rfind(prefix, 0) != 0; }),
              names.end());
  return names;
}
}  // namespace

TEST_F(checkpoint, the_next_save_removes_the_temporary_of_a_crashed_save) {
  std::string const path = file("run.ckpt");
  small_checkpoint().save(path);
  pid_t const child = ::fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    gt::detail::set_checkpoint_write_hook(&kill_mid_write);
    try {
      big_checkpoint().save(path);
    } catch (...) {
    }
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  ASSERT_EQ(files_starting_with(dir_, "run.ckpt.partial.").size(), 1U);

  gt::checkpoint next;
  next.add_value("step", std::int64_t{2000});
  next.save(path);
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"run.ckpt"});
  expect_same(gt::checkpoint::load(path), next);
}

// A save in progress elsewhere (here a child process paused mid-write) keeps its temporary
// through another save to the same path; once that process is gone, the next save removes it.
TEST_F(checkpoint, a_save_keeps_the_temporary_of_a_save_still_in_progress) {
  std::string const path = file("run.ckpt");
  small_checkpoint().save(path);
  paused_save in_progress_elsewhere{big_checkpoint(), path};
  ASSERT_TRUE(in_progress_elsewhere.paused()) << "the child's save did not pause mid-write";
  std::vector<std::string> const in_progress = files_starting_with(dir_, "run.ckpt.partial.");
  ASSERT_EQ(in_progress.size(), 1U);

  small_checkpoint().save(path);
  EXPECT_EQ(files_starting_with(dir_, "run.ckpt.partial."), in_progress);

  in_progress_elsewhere.kill();
  small_checkpoint().save(path);
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"run.ckpt"});
  expect_same(gt::checkpoint::load(path), small_checkpoint());
}

// Saves racing to one path (threads here; each save's lock is its own open file, so threads
// see each other's as processes do): none removes another's temporary while it is written.
TEST_F(checkpoint, concurrent_saves_to_one_path_never_remove_each_others_temporaries) {
  std::string const path = file("run.ckpt");
  auto const save_many = [&] {
    for (int i = 0; i < 100; ++i) small_checkpoint().save(path);
  };
  auto other = std::async(std::launch::async, save_many);
  EXPECT_NO_THROW(save_many());
  EXPECT_NO_THROW(other.get());
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"run.ckpt"});
  expect_same(gt::checkpoint::load(path), small_checkpoint());
}

// Only `<path>.partial.` and exactly 16 lowercase hex digits, a regular file that no one holds
// locked, is taken for a stranded temporary.
TEST_F(checkpoint, a_save_removes_no_file_but_its_own_stranded_temporaries) {
  std::string const path = file("run.ckpt");
  std::vector<std::string> const kept{
      "other.ckpt.partial.0123456789abcdef",  // another checkpoint's
      "run.ckpt.partial.",
      "run.ckpt.partial.0123456789ABCDEF",  // save writes lowercase digits
      "run.ckpt.partial.0123456789abcde",   // 15 digits
      "run.ckpt.partial.0123456789abcdef.bak",
      "run.ckpt.partial.0123456789abcdef0",  // 17 digits
      "run.ckpt.partial.0123456789abcdeg",
      "run.ckpt.partial.fedcba9876543210",  // locked: a save in progress
      "run.ckpt2.partial.0123456789abcdef",
      "xrun.ckpt.partial.0123456789abcdef",
  };
  for (std::string const& name : kept) write_file(file(name), bytes{1, 2, 3});
  std::string const stranded = "run.ckpt.partial.0123456789abcdef";
  write_file(file(stranded), bytes{1, 2, 3});
  // A directory and a symbolic link of the pattern's name are not files a save wrote.
  std::vector<std::string> const odd{"run.ckpt.partial.00000000000000d1",
                                     "run.ckpt.partial.00000000000000a1"};
  ASSERT_EQ(::mkdir(file(odd[0]).c_str(), 0755), 0);
  ASSERT_EQ(::symlink(file("other.ckpt.partial.0123456789abcdef").c_str(), file(odd[1]).c_str()),
            0);
  int const held = ::open(file("run.ckpt.partial.fedcba9876543210").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0) << std::strerror(errno);

  small_checkpoint().save(path);
  ::close(held);
  std::vector<std::string> expected = kept;
  expected.insert(expected.end(), odd.begin(), odd.end());
  expected.push_back("run.ckpt");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(files_in(dir_), expected);
}

TEST_F(checkpoint, a_failed_save_removes_its_temporary_and_keeps_the_earlier_checkpoint) {
  std::string const path = file("run.ckpt");
  gt::checkpoint const before = small_checkpoint();
  before.save(path);
  auto const previous = gt::detail::set_checkpoint_write_hook(&fail_mid_write);
  EXPECT_THROW(big_checkpoint().save(path), std::runtime_error);
  gt::detail::set_checkpoint_write_hook(previous);
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"run.ckpt"});
  expect_same(gt::checkpoint::load(path), before);
}

TEST_F(checkpoint, save_into_a_read_only_directory_fails_cleanly) {
  std::string const path = file("run.ckpt");
  gt::checkpoint const before = small_checkpoint();
  before.save(path);
  ASSERT_EQ(::chmod(dir_.c_str(), 0555), 0);
  if (::access(dir_.c_str(), W_OK) == 0) {
    GTEST_SKIP() << "this user may write into a read-only directory (root)";
  }
  std::string const m = message_of<graphstep::error>([&] { big_checkpoint().save(path); });
  EXPECT_TRUE(contains(m, "cannot create " + path + ".partial.")) << m;
  EXPECT_TRUE(contains(m, "Permission denied")) << m;
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"run.ckpt"});
  expect_same(gt::checkpoint::load(path), before);
}

TEST_F(checkpoint, save_into_a_missing_directory_is_a_usage_error) {
  std::string const path = file("no/such/dir/run.ckpt");
  std::string const m = message_of([&] { small_checkpoint().save(path); });
  EXPECT_TRUE(contains(m, "to write " + path)) << m;
  EXPECT_TRUE(contains(m, "the directory must exist")) << m;
  EXPECT_TRUE(files_in(dir_).empty());
}

TEST_F(checkpoint, save_over_a_directory_is_a_usage_error_and_leaves_no_temporary) {
  std::string const path = file("sub");
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  ::close(::open((path + "/inside").c_str(), O_CREAT | O_WRONLY, 0644));  // not an empty one
  std::string m = message_of([&] { small_checkpoint().save(path); });
  EXPECT_TRUE(contains(m, "the path names a directory")) << m;
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"sub"});
  m = message_of([&] { small_checkpoint().save(path + "/"); });
  EXPECT_TRUE(contains(m, "names a directory")) << m;
  m = message_of([&] { small_checkpoint().save(""); });
  EXPECT_TRUE(contains(m, "the path is empty")) << m;
}

// A named pipe is not a checkpoint: load refuses it at once rather than wait for a writer that
// may never come (an open for reading blocks until one does).
TEST_F(checkpoint, load_of_a_named_pipe_is_refused_without_waiting_for_a_writer) {
  std::string const path = file("pipe");
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  auto refused = std::async(std::launch::async,
                            [&] { return message_of([&] { (void)gt::checkpoint::load(path); }); });
  if (refused.wait_for(std::chrono::seconds{10}) != std::future_status::ready) {
    // Unblock the load so the test ends: open the pipe for writing once.
    ::close(::open(path.c_str(), O_WRONLY | O_NONBLOCK));
    ADD_FAILURE() << "checkpoint::load waited for a writer of the named pipe " << path;
  }
  std::string const m = refused.get();
  EXPECT_TRUE(contains(m, path + " is not a regular file")) << m;
}

TEST_F(checkpoint, load_of_a_missing_file_or_a_directory_is_a_usage_error) {
  std::string const path = file("absent.ckpt");
  std::string m = message_of([&] { (void)gt::checkpoint::load(path); });
  EXPECT_TRUE(contains(m, "cannot open " + path + ": No such file or directory")) << m;
  m = message_of([&] { (void)gt::checkpoint::load(dir_); });
  EXPECT_TRUE(contains(m, dir_ + " is not a regular file")) << m;
}
