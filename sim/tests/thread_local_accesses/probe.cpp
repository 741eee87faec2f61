// A simulated kernel's two kinds of memory as its compiled code sees them: `__shared__` storage
// (a thread-local array) and device memory (through a pointer). Compiled with and without the
// plugin by check.cmake, which counts the race checker's entry-point calls in each object.
static thread_local float tile[64];

float read_both(float const* device, int i) { return tile[i] + device[i]; }

void write_both(float* device, int i, float value) {
  tile[i] = value;
  device[i] = value;
}
