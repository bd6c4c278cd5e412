#include "core/hot_line.h"

#include "core/config.h"

namespace cuxfer::shim {

// Its type aligns it to a line of its own.
HotLine g_hot_line;

void publish_hot_config(const Config& c) {
  g_hot_line.stack_depth = c.stack_depth;
  g_hot_line.python_native_depth = c.python_native_depth;
  g_hot_line.fingerprint_min = c.fingerprint ? c.fingerprint_min : UINT64_MAX;
  g_hot_line.rewrite_any = c.rewrite_any();
  g_hot_line.python_stacks = c.python_stacks;
  g_hot_line.memset_stacks = c.memset_stacks;
  g_hot_line.prefetch_trail = c.prefetch_trail;
}

}  // namespace cuxfer::shim
