#pragma once

// The simulated device's state: devices, memory, streams, events, graphs and captures, behind one
// lock. Work runs on the host, in stream order, at the moment it is enqueued (the default
// execution mode, see sim/docs/simulator.md): a GPU may run it later, never earlier, so every rule
// about what a capture records or refuses is checked exactly as a GPU would check it.

#include <cuda_runtime_api.h>
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "graphstep/sim/kernel_task.hpp"
#include "graphstep/sim/sim.hpp"
#include "detail/fiber.hpp"
#include "detail/race_checker.hpp"

namespace graphstep::sim::detail {

// --- memory ----------------------------------------------------------------------------------
enum class memory_kind { device, pinned_host, graph, virtual_reservation };

// A stream-ordered memory pool (cudaMemPoolCreate, or a device's default pool). Its memory is
// counted as the CUDA Programming Guide's "Stream Ordered Memory Allocator" describes it: used
// bytes are the live allocations, reserved bytes what the pool holds from the device (used bytes
// and freed memory kept for reuse); reserved bytes count against the device's memory.
struct mem_pool_state {
  int device{};
  bool is_default{};
  // cudaMemPoolDestroy with allocations outstanding: the handle is gone, the pool lives on until
  // its last allocation is freed.
  bool destroyed{};
  std::size_t max_size{};  // cudaMemPoolProps::maxSize; 0: the device's memory
  std::uint64_t release_threshold{};
  int reuse_follow_event_dependencies{1};
  int reuse_allow_opportunistic{1};
  int reuse_allow_internal_dependencies{1};
  std::size_t reserved{};
  std::size_t reserved_high{};
  std::size_t used{};
  std::size_t used_high{};
  // What cudaMemPoolSetAccess granted other devices (absent: none); the pool's own device
  // always reads and writes.
  std::map<int, cudaMemAccessFlags> access_by_device{};
};

// What cudaMemAdvise and the prefetches said of one page of managed memory
// (cudaMemRangeGetAttribute reads it back). Locations of type cudaMemLocationTypeInvalid: none.
struct managed_page {
  bool read_mostly{};
  cudaMemLocation preferred{cudaMemLocationTypeInvalid, 0};
  cudaMemLocation last_prefetch{cudaMemLocationTypeInvalid, 0};
  std::uint32_t accessed_by{};  // a bit per device, and managed_host_bit for the host
};
constexpr std::uint32_t managed_host_bit = std::uint32_t{1} << 31U;

struct allocation {
  std::uintptr_t base{};
  std::size_t bytes{};
  memory_kind kind{memory_kind::device};
  int device{};
  // Graph allocations belong to a graph (cudaMallocAsync while capturing); their backing lives as
  // long as the graph, its copies and its executables do.
  std::shared_ptr<void> backing;
  // The host mapping around the allocation, guard pages included (guarded_memory.hpp); empty for
  // virtual memory mapped by the driver entry points.
  std::uintptr_t mapping{};
  std::size_t mapping_bytes{};
  // What device work may do with device memory (mmap protections): read and write, or what
  // cuMemSetAccess granted to mapped virtual memory (nothing until it is called).
  int device_protection{PROT_READ | PROT_WRITE};
  // Mapped virtual memory: what cuMemSetAccess granted each device (absent: no access). A
  // kernel on another device faults on it, as on a GPU.
  std::map<int, int> access_by_device{};
  // cudaMallocManaged memory (kind pinned_host: the host and every device reach it).
  bool managed{};
  // Managed memory: per page (managed_page_bytes), what advice and prefetches said of it; empty
  // until the first of them.
  std::vector<managed_page> managed_pages{};
  // Host memory of the program's that cudaHostRegister page-locked (kind pinned_host, no
  // mapping of the simulator's): cudaHostUnregister gives it back, nothing unmaps it.
  bool registered{};
  // The flags pinned host memory was allocated (cudaHostAlloc) or registered with.
  unsigned host_flags{};
  // cudaMallocAsync memory outside a capture: cudaFree of it does not synchronize.
  bool stream_ordered{};
  // The pool stream-ordered memory came from; its access settings govern other devices'
  // kernels (cudaDeviceEnablePeerAccess does not).
  mem_pool_state* pool{};
};

// --- user objects ----------------------------------------------------------------------------
// cudaUserObjectCreate: a destructor callback and its references, the callers' and the graphs'.
struct user_object {
  void* pointer{};
  cudaHostFn_t destroy{};
  std::uint64_t references{};         // all of them
  std::uint64_t caller_references{};  // those the program's threads own
};

// The live user objects (a handle is dereferenced only once found here).
std::set<user_object*>& user_objects();
// Releases `count` references of `object`; at zero its destructor runs, as a host function does
// (no CUDA call may be made from it: "Destructor callbacks cannot make CUDA API calls",
// cudaUserObjectCreate), and the object is gone.
void release_user_object(user_object& object, std::uint64_t count);

// The user object references a graph owns (cudaGraphRetainUserObject). A copy owns as many again
// (a clone, an executable, a queued launch's copy, a child graph node's graph), and destroying
// the owner releases them: the destructor runs once the last graph, executable and queued launch
// holding a reference is gone ("any references which would be released are held until the
// launches have finished executing", Programming Guide, "CUDA User Objects").
class user_object_references {
 public:
  user_object_references() = default;
  user_object_references(user_object_references const& other);
  user_object_references& operator=(user_object_references const& other);
  user_object_references(user_object_references&& other) noexcept;
  user_object_references& operator=(user_object_references&& other) noexcept;
  ~user_object_references();
  void add(user_object& object, std::uint64_t count);
  // Releases `count` of the references held to `object`; false (nothing released) when it holds
  // fewer.
  [[nodiscard]] bool release(user_object& object, std::uint64_t count);

