// graphstep_core: plain C++, includes no CUDA header.
#include <graphstep/version.hpp>

namespace graphstep {

namespace {
#define GRAPHSTEP_DETAIL_TEXT(x) #x
#define GRAPHSTEP_DETAIL_NUMBER_TEXT(x) GRAPHSTEP_DETAIL_TEXT(x)
constexpr char const* compiled_version =
    GRAPHSTEP_DETAIL_NUMBER_TEXT(GRAPHSTEP_VERSION_MAJOR) "." GRAPHSTEP_DETAIL_NUMBER_TEXT(
        GRAPHSTEP_VERSION_MINOR) "." GRAPHSTEP_DETAIL_NUMBER_TEXT(GRAPHSTEP_VERSION_PATCH);
#undef GRAPHSTEP_DETAIL_NUMBER_TEXT
#undef GRAPHSTEP_DETAIL_TEXT
}  // namespace

int version() noexcept {
  return GRAPHSTEP_VERSION;
}

char const* version_string() noexcept {
  return compiled_version;
}

}  // namespace graphstep
