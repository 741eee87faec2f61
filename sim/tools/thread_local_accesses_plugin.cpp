// A GCC plugin for the simulator's kernel builds: removes the ThreadSanitizer entry-point calls
// (__tsan_read4, __tsan_write8, ...) whose address lies in a thread-local variable.
//
// Simulated kernels are compiled with -fsanitize=thread so that the race checker sees every byte
// of device memory they touch (sim/src/detail/kernel_accesses.hpp). `__shared__` storage is a
// `static thread_local` variable there (sim/include/graphstep/sim/device.hpp): never device
// memory, so the checker drops its accesses, but GCC's instrumentation calls the entry point for
// each of them all the same (it leaves out only locals that do not escape and read-only
// objects), and the call makes the compiler keep the kernel's values in memory around it. A
// tiled matmul's inner loop is nothing but such reads. No thread-local variable is device
// memory, so no access the checker looks at is lost.
//
// The pass runs after the loop optimizations and the vectorizer, just before GCC forms
// multiply-adds (widening_mul): those decisions are made on the code as instrumented, as without
// the plugin, so a kernel computes bit for bit what it computed before; only the calls go.
// An address is known to lie in a thread-local variable when it is that variable's address,
// or comes from it by conversions, added offsets and the induction variables of a loop.
//
// GCC's plugin API: https://gcc.gnu.org/onlinedocs/gccint/Plugins.html (built against the
// headers of the compiler that loads it: `g++ -print-file-name=plugin`).

// GCC's internal headers need this order.
// clang-format off
#include "gcc-plugin.h"
#include "plugin-version.h"
#include "tree.h"
#include "tree-pass.h"
#include "context.h"
#include "function.h"
#include "basic-block.h"
#include "gimple.h"
#include "gimple-iterator.h"
#include "gimple-expr.h"
#include "ssa.h"
#include "hash-set.h"
// clang-format on

#include <cstring>

// GCC loads only plugins that say they are GPL-compatible.
int plugin_is_GPL_compatible;  // NOLINT

namespace {

// Whether `callee` is one of the instrumentation's plain access entry points (reads and writes
// of 1 to 16 bytes, aligned, unaligned or volatile), as GCC names its builtins.
bool is_access_entry(tree callee) {
  if (callee == NULL_TREE || DECL_NAME(callee) == NULL_TREE) return false;
  char const* name = IDENTIFIER_POINTER(DECL_NAME(callee));
  if (std::strncmp(name, "__builtin_", 10) == 0) name += 10;
  if (std::strncmp(name, "__tsan_", 7) != 0) return false;
  name += 7;
  if (std::strncmp(name, "unaligned_", 10) == 0) {
    name += 10;
  } else if (std::strncmp(name, "volatile_", 9) == 0) {
    name += 9;
  }
  char const* size = nullptr;
  if (std::strncmp(name, "read", 4) == 0) size = name + 4;
  if (std::strncmp(name, "write", 5) == 0) size = name + 5;
  // Not the _range entry points (two arguments) nor anything else.
  return size != nullptr && size[0] >= '1' && size[0] <= '9';
}

// An integer added to an address that is not itself an address converted to an integer.
bool plain_offset(tree value) {
  if (TREE_CODE(value) == INTEGER_CST) return true;
  if (TREE_CODE(value) != SSA_NAME || !INTEGRAL_TYPE_P(TREE_TYPE(value))) return false;
  gimple* const def = SSA_NAME_DEF_STMT(value);
  if (!is_gimple_assign(def)) return gimple_nop_p(def) || is_a<gphi*>(def);
  return !(CONVERT_EXPR_CODE_P(gimple_assign_rhs_code(def)) &&
           POINTER_TYPE_P(TREE_TYPE(gimple_assign_rhs1(def))));
}

bool inside_thread_local(tree value, hash_set<tree>& visited, int depth) {
  if (depth > 32) return false;
  if (TREE_CODE(value) == ADDR_EXPR) {
    tree const base = get_base_address(TREE_OPERAND(value, 0));
    return base != NULL_TREE && VAR_P(base) && DECL_THREAD_LOCAL_P(base);
  }
  if (TREE_CODE(value) != SSA_NAME) return false;
  // Met again through a loop's induction variable: the other paths decide.
  if (visited.add(value)) return true;
  gimple* const def = SSA_NAME_DEF_STMT(value);
  if (auto* const phi = dyn_cast<gphi*>(def)) {
    unsigned const arguments = gimple_phi_num_args(phi);
    for (unsigned i = 0; i < arguments; ++i) {
      if (!inside_thread_local(gimple_phi_arg_def(phi, i), visited, depth + 1)) return false;
    }
    return arguments > 0;
  }
  if (!is_gimple_assign(def)) return false;
  tree_code const code = gimple_assign_rhs_code(def);
  tree const first = gimple_assign_rhs1(def);
  if (code == ADDR_EXPR || code == SSA_NAME || CONVERT_EXPR_CODE_P(code)) {
    return inside_thread_local(first, visited, depth + 1);
  }
  if (code == POINTER_PLUS_EXPR || code == MINUS_EXPR) {
    return plain_offset(gimple_assign_rhs2(def)) && inside_thread_local(first, visited, depth + 1);
  }
  if (code == PLUS_EXPR) {
    tree const second = gimple_assign_rhs2(def);
    if (plain_offset(second) && inside_thread_local(first, visited, depth + 1)) return true;
    return plain_offset(first) && inside_thread_local(second, visited, depth + 1);
  }
  return false;
}

bool inside_thread_local(tree address) {
  hash_set<tree> visited;
  return inside_thread_local(address, visited, 0);
}

pass_data const pass_description = {GIMPLE_PASS,
                                    "graphstep_sim_thread_local_accesses",
                                    OPTGROUP_NONE,
                                    TV_NONE,
                                    PROP_ssa,
                                    0,
                                    0,
                                    0,
                                    0};

class drop_thread_local_accesses : public gimple_opt_pass {
 public:
  explicit drop_thread_local_accesses(gcc::context* context)
      : gimple_opt_pass(pass_description, context) {}

  bool gate(function* /*unused*/) override { return flag_sanitize & SANITIZE_THREAD; }

  unsigned int execute(function* fun) override {
    basic_block block = nullptr;
    FOR_EACH_BB_FN(block, fun) {
      for (gimple_stmt_iterator it = gsi_start_bb(block); !gsi_end_p(it);) {
        gimple* const statement = gsi_stmt(it);
        if (is_gimple_call(statement) && gimple_call_num_args(statement) == 1 &&
            is_access_entry(gimple_call_fndecl(statement)) &&
            inside_thread_local(gimple_call_arg(statement, 0))) {
          unlink_stmt_vdef(statement);
          gsi_remove(&it, true);
          release_defs(statement);
          continue;
        }
        gsi_next(&it);
      }
    }
    return 0;
  }
};

}  // namespace

int plugin_init(plugin_name_args* plugin, plugin_gcc_version* version) {
  if (!plugin_default_version_check(version, &gcc_version)) return 1;
  register_pass_info pass{};
  pass.pass = new drop_thread_local_accesses(g);  // NOLINT: GCC's pass manager owns it
  pass.reference_pass_name = "widening_mul";
  pass.ref_pass_instance_number = 1;
  pass.pos_op = PASS_POS_INSERT_BEFORE;
  register_callback(plugin->base_name, PLUGIN_PASS_MANAGER_SETUP, nullptr, &pass);
  return 0;
}
