#pragma once

// Resident host memory of the test process, for tests that check replays and failures do not
// grow it.

#include <fstream>

namespace graphstep::testing {

/// Resident pages of this process (Linux /proc/self/statm), 0 where it cannot be read.
inline long resident_pages() {
  std::ifstream statm{"/proc/self/statm"};
  long size = 0;
  long resident = 0;
  statm >> size >> resident;
  return resident;
}

}  // namespace graphstep::testing
