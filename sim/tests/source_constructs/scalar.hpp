#pragma once

// Plain host and device arithmetic, no kernel: on the simulated device its mirror is a line that
// includes this file, so that neighbours reach it by a quoted #include from either place.

namespace source_constructs {

template <typename T>
struct affine {
  T scale;
  T shift;
};

}  // namespace source_constructs
