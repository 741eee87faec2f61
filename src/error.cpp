// graphstep_core: plain C++, includes no CUDA header.
#include <cstdio>
#include <graphstep/error.hpp>
#include <sstream>
#include <utility>

namespace graphstep::detail {

std::string format_failure(char const* file, int line, char const* call, char const* name,
                           std::string const& text) {
  std::ostringstream out;
  out << file << ':' << line << ": " << call << ": " << name;
  if (!text.empty()) out << " (" << text << ')';
  return out.str();
}

void throw_cudnn_error(int code, char const* name, char const* call, char const* file, int line) {
  throw cudnn_error{code, format_failure(file, line, call, name, "")};
}

void throw_nccl_error(int code, char const* text, char const* call, char const* file, int line) {
  throw nccl_error{code, format_failure(file, line, call, nccl_result_name(code), text)};
}

void throw_usage_error(char const* condition, std::string const& message, char const* file,
                       int line) {
  std::ostringstream out;
  out << file << ':' << line << ": " << message << " [failed check: " << condition << ']';
  throw usage_error{out.str()};
}

char const* nccl_result_name(int code) noexcept {
  // The values of ncclResult_t (nccl.h); NCCL offers text but no name lookup.
  switch (code) {
    case 0: return "ncclSuccess";
    case 1: return "ncclUnhandledCudaError";
    case 2: return "ncclSystemError";
    case 3: return "ncclInternalError";
    case 4: return "ncclInvalidArgument";
    case 5: return "ncclInvalidUsage";
    case 6: return "ncclRemoteError";
    case 7: return "ncclInProgress";
    default: return "ncclResult(unknown)";
  }
}

}  // namespace graphstep::detail
