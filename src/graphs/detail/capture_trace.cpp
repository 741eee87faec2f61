// graphstep_core: plain C++, includes no CUDA header.
#include "graphs/detail/capture_trace.hpp"

#include <algorithm>
#include <array>
#include <graphstep/graphs/capture_trace.hpp>
#include <set>
#include <sstream>

#include "detail/address_text.hpp"

namespace graphstep::graphs::detail {

namespace {

constexpr int capture_unsupported = 900;
constexpr int capture_invalidated = 901;
constexpr int capture_isolation = 905;
constexpr int capture_implicit = 906;
constexpr int captured_event = 907;
constexpr int capture_wrong_thread = 908;

constexpr std::uintptr_t legacy_stream_handle = 0x1;      // cudaStreamLegacy, CU_STREAM_LEGACY
constexpr std::uintptr_t per_thread_stream_handle = 0x2;  // cudaStreamPerThread

bool starts_with(std::string_view text, std::string_view prefix) noexcept {
  return text.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view text, std::string_view suffix) noexcept {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// Removes one "_ptsz", "_ptds" or "_v<digits>" suffix; says which kind it was.
enum class suffix { none, per_thread, version };
suffix strip_one_suffix(std::string_view& name) noexcept {
  if (ends_with(name, "_ptsz") || ends_with(name, "_ptds")) {
    name.remove_suffix(5);
    return suffix::per_thread;
  }
  std::size_t const underscore = name.rfind("_v");
  if (underscore == std::string_view::npos || underscore + 2 == name.size()) return suffix::none;
  std::string_view const digits = name.substr(underscore + 2);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return suffix::none;
  }
  name = name.substr(0, underscore);
  return suffix::version;
}

bool is_per_thread_variant(std::string_view name) noexcept {
  for (suffix s = strip_one_suffix(name); s != suffix::none; s = strip_one_suffix(name)) {
    if (s == suffix::per_thread) return true;
  }
  return false;
}

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) noexcept {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool is_copy_or_set(std::string_view base) noexcept {
  return starts_with(base, "cudaMemcpy") || starts_with(base, "cudaMemset") ||
         starts_with(base, "cuMemcpy") || starts_with(base, "cuMemset");
}

char const* mode_name(graphs::capture_mode mode) noexcept {
  switch (mode) {
    case graphs::capture_mode::global: return "graphs::capture_mode::global";
    case graphs::capture_mode::relaxed: return "graphs::capture_mode::relaxed";
    case graphs::capture_mode::this_thread: break;
  }
  return "graphs::capture_mode::this_thread";
}

// "`cudaMemsetAsync` on the legacy default stream from thread 2 (not the capturing thread)"
std::string describe_call(api_call const& call, capture_context const& context) {
  std::string text = "`" + std::string{base_api_name(call.name)} + "`";
  switch (call.stream) {
    case stream_kind::legacy_default: text += " on the legacy default stream"; break;
    case stream_kind::capturing:
      text += " on the capturing stream (" + graphstep::detail::hex_text(call.stream_handle) + ")";
      break;
    case stream_kind::other:
      text += " on stream " + graphstep::detail::hex_text(call.stream_handle);
      break;
    case stream_kind::none:
    case stream_kind::unknown: break;
  }
  text += " from thread " + std::to_string(call.thread);
  text += call.thread == context.capturing_thread ? " (the capturing thread)"
                                                  : " (not the capturing thread)";
  return text;
}

// Whether the capture's mode makes an unsafe call by this thread invalidate the capture.
bool mode_forbids(api_call const& call, capture_context const& context) noexcept {
  switch (context.mode) {
    case graphs::capture_mode::global: return true;
    case graphs::capture_mode::relaxed: return false;
    case graphs::capture_mode::this_thread: break;
  }
  return call.thread == context.capturing_thread;
}

// Whether a call bears on this capture: made by its thread, issued to its stream, or (in
// global mode) made anywhere. Other threads' calls belong to their own captures.
bool concerns(api_call const& call, capture_context const& context) noexcept {
  return call.thread == context.capturing_thread || call.stream == stream_kind::capturing ||
         context.mode == graphs::capture_mode::global;
}

std::string explain_cause(api_call const& call, capture_context const& context) {
  api_traits const traits = classify_api(call.name);
  std::string text = describe_call(call, context);
  if (call.result != 0) text += " returned " + capture_error_name(call.result);
  text += ". ";
  if (call.result == capture_invalidated) {
    text +=
        "It was the first recorded call to find the capture already invalidated; what "
        "invalidated it made no CUDA call that could be recorded (work before the capture "
        "began, or a library that bypasses the runtime and driver APIs)";
  } else if (traits.synchronizes) {
    text +=
        "It waits for device work, but nothing inside a capture has run yet: synchronize "
        "after the capture (or after a replay), and order streams inside it with events "
        "(graphs::capture_scope::fork and join)";
  } else if (traits.manages_memory) {
    text += std::string{"It allocates or frees memory, which "} + mode_name(context.mode) +
            " forbids while capturing: allocate before the capture, or from the "
            "graphstep::memory::memory_pool given to the scope";
  } else if (call.stream == stream_kind::legacy_default) {
    text +=
        "It issued work to the legacy default stream, which waits for every blocking "
        "stream: issue it to the capturing stream (or a stream forked from it)";
  } else if (call.host == host_memory::pageable) {
    text +=
        "It copies pageable host memory, which a graph cannot copy asynchronously: use "
        "pinned memory (cudaHostAlloc, cudaHostRegister)";
  } else if (call.result == capture_wrong_thread) {
    text +=
        "The capture was touched from a thread its mode does not allow: end it on the "
        "thread that began it";
  } else {
    text += "Move the call out of the capture; docs/troubleshooting.md lists this error";
  }
  if (call.thread != context.capturing_thread && context.mode == graphs::capture_mode::global) {
    text +=
        ". It came from another thread: under graphs::capture_mode::global an unsafe call from any "
        "thread breaks the capture. Use graphs::capture_mode::this_thread (the default), or keep "
        "other threads off CUDA while capturing";
  }
  return text;
}

std::string explain_legacy(api_call const& call, capture_context const& context) {
  return describe_call(call, context) +
         " issued work to the legacy default stream while the capture ran. That work is not "
         "part of the graph: it ran once, now, and will not run at replay. Issue it to the "
         "capturing stream if the step needs it";
}

std::string explain_pageable(api_call const& call, capture_context const& context) {
  return describe_call(call, context) + " copies pageable host memory at " +
         graphstep::detail::hex_text(call.host_address) +
         " inside the capture. The graph copies that address at every replay, through a "
         "staging copy that does not overlap with other work: the buffer must stay alive and "
         "hold the next input before each replay. Use pinned memory (cudaHostAlloc, "
         "cudaHostRegister)";
}

std::string module_name(std::string const& path) {
  std::size_t const slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string format_frame(frame const& f) {
  std::string text = f.symbol.empty() ? std::string{"??"} : f.symbol;
  if (!f.module.empty()) {
    text += " (" + module_name(f.module) + "+" + graphstep::detail::hex_text(f.module_offset) + ")";
  }
  return text;
}

std::vector<frame> symbolize_all(api_call const& call, symbolizer const& symbolize) {
  std::vector<frame> frames;
  frames.reserve(call.backtrace.size());
  for (std::uintptr_t address : call.backtrace) frames.push_back(symbolize(address));
  return frames;
}

// The leading frames that belong to the recording itself (CUPTI and its callback).
std::size_t recorder_frames(std::vector<frame> const& frames) {
  std::size_t count = 0;
  while (count < frames.size() && (starts_with(module_name(frames[count].module), "libcupti") ||
                                   starts_with(frames[count].symbol, "graphstep::detail::"))) {
    ++count;
  }
  return count;
}

void append_user_frame(std::ostringstream& out, std::vector<frame> const& frames) {
  if (auto const user = first_user_frame(frames)) {
    out << "    at " << format_frame(frames[*user]) << '\n';
  } else if (frames.empty()) {
    out << "    (no backtrace was kept for this call)\n";
  } else {
    out << "    (no frame of your code in the backtrace; link with -rdynamic for names)\n";
  }
}

}  // namespace

std::string_view base_api_name(std::string_view name) noexcept {
  while (strip_one_suffix(name) != suffix::none) {
  }
  return name;
}

api_traits classify_api(std::string_view name) noexcept {
  std::string_view const base = base_api_name(name);
  api_traits traits;
  traits.per_thread_variant = is_per_thread_variant(name);
  bool const copy_or_set = is_copy_or_set(base);
  bool const asynchronous = ends_with(base, "Async");
  traits.copies = starts_with(base, "cudaMemcpy") || starts_with(base, "cuMemcpy");
  traits.uses_default_stream = copy_or_set && !asynchronous;
  traits.synchronizes =
      (traits.copies && !asynchronous) ||
      one_of(base,
             {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
              "cudaStreamQuery", "cudaEventQuery", "cudaThreadSynchronize", "cuCtxSynchronize",
              "cuStreamSynchronize", "cuEventSynchronize", "cuStreamQuery", "cuEventQuery"});
  traits.manages_memory = one_of(
      base, {"cudaMalloc",      "cudaFree",          "cudaMallocHost",      "cudaFreeHost",
             "cudaHostAlloc",   "cudaHostRegister",  "cudaHostUnregister",  "cudaMallocManaged",
             "cudaMallocPitch", "cudaMalloc3D",      "cudaMallocArray",     "cudaFreeArray",
             "cuMemAlloc",      "cuMemFree",         "cuMemAllocHost",      "cuMemFreeHost",
             "cuMemHostAlloc",  "cuMemHostRegister", "cuMemHostUnregister", "cuMemAllocManaged",
             "cuMemAllocPitch"});
  return traits;
}

stream_kind classify_stream(std::uintptr_t handle, bool per_thread_variant,
                            std::uintptr_t capturing) noexcept {
  if (handle == 0) return per_thread_variant ? stream_kind::other : stream_kind::legacy_default;
  if (handle == legacy_stream_handle) return stream_kind::legacy_default;
  if (handle == per_thread_stream_handle) return stream_kind::other;
  return handle == capturing ? stream_kind::capturing : stream_kind::other;
}

stream_kind implicit_stream(std::string_view name) noexcept {
  api_traits const traits = classify_api(name);
  if (!traits.uses_default_stream) return stream_kind::none;
  return traits.per_thread_variant ? stream_kind::other : stream_kind::legacy_default;
}

bool is_capture_error(int code) noexcept {
  return code >= capture_unsupported && code <= capture_wrong_thread;
}

std::string capture_error_name(int code) {
  static constexpr std::array<char const*, 9> names{
      "cudaErrorStreamCaptureUnsupported", "cudaErrorStreamCaptureInvalidated",
      "cudaErrorStreamCaptureMerge",       "cudaErrorStreamCaptureUnmatched",
      "cudaErrorStreamCaptureUnjoined",    "cudaErrorStreamCaptureIsolation",
      "cudaErrorStreamCaptureImplicit",    "cudaErrorCapturedEvent",
      "cudaErrorStreamCaptureWrongThread"};
  if (!is_capture_error(code)) return "error " + std::to_string(code);
  return names[static_cast<std::size_t>(code - capture_unsupported)];
}

bool is_notable(api_call const& call) noexcept {
  if (call.result != 0 || call.stream == stream_kind::legacy_default) return true;
  api_traits const traits = classify_api(call.name);
  return traits.copies || traits.synchronizes || traits.manages_memory;
}

capture_diagnosis diagnose(std::vector<api_call> const& calls, capture_context const& context,
                           std::size_t calls_seen) {
  capture_diagnosis diagnosis;
  diagnosis.capture_failed = context.outcome != 0;
  diagnosis.calls_seen = std::max(calls_seen, calls.size());
  std::set<std::uint32_t> threads;
  for (api_call const& call : calls) threads.insert(call.thread);
  diagnosis.threads = threads.size();

  auto const first = [&](auto&& predicate) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (predicate(calls[i])) return i;
    }
    return std::nullopt;
  };
  std::optional<std::size_t> cause = first([&](api_call const& call) {
    return concerns(call, context) && is_capture_error(call.result) &&
           call.result != capture_invalidated;
  });
  if (!cause) {
    cause = first([&](api_call const& call) {
      return concerns(call, context) && call.result == capture_invalidated;
    });
  }
  if (!cause && context.outcome != 0) {
    cause = first([&](api_call const& call) {
      api_traits const traits = classify_api(call.name);
      return (call.stream == stream_kind::legacy_default && concerns(call, context)) ||
             ((traits.synchronizes || traits.manages_memory) && mode_forbids(call, context));
    });
  }
  if (cause) {
    diagnosis.capture_failed = true;  // a capture error invalidates the capture
    diagnosis.cause =
        finding{finding_kind::broke_capture, *cause, explain_cause(calls[*cause], context), {}};
  }

  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (cause && i == *cause) continue;
    api_call const& call = calls[i];
    if (call.result != 0 || !concerns(call, context)) continue;  // a failed call did no work
    if (call.stream == stream_kind::legacy_default) {
      diagnosis.warnings.push_back(
          {finding_kind::legacy_stream, i, explain_legacy(call, context), {}});
    } else if (call.host == host_memory::pageable) {
      diagnosis.warnings.push_back(
          {finding_kind::pageable_copy, i, explain_pageable(call, context), {}});
    }
  }
  return diagnosis;
}

