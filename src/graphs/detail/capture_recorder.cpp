#include "graphs/detail/capture_recorder.hpp"

#include <graphstep/error.hpp>

#include "graphs/detail/backtrace.hpp"

#if defined(GRAPHSTEP_WITH_CUPTI)
#include <cupti.h>  // with the parameter structs of every runtime and driver call
#endif
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string_view>

namespace graphstep::graphs::detail {

bool diagnostics_requested_by_environment() {
  char const* value = std::getenv("GRAPHSTEP_CAPTURE_DIAGNOSTICS");
  return value != nullptr && *value != '\0' && std::string_view{value} != "0";
}

struct recorder_slot {
  explicit recorder_slot(std::uintptr_t stream) : capturing_stream{stream} {}
  std::uintptr_t capturing_stream;
  capture_trace trace;
};

#if defined(GRAPHSTEP_WITH_CUPTI)

namespace {


constexpr std::size_t backtrace_depth = 32;

std::uint32_t this_thread_number() {
  static std::atomic<std::uint32_t> next{1};
  thread_local std::uint32_t const number = next.fetch_add(1);
  return number;
}

// Per thread: how deep inside runtime calls it is (the driver calls the runtime makes are the
// runtime's own and not recorded), valid for one subscription; and whether the recorder itself
// is running, so that its own CUDA calls are not recorded.
thread_local int runtime_depth = 0;
thread_local std::uint64_t runtime_depth_generation = 0;
thread_local bool inside_recorder = false;

class recorder_guard {
 public:
  recorder_guard() noexcept : was_{inside_recorder} { inside_recorder = true; }
  ~recorder_guard() { inside_recorder = was_; }
  recorder_guard(recorder_guard const&) = delete;
  recorder_guard& operator=(recorder_guard const&) = delete;

 private:
  bool was_;
};

struct cupti_api {
  decltype(&cuptiSubscribe) subscribe{};
  decltype(&cuptiUnsubscribe) unsubscribe{};
  decltype(&cuptiEnableDomain) enable_domain{};
  decltype(&cuptiGetResultString) result_string{};
};

struct cupti_load {
  std::optional<cupti_api> api;
  std::string failure;  // why it could not be loaded
};

std::string directory_of(std::string const& path) {
  std::size_t const slash = path.rfind('/');
  return slash == std::string::npos ? std::string{"."} : path.substr(0, slash);
}

bool exists(std::string const& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

// GRAPHSTEP_CUPTI_LIBRARY alone when set; else beside the CUDA runtime in use (toolkit, extras
// and wheel layouts), then by name through the loader's search path.
std::vector<std::string> cupti_candidates() {
  if (char const* chosen = std::getenv("GRAPHSTEP_CUPTI_LIBRARY");
      chosen != nullptr && *chosen != '\0') {
    return {chosen};
  }
  std::string const soname = "libcupti.so." + std::to_string(CUDART_VERSION / 1000);
  std::vector<std::string> candidates;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void const*>(&cudaRuntimeGetVersion), &info) != 0 &&
      info.dli_fname != nullptr && info.dli_fname[0] == '/') {
    std::string const runtime_dir = directory_of(info.dli_fname);
    for (char const* relative :
         {"", "/../extras/CUPTI/lib64", "/../../../extras/CUPTI/lib64", "/../../cuda_cupti/lib"}) {
      std::string path = runtime_dir;
      path.append(relative).append("/").append(soname);
      if (exists(path)) candidates.push_back(path);
    }
  }
  candidates.push_back(soname);
  candidates.emplace_back("libcupti.so");
  return candidates;
}

cupti_load load_cupti() {
  std::string tried;
  for (std::string const& candidate : cupti_candidates()) {
    void* library = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      char const* why = ::dlerror();
      tried += "\n  " + candidate + ": " + (why ? why : "not loadable");
      continue;
    }
    cupti_api api;
    api.subscribe = reinterpret_cast<decltype(api.subscribe)>(::dlsym(library, "cuptiSubscribe"));
    api.unsubscribe =
        reinterpret_cast<decltype(api.unsubscribe)>(::dlsym(library, "cuptiUnsubscribe"));
    api.enable_domain =
        reinterpret_cast<decltype(api.enable_domain)>(::dlsym(library, "cuptiEnableDomain"));
    api.result_string =
        reinterpret_cast<decltype(api.result_string)>(::dlsym(library, "cuptiGetResultString"));
    if (api.subscribe && api.unsubscribe && api.enable_domain && api.result_string) {
      return {api, {}};  // the library stays loaded for the life of the process
    }
    ::dlclose(library);
    tried += "\n  " + candidate + ": loaded, but it lacks the CUPTI callback API (cuptiSubscribe)";
  }
  return {std::nullopt,
          "capture diagnostics need CUPTI, which ships with the CUDA toolkit "
          "(extras/CUPTI/lib64/libcupti.so." +
              std::to_string(CUDART_VERSION / 1000) +
              ", or the nvidia-cuda-cupti wheel), and it could not be loaded. Tried:" + tried +
              "\nSet GRAPHSTEP_CUPTI_LIBRARY to the path of the library"};
}

