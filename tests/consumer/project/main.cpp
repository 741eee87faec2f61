// Builds against the exported targets and runs with or without a GPU.
#include <cstdio>
#include <graphstep/graphstep.hpp>

int main() {
  namespace gs = graphstep;
  // The library linked is the one whose headers this was compiled with.
  if (gs::version() != GRAPHSTEP_VERSION) {
    std::printf("consumer: compiled against graphstep %d, linked with %s\n", GRAPHSTEP_VERSION,
                gs::version_string());
    return 1;
  }
  std::printf("consumer: graphstep %s\n", gs::version_string());
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