bool is_library_frame(frame const& f) {
  static constexpr std::array<std::string_view, 16> library_modules{
      "libcudart", "libcuda.", "libcupti",  "libcublas",    "libcudnn", "libnccl",
      "libnvrtc",  "libcufft", "libcurand", "libgraphstep", "libc.so",  "libc-",
      "libstdc++", "libgcc_s", "ld-linux",  "libpthread"};
  std::string const module = module_name(f.module);
  for (std::string_view prefix : library_modules) {
    if (starts_with(module, prefix)) return true;
  }
  std::string_view const symbol = f.symbol;
  if (starts_with(symbol, "graphstep::") || starts_with(symbol, "__device_stub__")) return true;
  // The runtime's own entry points and their inline templates (cudaLaunchKernel<char>) when
  // the runtime is linked statically.
  bool const runtime_entry =
      (starts_with(symbol, "cuda") && symbol.size() > 4 && symbol[4] >= 'A' && symbol[4] <= 'Z') ||
      (starts_with(symbol, "cu") && symbol.size() > 2 && symbol[2] >= 'A' && symbol[2] <= 'Z');
  return runtime_entry || module.empty();
}

std::optional<std::size_t> first_user_frame(std::vector<frame> const& frames) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    if (!is_library_frame(frames[i])) return i;
  }
  return std::nullopt;
}

