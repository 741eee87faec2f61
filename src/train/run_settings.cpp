// graphstep_core: plain C++, includes no CUDA header.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <graphstep/error.hpp>
#include <graphstep/train/run_settings.hpp>
#include <map>
#include <string>
#include <vector>

namespace graphstep::train {

namespace {

// The refusal of an entry under the settings' prefix that save_to did not write.
std::string not_a_setting(std::string const& entry, std::string const& under) {
  return "run_settings::check: the checkpoint's entry \"" + entry +
         "\" is not a setting (a one-dimensional uint8 tensor of text), though it is under \"" +
         under + "\"; it was not written by run_settings::save_to";
}

// The shortest "%g" text that reads back as `value`: 0.0003f is "0.0003", not the
// "0.000300000014" of its nine significant digits. NaN reads back as no value: "nan".
template <class F, class Read>
std::string shortest(F value, int most_digits, Read read) {
  std::array<char, 64> text{};
  for (int digits = 1; digits <= most_digits; ++digits) {
    // 64 characters hold any %g text of at most 17 digits: it is never cut short.
    static_cast<void>(
        std::snprintf(text.data(), text.size(), "%.*g", digits, static_cast<double>(value)));
    if (read(text.data()) == value) break;
  }
  return text.data();
}

std::string shown(std::string const& value) {
  return value.empty() ? "\"\"" : value;
}

}  // namespace

std::string run_settings::shortest_text(float value) {
  return shortest(value, 9, [](char const* text) { return std::strtof(text, nullptr); });
}

std::string run_settings::shortest_text(double value) {
  return shortest(value, 17, [](char const* text) { return std::strtod(text, nullptr); });
}

run_settings& run_settings::add(std::string name, std::string value) {
  GRAPHSTEP_EXPECTS(!name.empty(),
                    "run_settings::add: a setting needs a name (e.g. \"world size\")");
  bool const taken = std::any_of(settings_.begin(), settings_.end(),
                                 [&](auto const& setting) { return setting.first == name; });
  GRAPHSTEP_EXPECTS(!taken, "run_settings::add: the setting \"" + name +
                                "\" is added already; give each setting its own name");
  settings_.emplace_back(std::move(name), std::move(value));
  return *this;
}

void run_settings::save_to(checkpoint& into, std::string const& prefix) const {
  GRAPHSTEP_EXPECTS(!prefix.empty(),
                    "run_settings::save_to: the prefix is empty; name one, e.g. \"settings\"");
  for (auto const& [name, value] : settings_) {
    std::string entry = prefix;
    entry.append("/").append(name);
    into.add_tensor({std::move(entry), {static_cast<std::int64_t>(value.size())}, dtype::uint8},
                    std::vector<unsigned char>(value.begin(), value.end()));
  }
}

bool run_settings::check(checkpoint const& from, std::string const& prefix) const {
  std::string const under = prefix + "/";
  std::map<std::string, std::string> recorded;  // name -> value text
  std::vector<std::string> recorded_order;
  for (checkpoint_entry const& entry : from.entries()) {
    std::string const& entry_name = entry.spec.name();
    if (entry_name.compare(0, under.size(), under) != 0) continue;
    GRAPHSTEP_EXPECTS(entry.kind == checkpoint_kind::tensor && entry.spec.type() == dtype::uint8 &&
                          entry.spec.shape().size() == 1,
                      not_a_setting(entry_name, under));
    std::string name = entry_name.substr(under.size());
    recorded_order.push_back(name);
    recorded.emplace(std::move(name), std::string(entry.bytes.begin(), entry.bytes.end()));
  }
  if (recorded.empty()) return false;

  std::vector<std::string> differences;
  for (auto const& [name, value] : settings_) {
    auto const found = recorded.find(name);
    if (found == recorded.end()) {
      differences.push_back("the checkpoint records no " + name + ", this run has " + shown(value));
    } else if (found->second != value) {
      differences.push_back("the checkpoint was written with " + name + " " + shown(found->second) +
                            ", this run has " + shown(value));
    }
  }
  for (std::string const& name : recorded_order) {
    bool const here = std::any_of(settings_.begin(), settings_.end(),
                                  [&](auto const& setting) { return setting.first == name; });
    if (!here) {
      std::string difference = "the checkpoint was written with " + name + " " +
                               shown(recorded[name]) + ", this run sets no ";
      differences.push_back(difference.append(name));
    }
  }
  if (differences.empty()) return true;
  std::string text =
      "run_settings::check: this run's settings differ from those of the run "
      "that wrote the checkpoint, so it would not go on with that run: ";
  for (std::size_t i = 0; i < differences.size(); ++i) {
    text += (i > 0 ? "; " : "") + differences[i];
  }
  throw usage_error{text +
                    ". Resume with the settings the checkpoint was written with (the "
                    "same number of ranks and the same configuration), or start a new "
                    "run"};
}

}  // namespace graphstep::train