// The process-wide CUPTI subscription, held while at least one capture is diagnosed. Never
// destroyed: CUPTI may still call back while the process exits. Callbacks take only
// slots_mutex; subscribing and unsubscribing happen under subscription_mutex alone, so that
// CUPTI waiting for a callback in flight never waits on a lock that callback needs.
struct session {
  std::mutex subscription_mutex;
  std::optional<cupti_api> api;         // guarded by subscription_mutex
  CUpti_SubscriberHandle subscriber{};  // guarded by subscription_mutex
  std::mutex slots_mutex;
  std::vector<std::shared_ptr<recorder_slot>> slots;  // guarded by slots_mutex
  std::atomic<std::size_t> active{0};
  std::atomic<std::uint64_t> generation{0};
};

session& the_session() {
  static auto* const instance = new session;
  return *instance;
}

// What a call's parameters say: its stream, and the two addresses of a copy.
struct decoded_call {
  bool has_stream{false};
  bool per_thread{false};
  std::uintptr_t stream{};
  std::uintptr_t source{};
  std::uintptr_t destination{};
};

template <typename Handle>
std::uintptr_t as_handle(Handle handle) {
  return reinterpret_cast<std::uintptr_t>(handle);
}

template <typename Params>
decoded_call stream_of(void const* params, bool per_thread) {
  return {true, per_thread, as_handle(static_cast<Params const*>(params)->stream), 0, 0};
}

template <typename Params>
decoded_call async_copy(void const* params, bool per_thread) {
  auto const* p = static_cast<Params const*>(params);
  return {true, per_thread, as_handle(p->stream), as_handle(p->src), as_handle(p->dst)};
}

template <typename Params>
decoded_call sync_copy(void const* params) {
  auto const* p = static_cast<Params const*>(params);
  return {false, false, 0, as_handle(p->src), as_handle(p->dst)};
}

