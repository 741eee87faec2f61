#pragma once

// The message of the exception a call throws, for tests that check what an error says.

#include <graphstep/error.hpp>

#include <gtest/gtest.h>

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

}  // namespace graphstep::testing