std::string library_call_around(std::vector<frame> const& frames) {
  // The CUDA libraries that issue work on a caller's stream; the runtime, the driver and CUPTI
  // are what they call, not calls of their own.
  static constexpr std::array<std::string_view, 8> libraries{
      "libcublas", "libcudnn",    "libnccl",     "libcufft",
      "libcurand", "libcusparse", "libcusolver", "libnvjpeg"};
  auto const in_library = [&](frame const& f) {
    std::string const module = module_name(f.module);
    return std::any_of(libraries.begin(), libraries.end(),
                       [&](std::string_view prefix) { return starts_with(module, prefix); });
  };
  std::size_t const end = first_user_frame(frames).value_or(frames.size());
  std::optional<std::size_t> outermost;
  for (std::size_t i = 0; i < end; ++i) {
    if (in_library(frames[i])) outermost = i;
  }
  if (!outermost) return {};
  frame const& entry = frames[*outermost];
  std::string const module = module_name(entry.module);
  return entry.symbol.empty() ? "a call into " + module : entry.symbol + " (" + module + ")";
}

std::string explain_break(std::string_view call, std::string_view library_call, int error,
                          std::string_view advice) {
  std::string text{call};
  if (library_call.empty()) return text.append(" broke it: ").append(advice);
  text.append(", made inside ").append(library_call).append(", broke it: ");
  switch (error) {
    case capture_implicit:
      return text +
             "the library issued its work to the legacy default stream, which a capture "
             "refuses. Give it the capturing stream (the call's stream argument; "
             "cublasSetStream or cudnnSetStream for a handle)";
    case capture_unsupported:
      return text +
             "the library allocated memory or synchronized, which a capture refuses (usually "
             "on its first call, while it sets itself up). Make one call before the capture "
             "begins (a warm-up step), and give it its workspace up front (cublasSetWorkspace; "
             "a cuBLASLt workspace as large as its heuristic asks)";
    case capture_isolation:
    case captured_event:
      return text +
             "the library waited on an event from outside the capture. Make its set-up calls "
             "before the capture begins";
    default:
      return text +
             "the library's call failed inside the capture. Check the status it returned, and "
             "make its set-up calls before the capture begins";
  }
}

