#include "detail/fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(GRAPHSTEP_SIM_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__)
// graphstep_sim_switch(save, load): pushes the callee-saved registers of the System V AMD64
// calling convention, stores the stack pointer in *save, loads `load` as the stack pointer and
// pops the registers saved there; `ret` continues where that stack stopped.
extern "C" void graphstep_sim_switch(void** save, void* load);
asm(R"(
  .text
  .globl graphstep_sim_switch
  .hidden graphstep_sim_switch
  .type graphstep_sim_switch, @function
graphstep_sim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size graphstep_sim_switch, .-graphstep_sim_switch
)");
#endif

namespace graphstep::sim::detail {

namespace {

thread_local fiber* running = nullptr;  // the fiber this host thread is running, if any

std::size_t page_bytes() {
  static auto const bytes = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

}  // namespace

// Each stack is a mapping of its own, its guard page included: mappings made one after another
// lie side by side, so stacks of 256 KiB are 65 pages apart. Keep that stride off a power of two
// when placing stacks otherwise: a switch among 256 stacks 64 pages apart took 2.5 times as long
// (a ring of fibers on a 2-core x86-64 machine), offsets within the page did not help, so the
// sets they share are indexed by page: the TLB's, by every sign.
fiber::fiber(std::size_t stack_bytes) : stack_bytes_{stack_bytes} {
  std::size_t const guard = page_bytes();
  mapping_ = mmap(nullptr, guard + stack_bytes, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping_ == MAP_FAILED) throw std::bad_alloc{};
  mprotect(mapping_, guard, PROT_NONE);  // the stack grows down, towards the guard page
}

fiber::~fiber() {
#if defined(GRAPHSTEP_SIM_ASAN)
  // Frames stopped for good (a thread of a failed block) leave their red zones poisoned, and
  // AddressSanitizer keeps the shadow of unmapped memory: the next mapping at these addresses
  // (device memory, often) would report a stack-buffer-underflow on its first copy.
  ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(mapping_) + page_bytes(), stack_bytes_);
#endif
  munmap(mapping_, page_bytes() + stack_bytes_);
}

void fiber::start(void (*entry)(void*), void* argument) {
  entry_ = entry;
  argument_ = argument;
  finished_ = false;
  char* const bottom = static_cast<char*>(mapping_) + page_bytes();
#if defined(GRAPHSTEP_SIM_ASAN)
  // The stack is reused: frames of its last run, which may have stopped at a barrier for good,
  // left their red zones poisoned.
  ASAN_UNPOISON_MEMORY_REGION(bottom, stack_bytes_);
#endif
#if defined(__x86_64__)
  // The first switch pops six registers and returns into run_entry as if it had been called:
  // at its first instruction the stack pointer is 8 past a 16-byte boundary.
  auto top = reinterpret_cast<std::uintptr_t>(bottom + stack_bytes_) & ~std::uintptr_t{15};
  auto* slot = reinterpret_cast<void**>(top);
  *--slot = nullptr;                                     // run_entry's return address: never used
  *--slot = reinterpret_cast<void*>(&fiber::run_entry);  // where `ret` goes
  for (int i = 0; i < 6; ++i) *--slot = nullptr;         // rbp, rbx, r12-r15
  stack_pointer_ = slot;
#else
  getcontext(&context_);
  context_.uc_stack.ss_sp = bottom;
  context_.uc_stack.ss_size = stack_bytes_;
  context_.uc_link = &caller_;
  makecontext(&context_, &fiber::run_entry, 0);
#endif
}

void fiber::run_entry() {
  fiber* self = running;
#if defined(GRAPHSTEP_SIM_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &self->caller_stack_bottom_, &self->caller_stack_size_);
#endif
  self->entry_(self->argument_);
  self->finished_ = true;
#if defined(GRAPHSTEP_SIM_ASAN)
  // This stack ends here: nothing of it is kept (a null fake-stack slot says so).
  __sanitizer_start_switch_fiber(nullptr, self->caller_stack_bottom_, self->caller_stack_size_);
#endif
#if defined(__x86_64__)
  void* abandoned = nullptr;
  graphstep_sim_switch(&abandoned, self->caller_pointer_);
  std::abort();  // a finished fiber is never resumed
#endif
}

void fiber::resume() {
  fiber* const outer = running;
  running = this;
#if defined(GRAPHSTEP_SIM_ASAN)
  __sanitizer_start_switch_fiber(&fake_stack_, static_cast<char*>(mapping_) + page_bytes(),
                                 stack_bytes_);
#endif
#if defined(__x86_64__)
  graphstep_sim_switch(&caller_pointer_, stack_pointer_);
#else
  swapcontext(&caller_, &context_);
#endif
#if defined(GRAPHSTEP_SIM_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack_, nullptr, nullptr);
#endif
  running = outer;
}

void fiber::yield() {
  fiber* self = running;
#if defined(GRAPHSTEP_SIM_ASAN)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, self->caller_stack_bottom_, self->caller_stack_size_);
#endif
#if defined(__x86_64__)
  graphstep_sim_switch(&self->stack_pointer_, self->caller_pointer_);
#else
  swapcontext(&self->context_, &self->caller_);
#endif
#if defined(GRAPHSTEP_SIM_ASAN)
  __sanitizer_finish_switch_fiber(fake, &self->caller_stack_bottom_, &self->caller_stack_size_);
#endif
}

#if defined(__x86_64__) && !defined(GRAPHSTEP_SIM_ASAN)
void fiber::run_in_place(fiber& next, void** save) {
  next.caller_pointer_ = running->caller_pointer_;  // where the thread that resumed this one waits
  running = &next;
  graphstep_sim_switch(save, next.stack_pointer_);
}
#endif

void fiber::hand_over(fiber& next) {
#if defined(__x86_64__) && !defined(GRAPHSTEP_SIM_ASAN)
  run_in_place(next, &running->stack_pointer_);
#else
  static_cast<void>(next);
  std::abort();  // callers check hands_over
#endif
}

void fiber::finish_into(fiber& next) {
#if defined(__x86_64__) && !defined(GRAPHSTEP_SIM_ASAN)
  running->finished_ = true;
  void* abandoned = nullptr;  // this stack is not resumed: start() sets it up anew
  run_in_place(next, &abandoned);
#else
  static_cast<void>(next);
#endif
  std::abort();  // a finished fiber is never resumed; elsewhere callers check hands_over
}

}  // namespace graphstep::sim::detail
