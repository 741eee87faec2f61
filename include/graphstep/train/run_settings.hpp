#pragma once

/// @file train/run_settings.hpp
/// @brief The settings a resumed run must share with the run that saved its checkpoint (the
/// number of ranks, the model's sizes, the batch, the learning rate, the seed, ...): recorded
/// into a `train::checkpoint` and compared on resume, so that a run with other settings is
/// refused by name rather than resumed into another computation.
/// graphstep_core: plain C++, includes no CUDA header.

#include <graphstep/train/checkpoint.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace graphstep::train {

/// @brief Named settings of a training run, each held as text, saved into a checkpoint and
/// checked against the one a run resumes from.
///
/// A checkpoint's tensors are checked by dtype and shape on load, but much of what a step
/// computes leaves no trace in them: the number of data-parallel ranks (whose batches a step
/// averages), the batch and sequence when they do not size a weight, the learning rate and its
/// schedule, the seed of the data, the optimizer's constants. A trainer adds those it depends
/// on, `save_to` the checkpoint it writes, and `check` the one it resumes from:
///
/// ```cpp
/// gs::train::run_settings settings;
/// settings.add("world size", comm.size()).add("batch", batch).add("learning rate", lr);
/// settings.save_to(saved, "settings");             // beside the model's tensors
/// // on resume, before anything is loaded:
/// if (!settings.check(loaded, "settings")) { /* an older checkpoint: nothing to compare */ }
/// ```
///
/// Only what was added is compared: a setting the trainer leaves out (say, the number of steps
/// to train, which a resume may well raise) is not. Each value is compared as its text, so a
/// number must be added as the same type on both sides (an `int` 2 and a `double` 2 both read
/// "2", but a `float` 0.1 reads "0.1" and a `double` 0.1f "0.10000000149011612").
class run_settings {
 public:
  /// @brief Adds setting `name`, a phrase that reads in a sentence ("world size", "learning
  /// rate"), with `value` as text.
  /// @throws usage_error for an empty name or one already added.
  run_settings& add(std::string name, std::string value);

  /// @brief Adds a number (or `bool`, as "true" or "false"): an integer in decimal, a
  /// floating-point value as the shortest text that reads back as the same value ("0.0003").
  /// @throws usage_error for an empty name or one already added.
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  run_settings& add(std::string name, T value) {
    return add(std::move(name), text_of(value));
  }

  /// @brief Each setting as (name, value text), in the order added.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> const& entries() const noexcept {
    return settings_;
  }

  /// @brief Adds every setting to `into` as `<prefix>/<name>`: a `uint8` tensor of one
  /// dimension holding the value's text (UTF-8, no terminator), readable without graphstep.
  /// @throws usage_error for an empty prefix, or a name already in `into`.
  void save_to(checkpoint& into, std::string const& prefix) const;

  /// @brief Compares these settings with those `from` records under `prefix`.
  /// @returns true when `from` records settings and they are these; false when it records none
  /// under `prefix` (a checkpoint written before its trainer recorded settings): nothing could
  /// be compared, and the caller decides whether to resume unchecked (and should say so).
  /// @throws usage_error naming every setting that differs with both values ("the checkpoint
  /// was written with world size 2, this run has 4"), including one that only one side
  /// records; or when an entry under `prefix` is not a setting (not a one-dimensional `uint8`
  /// tensor). Nothing is loaded either way: call it before restoring any state.
  [[nodiscard]] bool check(checkpoint const& from, std::string const& prefix) const;

 private:
  template <class T>
  static std::string text_of(T value) {
    if constexpr (std::is_same_v<T, bool>) {
      return value ? "true" : "false";
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      return std::to_string(static_cast<long long>(value));
    } else if constexpr (std::is_integral_v<T>) {
      return std::to_string(static_cast<unsigned long long>(value));
    } else if constexpr (std::is_same_v<T, float>) {
      return shortest_text(value);
    } else {
      static_assert(std::is_same_v<T, double>, "run_settings::add takes float or double");
      return shortest_text(value);
    }
  }
  static std::string shortest_text(float value);
  static std::string shortest_text(double value);

  std::vector<std::pair<std::string, std::string>> settings_;
};

}  // namespace graphstep::train
