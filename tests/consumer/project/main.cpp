// Builds against the exported targets and runs with or without a GPU.
#include <cstdio>
#include <graphstep/graphstep.hpp>

int main() {
  namespace gs = graphstep;
  int const devices = gs::cuda::device_count();
  if (devices == 0) {
    try {
      gs::cuda::stream stream;
      std::puts("consumer: a stream was created without a device");
      return 1;
    } catch (gs::no_device_error const& e) {
      std::printf("consumer: no device, as expected: %s\n", e.what());
      return 0;
    }
  }
  gs::cuda::stream stream;
  stream.synchronize();
  std::printf("consumer: %d device(s), stream created\n", devices);
  return 0;
}