 private:
  void release_all() noexcept;
  std::map<user_object*, std::uint64_t> held_;
};

// --- graphs ----------------------------------------------------------------------------------
struct graph_state;
struct event_state;

// How a graph launch's event nodes order its top-level nodes (launch_event_ordering).
struct launch_ordering {
  // Per node: the work of the events its event wait nodes wait for, its own and its ancestors'.
  std::vector<vector_clock> after_events;
  // Per node: the stamp its accesses take when the launch ends (race_checker::end_graph_launch):
  // a timeline of the nodes some event record nodes record, or 0 for the launch's own.
  std::vector<race_checker::node_stamp> stamps;
  // Those timelines, with this launch's tick: complete once the launch has run.
  vector_clock recorded;
  // Every event the launch's wait nodes wait for: the launch runs after them.
  vector_clock waited;
};

// A copy of `depth` slices of `height` rows of `bytes` each (cudaMemcpy3DAsync,
// cudaGraphAddMemcpyNode: cudaMemcpy3DParms); a 2-D copy is one slice (cudaMemcpy2DAsync), a
// 1-D copy one row of one slice. Row y of slice z starts at destination + z *
// destination_slice_pitch + y * destination_pitch, and likewise for the source.
struct memcpy_params {
  void* destination{};
  void const* source{};
  std::size_t bytes{};
  cudaMemcpyKind kind{cudaMemcpyDefault};
  std::size_t height{1};
  std::size_t destination_pitch{};
  std::size_t source_pitch{};
  std::size_t depth{1};
  std::size_t destination_slice_pitch{};
  std::size_t source_slice_pitch{};
};

// Calls `row(destination, source)` with the start of each row of `copy`, slice by slice.
template <typename Row>
void for_each_row(memcpy_params const& copy, Row&& row) {
  if (copy.bytes == 0) return;
  for (std::size_t z = 0; z < copy.depth; ++z) {
    auto* destination =
        static_cast<unsigned char*>(copy.destination) + z * copy.destination_slice_pitch;
    auto const* source =
        static_cast<unsigned char const*>(copy.source) + z * copy.source_slice_pitch;
    for (std::size_t y = 0; y < copy.height; ++y) {
      row(destination, source);
      destination += copy.destination_pitch;
      source += copy.source_pitch;
    }
  }
}

struct conditional_params {
  cudaGraphConditionalHandle handle{};
  cudaGraphConditionalNodeType type{cudaGraphCondTypeIf};
  std::vector<std::unique_ptr<graph_state>> bodies;
};

struct node_state {
  cudaGraphNodeType type{cudaGraphNodeTypeEmpty};
  // An executable's kernel, memset or memcpy node disabled by cudaGraphNodeSetEnabled:
  // "functionally equivalent to empty nodes until they are reenabled".
  bool disabled{};
  graph_state* owner{};
  // The node this one was cloned from (cudaGraphNodeFindInClone); compared, never followed.
  node_state const* cloned_from{};
  int device{};  // where work run outside a graph runs
  std::vector<node_state*> dependencies;
  std::shared_ptr<kernel_task const> kernel;
  // Kernel node attributes the simulator keeps (cudaGraphKernelNodeSetAttribute): hints that
  // change nothing here, read back as set.
  int priority{};
  cudaAccessPolicyWindow access_policy{};
  // cudaGraphKernelNodeGetParams' kernelParams: the addresses of the kernel's argument copies.
  std::vector<void*> kernel_arguments_out;
  cudaMemsetParams memset{};
  memcpy_params copy{};
  cudaHostFn_t host_function{};
  void* host_data{};
  // cudaStreamAddCallback: called with the stream as the caller named it and the device's error
  // (host_data is its user data); runs after a device error too, unlike a host function.
  cudaStreamCallback_t stream_callback{};
  cudaStream_t callback_stream{};
  event_state* event{};
  std::unique_ptr<graph_state> child;
  conditional_params conditional;
  // cudaConditionalNodeParams::phGraph_out points here ("valid for the lifetime of the node").
  std::vector<cudaGraph_t> conditional_outputs;
  // Memory nodes: the graph allocation's address and size.
  void* memory{};
  std::size_t memory_bytes{};
  // Work outside a graph: a copy's staged pageable source, and what runs when the node has run
  // (cudaFreeAsync gives the memory back then).
  std::shared_ptr<void const> staging;
  std::function<void()> completion;
  // A graph launch's node: how its event nodes order its nodes.
  std::shared_ptr<launch_ordering const> ordering;
};

struct launched_function {
  std::string name;
  std::vector<parameter_slot> parameters;
  // Its first launch: a kernel node made from raw parameters (cudaGraphAddKernelNode) launches
  // the function through it, with its own arguments.
  std::shared_ptr<kernel_task const> prototype;
};

// What cudaFuncSetAttribute set for a kernel function (cudaFuncGetAttributes reads it back).
struct function_settings {
  int max_dynamic_shared_bytes{-1};  // -1: the default, the device's sharedMemPerBlock
  int preferred_carveout{-1};        // cudaSharedmemCarveoutDefault
  int non_portable_cluster_size_allowed{};
  int cluster_scheduling_policy{};  // cudaClusterSchedulingPolicyDefault
  cudaFuncCache cache_config{cudaFuncCachePreferNone};  // cudaFuncSetCacheConfig
};

struct conditional_handle_state {
  unsigned default_value{};
  bool assign_default{};
  unsigned value{};
};

struct graph_state {
  int device{};
  std::vector<std::unique_ptr<node_state>> nodes;
  // Graph allocations made while capturing into this graph (kept alive by every copy).
  std::vector<std::shared_ptr<void>> allocations;
  // Conditional handles created for this graph; shared with the executables.
  std::vector<std::shared_ptr<conditional_handle_state>> conditionals;
  // The capture that is building this graph, if any (its nodes may only be read when it ends).
  struct capture_state* capture{};
  // Whether every edge goes from an earlier node to a later one, so that creation order is a
  // topological order (cudaGraphAddDependencies may add an edge against it).
  bool edges_follow_creation_order{true};
  // A child graph node's graph, handed out by cudaGraphChildGraphNodeGetGraph: the node owns it,
  // and allocation and free nodes cannot be added to it.
  bool embedded{};
  user_object_references user_objects;
};

// The graph's nodes in an order where each follows its dependencies: creation order where the
// edges allow it (a node waits only for nodes created before it), else the earliest-created
// ready node first.
std::vector<node_state const*> topological_order(graph_state const& graph);
// Whether the edges of `graph` leave no cycle.
bool acyclic(graph_state const& graph);

struct exec_state {
  std::unique_ptr<graph_state> graph;
  // The instantiation flags, less cudaGraphInstantiateFlagUpload (cudaGraphExecGetFlags).
  unsigned long long flags{};
  // The graph it was instantiated from: its nodes name the executable's nodes
  // (cudaGraphExecKernelNodeSetParams). It may be destroyed first; look it up before use.
  graph_state const* instantiated_from{};
  int device{};
  vector_clock launches;  // what the next launch is ordered after (the previous launches)
  // The timelines of the nodes its event record nodes record, by the set of record nodes
  // (indices) that record them, and the number of launches so far (their ticks).
  std::map<std::vector<std::size_t>, timeline> recorded_timelines;
  unsigned long long launch_count{};
};

// --- streams, events, captures ---------------------------------------------------------------
struct stream_state;

struct capture_state {
  unsigned long long id{};
  graph_state* graph{};
  bool owns_graph{};
  cudaStreamCaptureMode mode{cudaStreamCaptureModeGlobal};
  std::thread::id thread;
  stream_state* origin{};
  std::set<stream_state*> streams;
  // The last nodes of forked streams destroyed before the capture ended: still to be joined.
  std::vector<node_state*> orphans;
  // The first error that invalidated the capture; cudaSuccess while it is valid. With it, the
  // CUDA call that returned it and the library call (cuBLASLt, NCCL) that made that call, if
  // any: string literals, for graphstepSimCaptureInvalidation (driver_api.cpp).
  cudaError_t invalidated_by{cudaSuccess};
  char const* invalidating_call{};
  char const* invalidating_library_call{};
  // The first call on one of its streams that failed and left it valid (cudaMemcpyBatchAsync):
  // its graph lacks that work. Null while there is none; a string literal.
  char const* failed_call{};
  cudaError_t failed_call_error{cudaSuccess};
  int device{};
};

struct stream_state {
  int device{};
  unsigned flags{};
  int priority{};
  unsigned long long id{};
  bool legacy{};
  bool per_thread{};
  capture_state* capture{};
  std::vector<node_state*> capture_dependencies;
  // cudaStreamGetCaptureInfo hands out this array; it stays valid until the next call.
  std::vector<cudaGraphNode_t> dependencies_out;
  vector_clock clock;  // the race checker's view of what this stream's next work follows
  // cudaStreamSetAttribute's: kept and read back (no L2 cache or host scheduling is modelled).
  cudaAccessPolicyWindow access_policy_window{};
  cudaSynchronizationPolicy synchronization_policy{cudaSyncPolicyAuto};
  [[nodiscard]] bool blocking() const noexcept { return (flags & cudaStreamNonBlocking) == 0U; }
};

struct event_state {
  unsigned flags{};
  int device{};
  bool recorded{};
  // Last recorded in a capturing stream: queries and syncs fail with cudaErrorCapturedEvent.
  bool captured{};
  capture_state* capture{};
  std::vector<node_state*> capture_nodes;
  double milliseconds{};  // host clock when the recorded work completed
  vector_clock clock;     // what work waiting on the event is ordered after
};

struct device_state {
  int ordinal{};
  cudaDeviceProp properties{};
  std::size_t used_bytes{};
  // Graph memory (cudaDeviceGetGraphMemAttribute): live graph allocations, what the graphs'
  // allocator keeps for them until cudaDeviceGraphMemTrim, and their high watermarks.
  std::size_t graph_used{};
  std::size_t graph_used_high{};
  std::size_t graph_reserved{};
  std::size_t graph_reserved_high{};
  cudaError_t sticky_error{cudaSuccess};
  // cudaSetDeviceFlags / cudaInitDevice: the scheduling and other flags of its primary context.
  unsigned flags{};
  // cudaDeviceSetLimit: the limits a program may set, by cudaLimit; a device's defaults at first.
  std::map<int, std::size_t> limits;
  // cudaDeviceSetCacheConfig's preference.
  cudaFuncCache cache_config{cudaFuncCachePreferNone};
  // Whether a kernel was launched on it (cudaDeviceSetLimit: the printf FIFO and the malloc heap
  // cannot change after a launch of a kernel that uses them).
  bool kernel_launched{};
  std::unique_ptr<stream_state> legacy_stream;
  // cudaDeviceGetDefaultMemPool's pool, and cudaDeviceSetMemPool's (cudaMallocAsync's).
  mem_pool_state* default_pool{};
  mem_pool_state* current_pool{};
  // The host threads that have used this device's primary context (use_primary_context).
  std::mutex context_mutex;
  std::set<std::thread::id> context_threads;  // guarded by context_mutex
};

// --- deferred execution ----------------------------------------------------------------------
// The fiber a waiting operation runs on, and what it waits for.
struct parked_operation {
  // A waiting kernel's host functions and graph nodes run on this stack: reserved generously,
  // committed as touched.
  fiber stack{std::size_t{8} << 20};
  std::function<bool()> may_go_on;  // set while it is parked
  std::atomic<std::uint32_t>* wake{};
  std::uint32_t wake_seen{};
  bool running{};
};

struct queued_work {
  std::unique_ptr<node_state> node;
  race_checker::operation operation;  // its stream, tick and what it is ordered after
  // What it runs after besides (a graph launch: the events its wait nodes wait for, which order
  // only some of its nodes).
  vector_clock runs_after;
  // Work that waits for other processes (a collective whose peers have not joined) runs on a
  // fiber of its own and parks there until it may go on; set once it has started.
  std::unique_ptr<parked_operation> parked;
};

// The platform's lock: recursive, and able to let go of every level at once while a host
// thread waits for another process (a collective's peers), so that the process's other threads
// (a watchdog) keep making runtime calls meanwhile.
class platform_mutex {
 public:
  void lock();
  bool try_lock();
  void unlock();
  /// Releases every level this thread holds; returns how many (0 when it holds none), for
  /// reacquire, which takes them again.
  [[nodiscard]] unsigned release_all();
  void reacquire(unsigned depth);