decoded_call decode_runtime(CUpti_CallbackId id, void const* params) {
  switch (id) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      return stream_of<cudaLaunchKernel_v7000_params>(params, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      return stream_of<cudaLaunchKernel_ptsz_v7000_params>(params, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
      auto const* p = static_cast<cudaLaunchKernelExC_v11060_params const*>(params);
      if (p->config == nullptr) return {};
      return {true, id == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
              as_handle(p->config->stream), 0, 0};
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
      return async_copy<cudaMemcpyAsync_v3020_params>(params, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000:
      return async_copy<cudaMemcpyAsync_ptsz_v7000_params>(params, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020:
      return async_copy<cudaMemcpy2DAsync_v3020_params>(params, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000:
      return async_copy<cudaMemcpy2DAsync_ptsz_v7000_params>(params, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
      return sync_copy<cudaMemcpy_v3020_params>(params);
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000:
      return sync_copy<cudaMemcpy_ptds_v7000_params>(params);
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020:
      return stream_of<cudaMemsetAsync_v3020_params>(params, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000:
      return stream_of<cudaMemsetAsync_ptsz_v7000_params>(params, true);
#if defined(CUDART_VERSION) && CUDART_VERSION >= 13000
    // A batch has no one source or destination; its stream tells the capture scope that the
    // call was issued to a captured stream (refused there under CUDA 13, capture left valid).
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000:
      return stream_of<cudaMemcpyBatchAsync_v13000_params>(params, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v13000:
      return stream_of<cudaMemcpyBatchAsync_ptsz_v13000_params>(params, true);
#endif
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020:
      return stream_of<cudaEventRecord_v3020_params>(params, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000:
      return stream_of<cudaEventRecord_ptsz_v7000_params>(params, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010:
      return stream_of<cudaEventRecordWithFlags_v11010_params>(params, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010:
      return stream_of<cudaEventRecordWithFlags_ptsz_v11010_params>(params, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020:
      return stream_of<cudaStreamWaitEvent_v3020_params>(params, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000:
      return stream_of<cudaStreamWaitEvent_ptsz_v7000_params>(params, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
      return stream_of<cudaStreamSynchronize_v3020_params>(params, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000:
      return stream_of<cudaStreamSynchronize_ptsz_v7000_params>(params, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020:
      return stream_of<cudaStreamQuery_v3020_params>(params, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_ptsz_v7000:
      return stream_of<cudaStreamQuery_ptsz_v7000_params>(params, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000:
      return stream_of<cudaLaunchHostFunc_v10000_params>(params, false);
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_ptsz_v10000:
      return stream_of<cudaLaunchHostFunc_ptsz_v10000_params>(params, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020: {
      auto const* p = static_cast<cudaMallocAsync_v11020_params const*>(params);
      return {true, false, as_handle(p->hStream), 0, 0};
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020: {
      auto const* p = static_cast<cudaFreeAsync_v11020_params const*>(params);
      return {true, false, as_handle(p->hStream), 0, 0};
    }
    default: return {};
  }
}

decoded_call decode_driver(CUpti_CallbackId id, void const* params) {
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      auto const* p = static_cast<cuLaunchKernel_params const*>(params);
      return {true, id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, as_handle(p->hStream), 0, 0};
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz: {
      auto const* p = static_cast<cuStreamSynchronize_params const*>(params);
      return {true, id == CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz, as_handle(p->hStream),
              0, 0};
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz: {
      auto const* p = static_cast<cuMemcpyHtoDAsync_v2_params const*>(params);
      return {true, id == CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz, as_handle(p->hStream),
              as_handle(p->srcHost), p->dstDevice};
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz: {
      auto const* p = static_cast<cuMemcpyDtoHAsync_v2_params const*>(params);
      return {true, id == CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz, as_handle(p->hStream),
              p->srcDevice, as_handle(p->dstHost)};
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz: {
      auto const* p = static_cast<cuMemcpyAsync_params const*>(params);
      return {true, id == CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz, as_handle(p->hStream), p->src,
              p->dst};
    }
    default: return {};
  }
}

void record_call(CUpti_CallbackDomain domain, CUpti_CallbackId id, CUpti_CallbackData const& data) {
  bool const runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  api_call call;
  call.domain = runtime ? api_domain::runtime : api_domain::driver;
  call.name = data.functionName != nullptr ? data.functionName : "(unnamed)";
  call.thread = this_thread_number();
  if (data.functionReturnValue != nullptr) {
    call.result = runtime ? static_cast<int>(*static_cast<cudaError_t*>(data.functionReturnValue))
                          : static_cast<int>(*static_cast<CUresult*>(data.functionReturnValue));
  }
  decoded_call const decoded =
      runtime ? decode_runtime(id, data.functionParams) : decode_driver(id, data.functionParams);
  call.copy_source = decoded.source;
  call.copy_destination = decoded.destination;
  if (decoded.source != 0 || decoded.destination != 0) call.host = host_memory::unknown;
  if (decoded.has_stream) {
    call.stream_handle = decoded.stream;
    call.stream = classify_stream(decoded.stream, decoded.per_thread, 0);
  } else {
    call.stream = implicit_stream(call.name);
  }
  if (is_notable(call)) call.backtrace = current_backtrace(backtrace_depth);

  session& s = the_session();
  std::vector<std::shared_ptr<recorder_slot>> slots;
  {
    std::lock_guard lock{s.slots_mutex};
    slots = s.slots;
  }
  for (auto const& slot : slots) {
    api_call copy = call;
    if (decoded.has_stream) {
      copy.stream =
          classify_stream(decoded.stream, decoded.per_thread, slot->capturing_stream);
    }
    slot->trace.record(std::move(copy));
  }
}

void CUPTIAPI on_api_call(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                          void const* data) {
  auto const& callback = *static_cast<CUpti_CallbackData const*>(data);
  bool const entering = callback.callbackSite == CUPTI_API_ENTER;
  session& s = the_session();
  if (std::uint64_t const generation = s.generation.load(std::memory_order_relaxed);
      runtime_depth_generation != generation) {
    runtime_depth_generation = generation;
    runtime_depth = 0;
  }
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (entering) {
      ++runtime_depth;
      return;
    }
    runtime_depth = std::max(0, runtime_depth - 1);
  } else if (domain != CUPTI_CB_DOMAIN_DRIVER_API || entering || runtime_depth > 0) {
    return;
  }
  if (inside_recorder || s.active.load(std::memory_order_acquire) == 0) return;
  recorder_guard const guard;
  try {
    record_call(domain, id, callback);
  } catch (...) {
    // Never throw into CUDA; a call that could not be recorded is only missing from the report.
  }
}

std::string cupti_failure(cupti_api const& api, CUptiResult result, char const* what) {
  char const* text = nullptr;
  if (api.result_string(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown";
  std::string message = std::string{"capture diagnostics: "} + what + " failed: " + text;
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    message +=
        ". Another CUPTI client (a profiler such as Nsight Systems or the PyTorch "
        "profiler) holds the callbacks: diagnose captures without it";
  }
  return message;
}

// The host side of a copy: the first of its two addresses that is host memory.
void find_host_memory(api_call& call) {
  call.host = host_memory::not_a_host_copy;
  for (std::uintptr_t address : {call.copy_source, call.copy_destination}) {
    if (address == 0) continue;
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, reinterpret_cast<void const*>(address)) !=
        cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      call.host = host_memory::unknown;
      continue;
    }
    if (attributes.type == cudaMemoryTypeUnregistered || attributes.type == cudaMemoryTypeHost) {
      call.host =
          attributes.type == cudaMemoryTypeHost ? host_memory::pinned : host_memory::pageable;
      call.host_address = address;
      return;
    }
  }
}

}  // namespace

capture_recorder::capture_recorder(cudaStream_t stream, graphs::capture_mode mode,
                                   std::string name) {
  session& s = the_session();
  std::lock_guard subscription{s.subscription_mutex};
  if (!s.api) {
    cupti_load loaded = load_cupti();
    if (!loaded.api) throw error{loaded.failure};
    s.api = loaded.api;
  }
  if (s.subscriber == nullptr) {
    cupti_api const& api = *s.api;
    CUpti_SubscriberHandle subscriber{};
    if (CUptiResult const r = api.subscribe(&subscriber, &on_api_call, nullptr);
        r != CUPTI_SUCCESS) {
      throw error{cupti_failure(api, r, "cuptiSubscribe")};
    }
    for (CUpti_CallbackDomain domain : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
      if (CUptiResult const r = api.enable_domain(1, subscriber, domain); r != CUPTI_SUCCESS) {
        static_cast<void>(api.unsubscribe(subscriber));
        throw error{cupti_failure(api, r, "cuptiEnableDomain")};
      }
    }
    s.subscriber = subscriber;
    s.generation.fetch_add(1);
  }
  slot_ = std::make_shared<recorder_slot>(reinterpret_cast<std::uintptr_t>(stream));
  {
    std::lock_guard slots{s.slots_mutex};
    s.slots.push_back(slot_);
    s.active.store(s.slots.size(), std::memory_order_release);
  }
  context_.name = std::move(name);
  context_.mode = mode;
  context_.capturing_thread = this_thread_number();
}

capture_recorder::~capture_recorder() {
  stop();
}

void capture_recorder::stop() noexcept {
  session& s = the_session();
  std::lock_guard subscription{s.subscription_mutex};
  bool last = false;
  {
    std::lock_guard slots{s.slots_mutex};
    auto const found = std::find(s.slots.begin(), s.slots.end(), slot_);
    if (found == s.slots.end()) return;
    s.slots.erase(found);
    s.active.store(s.slots.size(), std::memory_order_release);
    last = s.slots.empty();
  }
  if (last && s.subscriber != nullptr) {
    static_cast<void>(s.api->unsubscribe(s.subscriber));
    s.subscriber = nullptr;
  }
}

capture_diagnosis capture_recorder::diagnose(int outcome) {
  stop();
  recorder_guard const guard;
  calls_ = slot_->trace.calls();
  for (api_call& call : calls_) {
    if (call.host == host_memory::unknown) find_host_memory(call);
  }
  context_.outcome = outcome;
  capture_diagnosis diagnosis = graphs::detail::diagnose(calls_, context_, slot_->trace.seen());
  if (diagnosis.cause) {
    std::vector<frame> frames;
    for (std::uintptr_t address : calls_.at(diagnosis.cause->call).backtrace) {
      frames.push_back(symbolize(address));
    }
    diagnosis.cause->library_call = library_call_around(frames);
  }
  return diagnosis;
}

std::optional<api_call> capture_recorder::first_failed_call_on(
    std::vector<std::uintptr_t> const& streams) const {
  for (api_call& call : slot_->trace.calls()) {
    if (call.domain != api_domain::runtime || call.result == 0 || call.stream_handle == 0) continue;
    if (std::find(streams.begin(), streams.end(), call.stream_handle) == streams.end()) continue;
    return std::move(call);
  }
  return std::nullopt;
}

api_call const& capture_recorder::call(std::size_t index) const {
  return calls_.at(index);
}

std::string capture_recorder::report(capture_diagnosis const& diagnosis) const {
  return format_report(diagnosis, calls_, &symbolize);
}

std::string capture_diagnostics_unavailable_reason() {
  cupti_load const loaded = load_cupti();
  return loaded.api ? std::string{} : loaded.failure;
}

#else  // built without CUPTI's headers: every diagnosis is refused, saying why

namespace {
char const* const built_without_cupti =
    "capture diagnostics need CUPTI, and this graphstep was built without CUPTI's headers "
    "(cupti.h, in the CUDA toolkit's extras/CUPTI/include): rebuild graphstep with "
    "GRAPHSTEP_CUPTI_INCLUDE_DIR set to that directory";
}  // namespace

capture_recorder::capture_recorder(cudaStream_t /*stream*/, graphs::capture_mode /*mode*/,
                                   std::string /*name*/) {
  throw error{built_without_cupti};
}
capture_recorder::~capture_recorder() = default;
void capture_recorder::stop() noexcept {}
capture_diagnosis capture_recorder::diagnose(int /*outcome*/) {
  return {};
}
std::optional<api_call> capture_recorder::first_failed_call_on(
    std::vector<std::uintptr_t> const& /*streams*/) const {
  return std::nullopt;
}
api_call const& capture_recorder::call(std::size_t index) const {
  return calls_.at(index);
}
std::string capture_recorder::report(capture_diagnosis const& /*diagnosis*/) const {
  return {};
}
std::string capture_diagnostics_unavailable_reason() {
  return built_without_cupti;
}

#endif

}  // namespace graphstep::graphs::detail
