#pragma once

// The exception a call throws and its message, for tests that check what an error says.

#include <gtest/gtest.h>

#include <graphstep/error.hpp>
#include <string>

namespace graphstep::testing {

/// @brief Runs `call` and returns the what() of the `Error` it throws; a call that throws
/// nothing is a test failure (and "" is returned). Other exceptions propagate.
template <typename Error = usage_error, typename Call>
std::string message_of(Call&& call) {
  try {
    call();
  } catch (Error const& e) {
    return e.what();
  }
  ADD_FAILURE() << "the call threw no exception of the expected type";
  return {};
}

/// @brief Runs `call` and returns the `Error` it throws (which must be constructible from a
/// status code and a message, as graphstep's status errors are); a call that throws nothing is
/// a test failure.
template <typename Error, typename Call>
Error catch_as(Call&& call) {
  try {
    call();
  } catch (Error const& e) {
    return e;
  }
  ADD_FAILURE() << "no exception of the expected type was thrown";
  return Error{0, ""};
}

/// @brief True when `text` contains `part`.
inline bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace graphstep::testing
