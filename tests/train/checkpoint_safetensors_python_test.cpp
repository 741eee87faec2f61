// Checkpoints as safetensors files against the Python side of the format: the safetensors package
// and numpy read what graphstep writes, and graphstep reads what PyTorch writes, value for value
// (checkpoint_safetensors_interop.py holds the Python side and the formulas of the values, which
// this file computes too). They run in the project's PyTorch environment
// (GRAPHSTEP_TORCH_VENV, made by scripts/install-torch.sh; GRAPHSTEP_TORCH_PYTHON names another
// Python) and are skipped, saying why, where it is missing.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <graphstep/dtype.hpp>
#include <graphstep/error.hpp>
#include <graphstep/train/checkpoint.hpp>
#include <string>
#include <vector>

#include "common/error_message.hpp"

namespace gt = graphstep::train;
using graphstep::dtype;
using graphstep::testing::contains;
using graphstep::testing::message_of;
using bytes = std::vector<unsigned char>;

namespace {

// The Python with torch and safetensors: GRAPHSTEP_TORCH_PYTHON, else the project's venv.
std::string python() {
  if (char const* chosen = std::getenv("GRAPHSTEP_TORCH_PYTHON")) return chosen;
  return std::string{GRAPHSTEP_TORCH_VENV} + "/bin/python";
}

std::string shell_quoted(std::string const& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
  return out + "'";
}

struct run_result {
  int status{-1};
  std::string output;
};

// Runs `command` in the shell, its standard error merged into the output it returns.
run_result run(std::string const& command) {
  run_result result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  while (std::size_t const got = std::fread(buffer.data(), 1, buffer.size(), pipe)) {
    result.output.append(buffer.data(), got);
  }
  int const status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

run_result run_script(std::string const& mode, std::string const& path) {
  std::string const script =
      std::string{GRAPHSTEP_TEST_SOURCE_DIR} + "/train/checkpoint_safetensors_interop.py";
  return run(shell_quoted(python()) + " " + shell_quoted(script) + " " + mode + " " +
             shell_quoted(path));
}

// Why the tests cannot run here, or "" when they can. Torch is looked up, not imported (seconds).
std::string missing_python() {
  std::string const interpreter = python();
  if (::access(interpreter.c_str(), X_OK) != 0) {
    return "no Python at " + interpreter + " (scripts/install-torch.sh makes it)";
  }
  run_result const probe = run(shell_quoted(interpreter) +
                               " -c 'import importlib.util, numpy, safetensors; "
                               "assert importlib.util.find_spec(\"torch\"), \"no torch\"'");
  if (probe.status != 0) {
    return interpreter +
           " lacks numpy, safetensors or torch (scripts/install-torch.sh adds them): " +
           probe.output;
  }
  return {};
}

template <class T>
bytes bytes_of(std::vector<T> const& values) {
  bytes out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// bfloat16 of a float whose low 16 bits are zero (exact): its high half.
std::uint16_t bfloat16_bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  EXPECT_EQ(bits & 0xFFFFU, 0U) << value << " is not exact in bfloat16";
  return static_cast<std::uint16_t>(bits >> 16);
}

struct expected_tensor {
  std::string name;
  dtype type;
  std::vector<std::int64_t> shape;
  bytes data;
};

// The tensors of checkpoint_safetensors_interop.py's docstring, computed here.
std::vector<expected_tensor> expected_tensors() {
  std::vector<float> w;
  std::vector<std::uint16_t> b;
  std::vector<float> exp_avg;
  for (int i = 0; i < 6; ++i) w.push_back(0.25F * static_cast<float>(i) - 1.0F);
  for (int i = 0; i < 4; ++i) b.push_back(bfloat16_bits((static_cast<float>(i) - 1.5F) * 0.5F));
  for (int i = 0; i < 6; ++i) exp_avg.push_back(static_cast<float>(1.0 / (i + 1)));
  std::vector<std::uint16_t> const h = {0x3C00, 0xC000, 0x3800};  // 1.0, -2.0, 0.5 in float16
  std::vector<std::int32_t> const tokens = {7, -3, 2147483647, -2147483647 - 1};
  return {
      {"model/w", dtype::float32, {2, 3}, bytes_of(w)},
      {"model/b", dtype::bfloat16, {4}, bytes_of(b)},
      {"model/h", dtype::float16, {3}, bytes_of(h)},
      {"data/tokens", dtype::int32, {2, 2}, bytes_of(tokens)},
      {"dropout/mask", dtype::uint8, {5}, {0, 1, 255, 128, 7}},
      {"optimizer/exp_avg/model/w", dtype::float32, {2, 3}, bytes_of(exp_avg)},
      {"scalar", dtype::float32, {}, bytes_of(std::vector<float>{3.5F})},
      {"empty", dtype::float32, {0, 4}, {}},
  };
}

// The optimizer's host state, as a trainer keeps it beside the weights.
struct adam_state {
  double beta1;
  double beta2;
  std::int64_t step;
};

class checkpoint_safetensors_python : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string const missing = missing_python();
    if (!missing.empty()) GTEST_SKIP() << missing;
    char const* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string{tmp != nullptr && *tmp != '\0' ? tmp : "/tmp"} +
                          "/graphstep-safetensors-python-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  [[nodiscard]] std::string file(std::string const& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

}  // namespace

TEST_F(checkpoint_safetensors_python, numpy_and_torch_read_what_graphstep_writes) {
  gt::checkpoint c;
  std::vector<expected_tensor> const tensors = expected_tensors();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    expected_tensor const& t = tensors[i];
    c.add_tensor({t.name, t.shape, t.type}, t.data);
    if (i == 0) c.add_value("step", std::int64_t{123456789012});
  }
  c.add_value("optimizer/adam", adam_state{0.9, 0.999, 10});
  std::string const path = file("graphstep.safetensors");
  c.save_safetensors(path);

  run_result const read = run_script("read", path);
  EXPECT_EQ(read.status, 0) << read.output;
  EXPECT_TRUE(contains(read.output, "read: ok")) << read.output;
}

TEST_F(checkpoint_safetensors_python, graphstep_reads_what_pytorch_writes) {
  std::string const path = file("torch.safetensors");
  run_result const written = run_script("write", path);
  ASSERT_EQ(written.status, 0) << written.output;

  gt::checkpoint const c = gt::checkpoint::load_safetensors(path);
  std::vector<expected_tensor> const tensors = expected_tensors();
  EXPECT_EQ(c.entries().size(), tensors.size());
  for (expected_tensor const& t : tensors) {
    ASSERT_TRUE(c.contains(t.name)) << t.name;
    gt::checkpoint_entry const& entry = c.tensor({t.name, t.shape, t.type});
    EXPECT_EQ(entry.bytes, t.data) << t.name;
  }
  for (gt::checkpoint_entry const& entry : c.entries()) {
    EXPECT_EQ(entry.kind, gt::checkpoint_kind::tensor) << entry.spec.name();
  }
}

TEST_F(checkpoint_safetensors_python, a_pytorch_int64_tensor_is_refused_by_name) {
  std::string const path = file("int64.safetensors");
  run_result const written = run_script("write-int64", path);
  ASSERT_EQ(written.status, 0) << written.output;
  std::string const m =
      message_of<graphstep::error>([&] { (void)gt::checkpoint::load_safetensors(path); });
  EXPECT_TRUE(contains(m, "tensor \"positions\" is I64, which graphstep has no dtype for")) << m;
}