 private:
  std::mutex mutex_;
  std::atomic<std::thread::id> owner_{};
  unsigned depth_{};  // guarded by mutex_
};

// --- the whole simulated platform ------------------------------------------------------------
// The interleaving generator is seeded on purpose: a seed names one interleaving.
struct platform {  // NOLINT(cert-msc32-c,cert-msc51-cpp)
  platform_mutex mutex;
  std::vector<std::unique_ptr<device_state>> devices;
  std::map<std::uintptr_t, allocation> allocations;  // by base address
  // (device, peer): kernels on `device` may access `peer`'s cudaMalloc memory
  // (cudaDeviceEnablePeerAccess made while `device` was current).
  std::set<std::pair<int, int>> peer_access;
  std::set<stream_state*> streams;
  std::set<event_state*> events;
  // Events destroyed (cudaEventDestroy) while a graph, an executable or a queued launch still
  // named them: freed by release_orphaned_events once none does.
  std::vector<event_state*> orphaned_events;
  std::set<graph_state*> graphs;
  std::set<exec_state*> execs;
  std::set<capture_state*> captures;
  // Memory pools, the devices' default pools included; the key is the cudaMemPool_t handle.
  std::map<mem_pool_state const*, std::unique_ptr<mem_pool_state>> pools;
  std::map<cudaGraphConditionalHandle, std::shared_ptr<conditional_handle_state>> conditionals;
  unsigned long long next_capture_id{1};
  unsigned long long next_stream_id{1};
  unsigned long long next_conditional{1};
  // Timelines of what graphs' event record nodes record: far above every stream's id and
  // below the race checker's node timelines.
  timeline next_recorded_timeline{timeline{1} << 62U};
  // Kernel functions launched so far, with the name written at the launch and the parameter
  // layout (cudaFuncGetName, cudaFuncGetParamInfo). A GPU knows every kernel of a loaded
  // module; here a function is known from its first launch.
  std::map<void const*, launched_function> functions;
  // Attributes set by cudaFuncSetAttribute, by function; set before or after its first launch.
  std::map<void const*, function_settings> settings_by_function;
  // cudaStreamPerThread of each (thread, device); blocking streams, kept for the process.
  std::map<std::pair<std::thread::id, int>, std::unique_ptr<stream_state>> per_thread_streams;
  race_checker races;
  race_mode race_checking{race_mode::abort};
  block_threads_setting block_threads{};  // who runs a grid's blocks (block_workers.hpp)
  // Deferred execution (execution_mode): work waiting to run, in the order it was enqueued, and
  // the last tick of each stream's timeline that has run.
  execution_mode execution{execution_mode::immediate};
  std::list<queued_work> queued;
  std::map<timeline, unsigned long long> completed;
  // Deferred execution: queries answered cudaErrorNotReady since queued work last ran
  // (answered_not_ready).
  std::size_t polls_since_progress{};
  // Seeded on purpose (execution_mode): a seed names one interleaving, so a failure replays.
  std::mt19937_64 interleaving;
  std::size_t races_reported{};
  vector_clock host_clock;  // what the host has seen complete (synchronizations)
};

platform& state();
// The device a host thread uses until cudaSetDevice names one: the first of cudaSetValidDevices'
// list, or device 0 without one.
int implicit_device() noexcept;
void set_implicit_device(int device) noexcept;
using lock_guard = std::lock_guard<platform_mutex>;

// Per host thread: the current device, the last error, the capture mode of
// cudaThreadExchangeStreamCaptureMode, and whether a host function is running.
struct thread_state {
  int device{};
  bool device_chosen{};           // cudaSetDevice named the device
  std::uint32_t contexts_used{};  // a bit per device whose primary context this thread used
  cudaError_t last_error{cudaSuccess};
  cudaStreamCaptureMode capture_mode{cudaStreamCaptureModeGlobal};
  bool in_host_function{};
  // The simulated library entry point (cublasLtMatmul, ncclAllReduce…) this thread is in, or
  // null: the CUDA calls it makes are named with it when they break a capture.
  char const* library_call{};
};

// Marks the thread as inside a simulated library's entry point `name` (a string literal) for
// the scope's lifetime.
class library_call_scope {
 public:
  explicit library_call_scope(char const* name) noexcept;
  ~library_call_scope();
  library_call_scope(library_call_scope const&) = delete;
  library_call_scope& operator=(library_call_scope const&) = delete;
  library_call_scope(library_call_scope&&) = delete;
  library_call_scope& operator=(library_call_scope&&) = delete;

