#include "rewrite/site_policy.h"

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/ranked_lock.h"
#include "policy/site_matcher.h"
#include "python/python_stack.h"
#include "record/callsite_table.h"
#include "record/module_snapshot.h"
#include "symbols/elf_lookup.h"
#include "record/recorder.h"

namespace cuxfer::shim::rewrite {
namespace {

// Per interned stack: 0 not decided yet; 1 no entry; else 2 + entry index.
constexpr uint32_t kUndecided = 0, kNoEntry = 1, kFirstEntry = 2;

struct Loaded {
  policy::Policy policy;
  policy::SiteMatcher matcher;
  uint64_t generation = 0;  // module generation the matcher was bound for
  RankedMutex bind_mutex{LockRank::kSitePolicyBind};    // rebinding (new modules) is rare and off the hot path
  std::atomic<uint32_t> decisions[CallSiteTable::kCapacity + 1] = {};
};

std::atomic<Loaded*> g_loaded{nullptr};

// Python frames of a stack, named from the shim's code table.
class CodeTableNames : public policy::PythonNames {
 public:
  bool name(uint64_t frame, policy::PythonFrameName& out) const noexcept override {
    return python::PythonStacks::instance().name_frame(frame, out.file, out.function, out.line);
  }
};
std::once_flag g_once;

void bind(Loaded& l) {
  uint64_t generation = 0;
  std::vector<trace::ModuleInfo> modules = loaded_modules(&generation);
  std::vector<policy::LoadedModule> view;
  view.reserve(modules.size());
  for (const auto& m : modules) view.push_back({m.path, m.base, m.build_id});
  l.matcher.bind(l.policy, view);
  l.generation = generation;
}

}  // namespace

void load_policy() {
  std::call_once(g_once, [] {
    const Config& c = config();
    if (!c.enabled || c.policy_path.empty()) return;
    InternalScope internal;
    auto* l = new Loaded;  // lives as long as the process: hooks may run during exit
    std::string error;
    if (!policy::read_policy_file(c.policy_path, l->policy, error)) {
      Recorder::instance().note("policy: " + c.policy_path + " not used: " + error);
      delete l;
      return;
    }
    bind(*l);
    Recorder::instance().note("policy: " + c.policy_path + ": " + std::to_string(l->policy.entries.size()) +
                                  " entries, " + std::to_string(l->matcher.bound()) + " bound to loaded modules" +
                                  (l->matcher.python_entries()
                                       ? ", " + std::to_string(l->matcher.python_entries()) + " Python sites"
                                       : std::string()) +
                                  (l->matcher.unbound_entries()
                                       ? ", " + std::to_string(l->matcher.unbound_entries()) + " not (yet) loaded"
                                       : std::string()),
                              false);
    g_loaded.store(l, std::memory_order_release);
  });
}

bool policy_loaded() {
  if (config().policy_path.empty()) return false;
  load_policy();
  return g_loaded.load(std::memory_order_acquire) != nullptr;
}

SiteDecision site_decision(policy::SiteKind kind, uint64_t bytes) {
  if (config().policy_path.empty()) return {};
  Loaded* l = g_loaded.load(std::memory_order_acquire);
  if (!l) {
    load_policy();
    if (!(l = g_loaded.load(std::memory_order_acquire))) return {};
  }
  const uint32_t id = thread_state().pending.callsite_id;
  if (id == 0 || id > CallSiteTable::kCapacity) return {};
  uint32_t d = l->decisions[id].load(std::memory_order_relaxed);
  if (d == kUndecided) {
    uint32_t depth = 0;
    const uint64_t* frames = Recorder::instance().callsites().frames(id, &depth);
    if (!frames) return {};
    std::lock_guard<RankedMutex> lock(l->bind_mutex);
    // A stack never seen before may come from a library loaded since the last bind.
    if (l->matcher.unbound_entries() && loader_generation() != l->generation) bind(*l);
    // Decided without the size limit; min_bytes is applied per call below.
    // Never destroyed: threads may still copy while the process exits, and
    // a destroyed object's vtable is its base's (a pure virtual call).
    static const CodeTableNames* names = new CodeTableNames;
    policy::Decision m = l->matcher.decide(kind, frames, depth, UINT64_MAX, names);
    d = m.matched ? kFirstEntry + m.entry : kNoEntry;
    l->decisions[id].store(d, std::memory_order_relaxed);
  }
  if (d < kFirstEntry) return {};
  const policy::Entry& e = l->policy.entries[d - kFirstEntry];
  if (e.site.kind != kind || bytes < e.min_bytes) return {};
  return {true, e.path};
}

}  // namespace cuxfer::shim::rewrite
