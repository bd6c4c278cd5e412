#include "trace/records.h"

#include <cstring>

namespace cuxfer::trace {
namespace {

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_str(std::string& out, std::string_view s) {
  put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out.append(s.data(), s.size());
}

// Bounds-checked cursor over untrusted bytes.
class Cursor {
 public:
  explicit Cursor(std::string_view in) : in_(in) {}
  template <typename T>
  bool get(T& v) {
    if (in_.size() - pos_ < sizeof v) return false;
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return true;
  }
  bool get_str(std::string& s) {
    uint32_t n = 0;
    if (!get(n) || in_.size() - pos_ < n) return false;
    s.assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  // A count read from the file may not promise more items than bytes remain.
  bool get_count(uint32_t& n, size_t min_item_bytes) {
    return get(n) && static_cast<uint64_t>(n) * min_item_bytes <= in_.size() - pos_;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace

void encode(const ProcessInfo& p, std::string& out) {
  put(out, p.pid);
  put(out, p.ppid);
  put(out, p.start_realtime_ns);
  put(out, p.start_monotonic_ns);
  put_str(out, p.exe);
  put<uint32_t>(out, static_cast<uint32_t>(p.argv.size()));
  for (const auto& a : p.argv) put_str(out, a);
  put_str(out, p.hostname);
  put_str(out, p.trace_name);
  put_str(out, p.cuxfer_version);
  put(out, p.stack_depth);
}

bool decode(std::string_view in, ProcessInfo& p) {
  Cursor c(in);
  uint32_t argc = 0;
  if (!c.get(p.pid) || !c.get(p.ppid) || !c.get(p.start_realtime_ns) ||
      !c.get(p.start_monotonic_ns) || !c.get_str(p.exe) || !c.get_count(argc, 4))
    return false;
  p.argv.resize(argc);
  for (auto& a : p.argv)
    if (!c.get_str(a)) return false;
  return c.get_str(p.hostname) && c.get_str(p.trace_name) && c.get_str(p.cuxfer_version) &&
         c.get(p.stack_depth) && c.done();
}

void encode(const std::vector<ModuleInfo>& m, std::string& out) {
  put<uint32_t>(out, static_cast<uint32_t>(m.size()));
  for (const auto& x : m) {
    put(out, x.base);
    put(out, x.low);
    put(out, x.high);
    put_str(out, x.path);
    put_str(out, x.build_id);
  }
}

bool decode(std::string_view in, std::vector<ModuleInfo>& m) {
  Cursor c(in);
  uint32_t n = 0;
  if (!c.get_count(n, 32)) return false;
  for (uint32_t i = 0; i < n; ++i) {
    ModuleInfo x;
    if (!c.get(x.base) || !c.get(x.low) || !c.get(x.high) || !c.get_str(x.path) ||
        !c.get_str(x.build_id))
      return false;
    m.push_back(std::move(x));
  }
  return c.done();
}

void encode(const std::vector<CallSite>& v, std::string& out) {
  put<uint32_t>(out, static_cast<uint32_t>(v.size()));
  for (const auto& s : v) {
    put(out, s.id);
    put<uint32_t>(out, static_cast<uint32_t>(s.frames.size()));
    for (uint64_t f : s.frames) put(out, f);
  }
}

bool decode(std::string_view in, std::vector<CallSite>& v) {
  Cursor c(in);
  uint32_t n = 0;
  if (!c.get_count(n, 8)) return false;
  for (uint32_t i = 0; i < n; ++i) {
    CallSite s;
    uint32_t depth = 0;
    if (!c.get(s.id) || !c.get_count(depth, 8)) return false;
    s.frames.resize(depth);
    for (auto& f : s.frames)
      if (!c.get(f)) return false;
    v.push_back(std::move(s));
  }
  return c.done();
}

void encode(const std::vector<PyCode>& v, std::string& out) {
  put<uint32_t>(out, static_cast<uint32_t>(v.size()));
  for (const auto& c : v) {
    put(out, c.id);
    put(out, c.version);
    put(out, c.first_line);
    put_str(out, c.filename);
    put_str(out, c.qualname);
    put_str(out, c.line_table);
  }
}

bool decode(std::string_view in, std::vector<PyCode>& v) {
  Cursor c(in);
  uint32_t n = 0;
  if (!c.get_count(n, 24)) return false;
  for (uint32_t i = 0; i < n; ++i) {
    PyCode x;
    if (!c.get(x.id) || !c.get(x.version) || !c.get(x.first_line) || !c.get_str(x.filename) ||
        !c.get_str(x.qualname) || !c.get_str(x.line_table))
      return false;
    v.push_back(std::move(x));
  }
  return c.done();
}

void encode(const RunModes& m, std::string& out) {
  put<uint8_t>(out, m.rewrite_pin ? 1 : 0);
  put<uint8_t>(out, m.policy ? 1 : 0);
  put<uint8_t>(out, m.register_in_place ? 1 : 0);
  put<uint8_t>(out, m.python_stacks ? 1 : 0);
  put_str(out, m.policy_path);
}

bool decode(std::string_view in, RunModes& m) {
  Cursor c(in);
  uint8_t pin = 0, policy = 0, reg = 0, py = 0;
  if (!c.get(pin) || !c.get(policy) || !c.get(reg) || !c.get(py) || !c.get_str(m.policy_path) || !c.done())
    return false;
  m.rewrite_pin = pin != 0;
  m.policy = policy != 0;
  m.register_in_place = reg != 0;
  m.python_stacks = py != 0;
  return true;
}

const char* gate_reason_name(GateReason r) {
  switch (r) {
    case GateReason::Start: return "start";
    case GateReason::AsyncCopies: return "async_copies";
    case GateReason::SyncOnly: return "sync_only";
    case GateReason::Sample: return "sample";
    case GateReason::CostCap: return "cost_cap";
    case GateReason::Stop: return "stop";
    case GateReason::Paused: return "paused";
    case GateReason::Repeats: return "repeats";
  }
  return "?";
}

void encode(const std::vector<CuptiGateChange>& g, std::string& out) {
  put<uint32_t>(out, static_cast<uint32_t>(g.size()));
  for (const auto& c : g) {
    put(out, c.t_ns);
    put<uint8_t>(out, c.on ? 1 : 0);
    put<uint8_t>(out, static_cast<uint8_t>(c.reason));
  }
}

bool decode(std::string_view in, std::vector<CuptiGateChange>& g) {
  Cursor c(in);
  uint32_t n = 0;
  if (!c.get_count(n, 10)) return false;
  std::vector<CuptiGateChange> got;
  for (uint32_t i = 0; i < n; ++i) {
    CuptiGateChange x;
    uint8_t on = 0, reason = 0;
    if (!c.get(x.t_ns) || !c.get(on) || !c.get(reason) || on > 1 || reason >= kGateReasonCount) return false;
    x.on = on != 0;
    x.reason = static_cast<GateReason>(reason);
    got.push_back(x);
  }
  if (!c.done()) return false;
  g.insert(g.end(), got.begin(), got.end());
  return true;
}

void encode(const std::vector<NvtxName>& v, std::string& out) {
  put<uint32_t>(out, static_cast<uint32_t>(v.size()));
  for (const auto& n : v) {
    put(out, n.id);
    put_str(out, n.domain);
    put_str(out, n.message);
  }
}

bool decode(std::string_view in, std::vector<NvtxName>& v) {
  Cursor c(in);
  uint32_t n = 0;
  if (!c.get_count(n, 12)) return false;
  std::vector<NvtxName> got;
  for (uint32_t i = 0; i < n; ++i) {
    NvtxName x;
    if (!c.get(x.id) || !c.get_str(x.domain) || !c.get_str(x.message)) return false;
    got.push_back(std::move(x));
  }
  if (!c.done()) return false;
  v.insert(v.end(), got.begin(), got.end());
  return true;
}

void encode(const Status& s, std::string& out) {
  put<uint8_t>(out, s.simulated ? 1 : 0);
  put<uint8_t>(out, static_cast<uint8_t>(s.cupti));
  put_str(out, s.cupti_reason);
  put(out, s.events_recorded);
  put(out, s.events_dropped);
  put(out, s.gpu_records_recorded);
  put(out, s.gpu_records_dropped);
  put(out, s.callsites_dropped);
}

bool decode(std::string_view in, Status& s) {
  Cursor c(in);
  uint8_t sim = 0, cupti = 0;
  if (!c.get(sim) || !c.get(cupti) || !c.get_str(s.cupti_reason) || !c.get(s.events_recorded) ||
      !c.get(s.events_dropped) || !c.get(s.gpu_records_recorded) ||
      !c.get(s.gpu_records_dropped) || !c.get(s.callsites_dropped) || !c.done())
    return false;
  if (cupti > static_cast<uint8_t>(CuptiState::Unavailable)) return false;
  s.simulated = sim != 0;
  s.cupti = static_cast<CuptiState>(cupti);
  return true;
}

void encode(const CuptiHandover& h, std::string& out) {
  put(out, h.t_ns);
  put_str(out, h.reason);
}

bool decode(std::string_view in, CuptiHandover& h) {
  Cursor c(in);
  return c.get(h.t_ns) && c.get_str(h.reason) && c.done();
}

void encode_strings(const std::vector<std::string>& v, std::string& out) {
  put<uint32_t>(out, static_cast<uint32_t>(v.size()));
  for (const auto& s : v) put_str(out, s);
}

bool decode_strings(std::string_view in, std::vector<std::string>& v) {
  Cursor c(in);
  uint32_t n = 0;
  if (!c.get_count(n, 4)) return false;
  for (uint32_t i = 0; i < n; ++i) {
    std::string s;
    if (!c.get_str(s)) return false;
    v.push_back(std::move(s));
  }
  return c.done();
}

}  // namespace cuxfer::trace
