// Run settings (train/run_settings.hpp): recorded into a checkpoint, through a file and back,
// and compared on resume: the same settings pass, every difference is named with both values,
// and a checkpoint that records none is told apart.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <graphstep/train/run_settings.hpp>
#include <string>
#include <vector>

#include "common/error_message.hpp"

namespace gt = graphstep::train;
using graphstep::dtype;
using graphstep::testing::contains;
using graphstep::testing::message_of;

namespace {

// A data-parallel run's settings as a trainer records them.
gt::run_settings run_of(int world_size, float learning_rate = 3e-4F) {
  gt::run_settings settings;
  settings.add("world size", world_size)
      .add("layers", 2)
      .add("batch", std::int64_t{8})
      .add("seed", std::uint64_t{1337})
      .add("learning rate", learning_rate)
      .add("learning-rate schedule", "warmup_cosine")
      .add("bf16 weights", true);
  return settings;
}

gt::checkpoint saved_by(gt::run_settings const& settings) {
  gt::checkpoint c;
  c.add_value("step", std::int64_t{7});
  settings.save_to(c, "settings");
  return c;
}

std::string refusal(gt::run_settings const& now, gt::checkpoint const& from) {
  return message_of([&] { static_cast<void>(now.check(from, "settings")); });
}

}  // namespace

TEST(run_settings, numbers_are_written_as_the_shortest_text_that_reads_back) {
  auto const settings = run_of(2).entries();
  std::vector<std::pair<std::string, std::string>> const expected{
      {"world size", "2"},
      {"layers", "2"},
      {"batch", "8"},
      {"seed", "1337"},
      {"learning rate", "0.0003"},
      {"learning-rate schedule", "warmup_cosine"},
      {"bf16 weights", "true"}};
  EXPECT_EQ(settings, expected);
  gt::run_settings more;
  more.add("double", 0.1).add("negative", -2.5F).add("large", 1e30F).add("huge", 1e300);
  more.add("smallest step", std::nextafter(3e-4F, 1.0F));
  EXPECT_EQ(more.entries()[0].second, "0.1");
  EXPECT_EQ(more.entries()[1].second, "-2.5");
  EXPECT_EQ(more.entries()[2].second, "1e+30");
  EXPECT_EQ(more.entries()[3].second, "1e+300");
  EXPECT_EQ(std::strtof(more.entries()[4].second.c_str(), nullptr), std::nextafter(3e-4F, 1.0F));
  EXPECT_NE(more.entries()[4].second, "0.0003");
}

TEST(run_settings, the_same_settings_pass_through_a_file) {
  char const* tmp = std::getenv("TMPDIR");
  std::string path =
      std::string{tmp != nullptr && *tmp != '\0' ? tmp : "/tmp"} + "/graphstep-run-settings-XXXXXX";
  int const fd = ::mkstemp(path.data());
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ::close(fd);
  saved_by(run_of(2)).save(path);
  gt::checkpoint const loaded = gt::checkpoint::load(path);
  ::unlink(path.c_str());
  EXPECT_TRUE(run_of(2).check(loaded, "settings"));
  gt::checkpoint_entry const& world = loaded.tensor({"settings/world size", {1}, dtype::uint8});
  EXPECT_EQ(std::string(world.bytes.begin(), world.bytes.end()), "2");
}

TEST(run_settings, another_world_size_is_refused_with_both_values) {
  std::string const m = refusal(run_of(4), saved_by(run_of(2)));
  EXPECT_TRUE(contains(m, "the checkpoint was written with world size 2, this run has 4")) << m;
  EXPECT_TRUE(contains(m, "Resume with the settings the checkpoint was written with")) << m;
  EXPECT_FALSE(contains(m, "learning rate")) << m;
}

TEST(run_settings, every_setting_that_differs_is_named) {
  std::string const m = refusal(run_of(4, 1e-3F), saved_by(run_of(2)));
  EXPECT_TRUE(contains(m, "world size 2, this run has 4")) << m;
  EXPECT_TRUE(contains(m,
                       "; the checkpoint was written with learning rate 0.0003, this run has "
                       "0.001"))
      << m;
  EXPECT_FALSE(contains(m, "layers")) << m;
}

TEST(run_settings, a_setting_only_one_side_records_is_a_difference) {
  gt::run_settings now = run_of(2);
  now.add("dropout", 0.1F);
  std::string m = refusal(now, saved_by(run_of(2)));
  EXPECT_TRUE(contains(m, "the checkpoint records no dropout, this run has 0.1")) << m;
  gt::run_settings saved = run_of(2);
  saved.add("dropout", 0.1F).add("label", "");
  m = refusal(run_of(2), saved_by(saved));
  EXPECT_TRUE(contains(m, "the checkpoint was written with dropout 0.1, this run sets no dropout"))
      << m;
  EXPECT_TRUE(contains(m, "the checkpoint was written with label \"\", this run sets no label"))
      << m;
}

// A checkpoint written before its trainer recorded settings: nothing to compare, said so.
TEST(run_settings, a_checkpoint_that_records_none_is_not_checked) {
  gt::checkpoint old;
  old.add_value("step", std::int64_t{7});
  old.add_tensor({"settingsX", {1}, dtype::uint8}, {'2'});  // not under "settings/"
  EXPECT_FALSE(run_of(2).check(old, "settings"));
}

TEST(run_settings, an_entry_under_the_prefix_that_is_no_setting_is_refused) {
  gt::checkpoint c = saved_by(run_of(2));
  c.add_tensor({"settings/weights", {1}, dtype::float32}, std::vector<unsigned char>(4));
  std::string const m = refusal(run_of(2), c);
  EXPECT_TRUE(contains(m, "\"settings/weights\" is not a setting")) << m;
}

TEST(run_settings, add_and_save_to_refuse_what_cannot_be_told_apart) {
  gt::run_settings settings = run_of(2);
  std::string m = message_of([&] { settings.add("world size", 3); });
  EXPECT_TRUE(contains(m, "\"world size\" is added already")) << m;
  m = message_of([&] { settings.add("", 3); });
  EXPECT_TRUE(contains(m, "a setting needs a name")) << m;
  gt::checkpoint c = saved_by(settings);
  m = message_of([&] { settings.save_to(c, "settings"); });
  EXPECT_TRUE(contains(m, "\"settings/world size\" is already present")) << m;
  m = message_of([&] { settings.save_to(c, ""); });
  EXPECT_TRUE(contains(m, "the prefix is empty")) << m;
}