 private:
  char const* outer_;
};
thread_state& this_thread();

// Records `error` as the thread's last error (cudaGetLastError's rule) and returns it.
cudaError_t fail(cudaError_t error) noexcept;
// What every runtime entry point checks first: no CUDA call from a host function
// (cudaErrorNotPermitted), and a sticky error of the current device is returned by every call
// that follows it; then queued work goes on (progress). Call with the platform lock held.
cudaError_t enter_runtime_call();
// The sticky error of the current device, or cudaSuccess.
cudaError_t sticky_error() noexcept;
device_state* current_device();
// The thread uses its current device's primary context (device 0 on a thread that never set one):
// "As of CUDA 12.0, the cudaInitDevice() and cudaSetDevice() calls initialize the runtime and
// the primary context associated with the specified device. Absent these calls, the runtime
// will implicitly use device 0 and self-initialize as needed to process other runtime API
// requests" (CUDA C++ Programming Guide, "Initialization"). Which calls need it is not listed:
// every call that reads the current device's state counts (current_device() records it), and
// cudaThreadExchangeStreamCaptureMode too, the stricter reading.
void use_primary_context() noexcept;
// The thread uses `device`'s primary context without making the device current (cudaInitDevice).
void use_primary_context_of(device_state& device) noexcept;

// Resolves a stream handle (0 and cudaStreamLegacy are the legacy stream, cudaStreamPerThread the
// thread's default stream); nullptr when the handle names no live stream.
stream_state* find_stream(cudaStream_t stream);
event_state* find_event(cudaEvent_t event);
graph_state* find_graph(cudaGraph_t graph);
exec_state* find_exec(cudaGraphExec_t exec);
// A live pool (not destroyed), or null.
mem_pool_state* find_pool(cudaMemPool_t pool);
// Takes `bytes` (already rounded) from `pool` for an allocation, reserving more of its device's
// memory when its free reserve is short; false when the pool's maximum size or the device's
// memory does not allow it.
bool pool_take(mem_pool_state& pool, std::size_t bytes);
// An allocation of `bytes` went back to `pool` (its free has run); the pool keeps the memory
// reserved. A destroyed pool goes once nothing is outstanding.
void pool_give_back(mem_pool_state& pool, std::size_t bytes);
// Releases `pool`'s reserve down to `keep` bytes, never below what is in use.
void trim_pool(mem_pool_state& pool, std::size_t keep);
// A stream, event or device synchronization on `device`: "When more than the release threshold
// bytes of memory are held by the memory pool, the allocator will try to release memory back to
// the OS on the next call to stream, event or context synchronize" (cudaMemPoolAttr).
void release_pool_memory(int device);
allocation const* find_allocation(void const* address);
// Whether [address, address + bytes) is live device memory: one allocation, virtual memory
// mapped without a gap, or one __device__ variable (detail/symbol_table.hpp).
bool device_range_valid(void const* address, std::size_t bytes);
// The checks of cudaMemcpy2DAsync on a copy (kind, pitches, each side's span in its
// allocation): cudaSuccess or the error that call returns.
cudaError_t check_pitched_copy(memcpy_params const& copy);

// A graph allocation becomes live (a launch reached its node) or is freed; keeps its device's
// graph memory counts. Call with the platform lock held.
void set_graph_allocation_live(void const* base, bool live);
// A memory allocation node of `bytes` on `device` whose memory belongs to `graph` (captured
// cudaMallocAsync, cudaGraphAddMemAllocNode); null when the device's memory is exhausted.
std::unique_ptr<node_state> graph_allocation_node(graph_state& graph, std::size_t bytes,
                                                  int device);
// Whether a free node of `memory` may be added to `into` (cudaGraphAddMemFreeNode, or
// cudaFreeAsync captured into it).
bool free_node_allowed(graph_state const& into, void const* memory);

// What a call that CUDA calls "potentially unsafe" during capture must check: returns
// cudaErrorStreamCaptureUnsupported and invalidates the offending captures when the thread's
// capture mode prohibits it (cudaThreadExchangeStreamCaptureMode in cuda_runtime_api.h).
// `call` names the CUDA call (a string literal), as for invalidate.
cudaError_t check_unsafe_call(char const* call);
// Synchronizing a device (or anything that encompasses a capturing stream) is invalid while a
// capture is under way on it: CUDA Programming Guide, "Prohibited and Unhandled Operations".
cudaError_t check_device_wide_sync(int device, char const* call);
// Work on, or a wait for, the legacy stream while a blocking stream of its device captures:
// every such capture is invalidated and the call fails with cudaErrorStreamCaptureImplicit.
cudaError_t check_legacy_use(stream_state const& stream, char const* call);
// Invalidates the capture with `reason`, first reason kept, noting `call` (the CUDA call that
// failed, a string literal) and the thread's library call.
void invalidate(capture_state& capture, cudaError_t reason, char const* call);
// A call issued to a capturing stream failed with `error` and leaves the capture valid, as CUDA
// does for some (cudaMemcpyBatchAsync): noted for graphstepSimCaptureFailedCall (driver_api.cpp).
// `call` is a string literal. Returns fail(error).
cudaError_t fail_leaving_capture_valid(capture_state& capture, char const* call,
                                       cudaError_t error) noexcept;

// One unit of stream work: either a node to record (capturing stream) or work to run now.
// `description` names the operation in race reports (default: from the node).
// `runs_after`: what queued work waits for besides its clock (a graph launch's waited events).
cudaError_t submit(stream_state& stream, std::unique_ptr<node_state> node,
                   std::string description = {}, vector_clock const& runs_after = {});
// Runs a node's work on the host (a launch's or a replay's execution).
void execute(node_state const& node);
// `ordering`: a graph launch's (launch_event_ordering), for its top-level nodes.
void execute_graph(graph_state const& graph, launch_ordering const* ordering = nullptr);
// How the event nodes of a launch of `exec` order its nodes (cudaGraphLaunch), for this launch
// (it counts it): the waited events as they are now, and a new tick of the recorded timelines.
std::shared_ptr<launch_ordering> launch_event_ordering(exec_state& exec);
// After the launch's operation has started on its stream (`launched` is the stream's clock
// then, `stream` its id): each event the launch's record nodes record names the work before the
// launch, what the record node waits for and the nodes it records.
void record_launch_events(exec_state const& exec, launch_ordering const& ordering,
                          vector_clock const& launched, timeline stream);

std::unique_ptr<graph_state> clone(graph_state const& graph);
// Whether an event record or wait node of a graph, an executable or a queued launch names
// `event` (cudaEventDestroy keeps such an event's state, so that no launch reads freed memory).
bool named_by_a_graph(event_state const* event);
// Frees the orphaned events that no graph, executable or queued launch names any more and whose
// records have completed. Called where such names go: a graph or executable destroyed, a wait.
void release_orphaned_events();
// The task a launch by address (`caller`: a kernel node, cudaLaunchKernelExC, ...) of `func`
// runs, made from the function's first <<<...>>> launch (graph_api.cpp).
cudaError_t kernel_task_of(void const* func, void* const* kernel_params, void* const* extra,
                           dim3 grid, dim3 block, unsigned shared_bytes, int device,
                           std::shared_ptr<kernel_task const>& out, char const* caller);
// Queues `task` on `stream` (the state's mutex held): the error of a launch, as enqueue_kernel
// leaves it for cudaGetLastError. `priority` is its kernel node's priority attribute.
cudaError_t launch_kernel(cudaStream_t stream, std::shared_ptr<kernel_task const> task,
                          int priority = 0);
// Whether a launch of `task` fits the device's limits.
bool launch_configuration_valid(device_state const& device, kernel_task const& task);
void end_capture(capture_state& capture);

// Whether a value in the caller's memory is one the enumeration names (cudaFuncSetCacheConfig,
// cudaDeviceSetCacheConfig; cudaDeviceSetSharedMemConfig, cudaFuncSetSharedMemConfig): read as an
// int, since loading another value as the enumeration is undefined behaviour.
bool cache_config_valid(cudaFuncCache const& config) noexcept;
bool shared_mem_config_valid(cudaSharedMemConfig const& config) noexcept;

double now_ms() noexcept;

// Deferred execution (see execution_mode in graphstep/sim/sim.hpp).
// Whether work enqueued now to `stream` waits in the queue rather than running.
bool defers(stream_state const& stream);
// Whether everything `clock` names has run (a stream's or an event's work is complete).
bool complete(vector_clock const& clock);
// Runs queued work until `clock` is complete. The oldest queued operation is always ready unless
// it waits for another process; then the host waits too (as long as a GPU would).
void run_until_complete(vector_clock const& clock);
// Runs queued work until no more than `operations` are queued (a full launch queue: the host
// waits for room).
void run_until_at_most(std::size_t operations);
// Runs queued work that can go on now until `clock` is complete or nothing can; returns whether
// `clock` is complete (never waits for other processes).
bool run_without_waiting(vector_clock const& clock);
// Runs (or resumes) up to `operations` queued operations that can go on now; returns how many.
std::size_t run_ready(std::size_t operations, bool at_random);
// Called where a query (cudaStreamQuery, cudaEventQuery, cudaEventElapsedTime) answers
// cudaErrorNotReady. In deferred execution work runs only when the host waits, but a host may
// poll instead, as a watchdog does, and a GPU finishes the work meanwhile: so every
// polls_per_operation such answers in a row let the oldest operation that can go on run.
void answered_not_ready();
inline constexpr std::size_t polls_per_operation = 16;
// Called at every runtime call: in immediate mode, everything queued that can go on now runs
// (work waits in the queue only behind a parked collective); in interleaved mode, a few ready
// operations at random.
void progress();
// Whether running `node` may wait for another process (it holds a collective).
bool waits_for_other_processes(node_state const& node);
bool waits_for_other_processes(graph_state const& graph);
// Whether a kernel may wait for another process; set by the simulated NCCL when it is built.
extern bool (*kernel_waits_for_other_processes)(kernel_task const& task);
// Called by device work that must wait for other processes: parks the running operation until
// `may_go_on()` holds (checked under the platform lock). `wake` is a word that changes when
// another process makes progress (a futex word in shared memory), or null.
void wait_for_other_processes(std::function<bool()> const& may_go_on,
                              std::atomic<std::uint32_t>* wake);

// The race checker's side of the runtime: an operation starting on a stream (ordered after what
// the host has seen and, by the legacy stream's rule, after the legacy or blocking streams), the
// host seeing a stream's or an event's work complete, and fresh memory.
void begin_operation(stream_state& stream, std::string const& description);
void host_waits_for(vector_clock const& clock);
void host_waits_for_device(int device);
// cudaFree of stream-ordered memory: the host writes all of it, ordered after what the host has
// seen complete and nothing else (it does not synchronize), then the accesses are forgotten.
void host_frees_without_waiting(allocation const& freed);
void forget_accesses(void const* address, std::size_t bytes);
void report_races();
std::string describe(stream_state const& stream);

}  // namespace graphstep::sim::detail