std::string format_report(capture_diagnosis const& diagnosis, std::vector<api_call> const& calls,
                          symbolizer const& symbolize, std::size_t max_frames) {
  std::ostringstream out;
  out << "capture diagnostics: " << diagnosis.calls_seen << " CUDA API call(s) on "
      << diagnosis.threads << " thread(s) while the capture ran";
  if (diagnosis.calls_seen > calls.size()) {
    out << " (" << diagnosis.calls_seen - calls.size() << " ordinary ones not kept)";
  }
  out << '\n';
  if (diagnosis.cause) {
    api_call const& call = calls.at(diagnosis.cause->call);
    out << "  broke the capture: " << diagnosis.cause->explanation << '\n';
    if (!diagnosis.cause->library_call.empty()) {
      out << "    inside the library call " << diagnosis.cause->library_call << '\n';
    }
    std::vector<frame> const frames = symbolize_all(call, symbolize);
    append_user_frame(out, frames);
    std::optional<std::size_t> const user = first_user_frame(frames);
    std::size_t const shown = recorder_frames(frames);
    for (std::size_t i = shown; i < frames.size() && i - shown < max_frames; ++i) {
      out << "      #" << i - shown << ' ' << format_frame(frames[i])
          << (user && *user == i ? "   <- your code" : "") << '\n';
    }
  } else if (diagnosis.capture_failed) {
    out << "  no recorded call explains the failure\n";
  }
  for (finding const& warning : diagnosis.warnings) {
    out << "  warning: " << warning.explanation << '\n';
    append_user_frame(out, symbolize_all(calls.at(warning.call), symbolize));
  }
  return out.str();
}

void capture_trace::record(api_call call) {
  std::lock_guard lock{mutex_};
  call.sequence = seen_++;
  if (calls_.size() < capacity_) {
    calls_.push_back(std::move(call));
  } else if (notable_kept_ < capacity_ && is_notable(call)) {
    ++notable_kept_;
    calls_.push_back(std::move(call));
  }
}

std::vector<api_call> capture_trace::calls() const {
  std::lock_guard lock{mutex_};
  return calls_;
}

std::size_t capture_trace::seen() const {
  std::lock_guard lock{mutex_};
  return seen_;
}

}  // namespace graphstep::graphs::detail
