#include "analyzer/render/sqlite_writer.h"

#include <sqlite3.h>

#include <optional>
#include <type_traits>
#include <ctime>
#include <string_view>

#include <fmt/format.h>

#include "trace/event.h"

namespace cuxfer::render {

namespace {

// docs/sqlite.md explains every column. calls.class (the report's class name,
// analyses::class_name: "H2D pageable") and calls.cpu_blocked_ns are computed
// columns (not stored): 5 M calls write in under 10 s (docs/benchmarks.md). Times are CLOCK_MONOTONIC nanoseconds
// of the recording host (processes of one host share the clock); bytes are
// bytes. Ids are row numbers of this file, not values from the trace.
constexpr const char* kSchema = R"(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE processes (
  id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, ppid INTEGER NOT NULL, exe TEXT NOT NULL,
  command TEXT NOT NULL, host TEXT, trace_path TEXT NOT NULL, simulated INTEGER NOT NULL,
  cupti_state TEXT NOT NULL, cupti_reason TEXT, complete INTEGER NOT NULL,
  start_realtime_ns INTEGER NOT NULL, start_monotonic_ns INTEGER NOT NULL, stack_depth INTEGER NOT NULL,
  events_dropped INTEGER NOT NULL, gpu_records_dropped INTEGER NOT NULL);
CREATE TABLE call_sites (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL REFERENCES processes(id), name TEXT NOT NULL,
  frame_kind TEXT NOT NULL, module TEXT, symbol TEXT, file TEXT, line INTEGER);
CREATE TABLE call_site_frames (
  call_site INTEGER NOT NULL REFERENCES call_sites(id), depth INTEGER NOT NULL, kind TEXT NOT NULL,
  module TEXT, symbol TEXT, file TEXT, line INTEGER, offset INTEGER, address INTEGER NOT NULL,
  PRIMARY KEY (call_site, depth)) WITHOUT ROWID;
CREATE TABLE calls (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL REFERENCES processes(id), thread INTEGER NOT NULL,
  api TEXT NOT NULL, kind TEXT NOT NULL, direction TEXT NOT NULL, memory TEXT NOT NULL,
  src_kind TEXT NOT NULL, dst_kind TEXT NOT NULL, bytes INTEGER NOT NULL,
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  gpu_ns INTEGER, gpu_records INTEGER NOT NULL, gpu_start_ns INTEGER, gpu_end_ns INTEGER,
  stream INTEGER NOT NULL, device INTEGER, rewrite_path TEXT,
  call_site INTEGER REFERENCES call_sites(id), correlation_id INTEGER NOT NULL,
  async INTEGER NOT NULL, failed INTEGER NOT NULL, per_thread_stream INTEGER NOT NULL,
  runtime_only INTEGER NOT NULL, gpu_expected INTEGER NOT NULL, kind_from_driver INTEGER NOT NULL,
  staged INTEGER NOT NULL, registered INTEGER NOT NULL, shim INTEGER NOT NULL, error INTEGER NOT NULL,
  class TEXT GENERATED ALWAYS AS (direction || ' ' || memory) VIRTUAL,
  cpu_blocked_ns INTEGER GENERATED ALWAYS AS (max(end_ns - start_ns, 0)) VIRTUAL);
CREATE TABLE gpu_records (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL REFERENCES processes(id), kind TEXT NOT NULL,
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, bytes INTEGER NOT NULL, copy_kind INTEGER NOT NULL,
  src_kind TEXT NOT NULL, dst_kind TEXT NOT NULL, stream INTEGER NOT NULL, device INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL, call INTEGER REFERENCES calls(id));
CREATE TABLE findings (
  id INTEGER PRIMARY KEY, finding INTEGER NOT NULL, process INTEGER REFERENCES processes(id),
  kind TEXT NOT NULL, severity TEXT, call_site INTEGER REFERENCES call_sites(id), title TEXT NOT NULL,
  advice TEXT NOT NULL, calls INTEGER NOT NULL, bytes INTEGER NOT NULL, time_ns INTEGER NOT NULL,
  max_ns INTEGER NOT NULL, time_basis TEXT, estimated_recoverable_ns INTEGER, achieved_gbps REAL,
  finding_calls INTEGER NOT NULL, finding_bytes INTEGER NOT NULL, finding_time_ns INTEGER NOT NULL,
  finding_estimated_recoverable_ns INTEGER);
)";

constexpr const char* kIndices = R"(
CREATE INDEX calls_process_site ON calls(process, call_site);
CREATE INDEX calls_start ON calls(start_ns);
)";

// A prepared statement bound by position, reset after each row.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql, std::string& error) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      error = sqlite3_errmsg(db);
      stmt_ = nullptr;
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return stmt_ != nullptr; }

  Statement& i64(int64_t v) {
    sqlite3_bind_int64(stmt_, ++n_, v);
    return *this;
  }
  Statement& u64(uint64_t v) { return i64(static_cast<int64_t>(v)); }
  Statement& real(double v) {
    sqlite3_bind_double(stmt_, ++n_, v);
    return *this;
  }
  Statement& null() {
    sqlite3_bind_null(stmt_, ++n_);
    return *this;
  }
  // The text must live until step(): every caller's does.
  Statement& text(std::string_view v) {
    sqlite3_bind_text(stmt_, ++n_, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    return *this;
  }
  // NULL for an empty string (unknown).
  Statement& text_or_null(std::string_view v) { return v.empty() ? null() : text(v); }
  template <typename T>
  Statement& opt(const std::optional<T>& v) {
    if (!v) return null();
    if constexpr (std::is_floating_point_v<T>) return real(*v);
    else return u64(*v);
  }
  bool step(sqlite3* db, std::string& error) {
    n_ = 0;
    int rc = sqlite3_step(stmt_);
    sqlite3_reset(stmt_);
    if (rc != SQLITE_DONE) {
      error = sqlite3_errmsg(db);
      return false;
    }
    return true;
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int n_ = 0;
};

bool exec(sqlite3* db, const char* sql, std::string& error) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) == SQLITE_OK) return true;
  error = message ? message : sqlite3_errmsg(db);
  sqlite3_free(message);
  return false;
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string join_argv(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

const char* gpu_kind_name(uint8_t kind) {
  switch (static_cast<trace::GpuRecordKind>(kind)) {
    case trace::GpuRecordKind::Memcpy: return "memcpy";
    case trace::GpuRecordKind::Memset: return "memset";
    case trace::GpuRecordKind::Kernel: return "kernel";
    case trace::GpuRecordKind::UnifiedMemory: return "unified_memory";
  }
  return "unknown";
}

// The rewrite's path for the call, as the report counts it; NULL: the app's call as made.
const char* rewrite_path(const model::Call& c) {
  if (c.staged()) return "staged";
  if (c.registered()) return "registered";
  if (c.cls.memory == trace::MemKind::Mapped) return "zero_copy";
  return nullptr;
}

void bind_frame(Statement& s, const symbolize::Frame& f) {
  s.text(f.python ? "python" : "native").text_or_null(f.module).text_or_null(f.function).text_or_null(f.file);
  if (f.line > 0) s.i64(f.line);
  else s.null();
}

class Writer {
 public:
  Writer(sqlite3* db, const model::Job& job, const analyses::Report& report, std::string& error)
      : db_(db), job_(job), report_(report), error_(error) {}

  bool run() {
    return exec(db_, kSchema, error_) && meta() && processes() && sites() && calls() && gpu_records() &&
           findings() && exec(db_, kIndices, error_);
  }

 private:
  bool meta() {
    Statement s(db_, "INSERT INTO meta VALUES (?, ?)", error_);
    if (!s.ok()) return false;
    std::string created = utc_now();
    return s.text("schema").text(kSqliteSchemaVersion).step(db_, error_) &&
           s.text("cuxfer_version").text(CUXFER_VERSION).step(db_, error_) &&
           s.text("created").text(created).step(db_, error_) &&
           s.text("timing").text(report_.timing).step(db_, error_);
  }

  bool processes() {
    Statement s(db_, "INSERT INTO processes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", error_);
    if (!s.ok()) return false;
    for (size_t i = 0; i < job_.processes.size(); ++i) {
      const auto& t = job_.processes[i].trace;
      const analyses::ProcessSummary* sum = i < report_.processes.size() ? &report_.processes[i] : nullptr;
      std::string command = join_argv(t.process.argv);
      s.u64(i).u64(t.process.pid).u64(t.process.ppid).text(t.process.exe).text(command)
          .text_or_null(t.process.hostname).text(t.path).i64(t.status.simulated ? 1 : 0)
          .text(sum ? sum->cupti_state : "unknown").text_or_null(t.status.cupti_reason)
          .i64(t.complete ? 1 : 0).u64(t.process.start_realtime_ns).u64(t.process.start_monotonic_ns)
          .u64(t.process.stack_depth).u64(t.status.events_dropped).u64(t.status.gpu_records_dropped);
      if (!s.step(db_, error_)) return false;
    }
    return true;
  }

  bool sites() {
    Statement site(db_, "INSERT INTO call_sites VALUES (?,?,?,?,?,?,?,?)", error_);
    Statement frame(db_, "INSERT INTO call_site_frames VALUES (?,?,?,?,?,?,?,?,?)", error_);
    if (!site.ok() || !frame.ok()) return false;
    for (size_t i = 0; i < job_.sites.size(); ++i) {
      const model::Site& st = job_.sites[i];
      std::string name = st.frame.display();
      site.u64(i + 1).u64(st.process).text(name);
      bind_frame(site, st.frame);
      if (!site.step(db_, error_)) return false;
      for (size_t d = 0; d < st.stack.size(); ++d) {
        const symbolize::Frame& f = st.stack[d];
        frame.u64(i + 1).u64(d);
        bind_frame(frame, f);
        if (f.python || !f.has_module()) frame.null();
        else frame.u64(f.offset);
        frame.u64(f.address);
        if (!frame.step(db_, error_)) return false;
      }
    }
    return true;
  }

  bool calls() {
    Statement s(db_, "INSERT INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                error_);
    if (!s.ok()) return false;
    uint64_t id = 0;
    for (const auto* list : {&job_.calls, &job_.shim_calls}) {
      bool shim = list == &job_.shim_calls;
      for (const model::Call& c : *list) {
        const trace::Event& e = *c.event;
        const trace::Trace& t = job_.processes[c.process].trace;
        s.u64(id++).u64(c.process).u64(e.thread_id).text(t.api_name(e.api)).text(trace::to_string(c.kind()))
            .text(trace::to_string(c.cls.direction)).text(trace::to_string(c.cls.memory))
            .text(trace::to_string(static_cast<trace::MemKind>(e.src_kind)))
            .text(trace::to_string(static_cast<trace::MemKind>(e.dst_kind))).u64(e.bytes).u64(e.t_enter_ns)
            .u64(e.t_exit_ns);
        if (c.has_gpu_time()) s.u64(c.gpu_ns).u64(c.gpu_records).u64(c.gpu_begin_ns).u64(c.gpu_end_ns);
        else s.null().i64(0).null().null();
        s.u64(e.stream);
        if (e.device >= 0) s.i64(e.device);
        else s.null();
        if (const char* path = rewrite_path(c)) s.text(path);
        else s.null();
        if (c.site != model::kNoSite) s.u64(c.site + 1);
        else s.null();
        s.u64(e.correlation_id)
            .i64((e.flags & trace::kFlagAsync) ? 1 : 0)
            .i64((e.flags & trace::kFlagFailed) ? 1 : 0)
            .i64((e.flags & trace::kFlagPerThreadStream) ? 1 : 0)
            .i64((e.flags & trace::kFlagRuntimeOnly) ? 1 : 0)
            .i64((e.flags & trace::kFlagGpuExpected) ? 1 : 0)
            .i64((e.flags & trace::kFlagKindFromDriver) ? 1 : 0)
            .i64((e.flags & trace::kFlagStaged) ? 1 : 0)
            .i64((e.flags & trace::kFlagRegistered) ? 1 : 0)
            .i64(shim ? 1 : 0)
            .i64(e.result);
        if (!s.step(db_, error_)) return false;
      }
    }
    return true;
  }

  bool gpu_records() {
    Statement s(db_, "INSERT INTO gpu_records VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", error_);
    if (!s.ok()) return false;
    uint64_t id = 0;
    for (size_t p = 0; p < job_.processes.size(); ++p) {
      const model::Process& proc = job_.processes[p];
      const auto& records = proc.trace.gpu_records;
      for (size_t i = 0; i < records.size(); ++i) {
        const trace::GpuRecord& g = records[i];
        s.u64(id++).u64(p).text(gpu_kind_name(g.kind)).u64(g.start_ns).u64(g.end_ns).u64(g.bytes)
            .u64(g.cupti_copy_kind).text(trace::to_string(static_cast<trace::MemKind>(g.src_kind)))
            .text(trace::to_string(static_cast<trace::MemKind>(g.dst_kind))).u64(g.stream_id).u64(g.device)
            .u64(g.correlation_id);
        uint32_t call = i < proc.gpu_record_call.size() ? proc.gpu_record_call[i] : model::kNoCall;
        if (call != model::kNoCall) s.u64(call);
        else s.null();
        if (!s.step(db_, error_)) return false;
      }
    }
    return true;
  }

  bool findings() {
    Statement s(db_, "INSERT INTO findings VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", error_);
    if (!s.ok()) return false;
    uint64_t id = 0;
    for (size_t f = 0; f < report_.findings.size(); ++f) {
      const analyses::Finding& fd = report_.findings[f];
      auto row = [&](const analyses::FindingSite* site) {
        s.u64(id++).u64(f);
        uint32_t site_index = site && site->callsite > 0 ? site->callsite - 1 : model::kNoSite;
        if (site_index < job_.sites.size()) s.u64(job_.sites[site_index].process);
        else s.null();  // the whole job
        s.text(analyses::finding_kind_name(fd.kind)).null();  // cuxfer's findings have no severity
        if (site_index < job_.sites.size()) s.u64(site->callsite);
        else s.null();
        s.text(fd.title).text(fd.advice);
        if (site) {
          s.u64(site->calls).u64(site->bytes).u64(site->time_ns).u64(site->max_ns).text_or_null(fd.time_basis)
              .opt(site->estimated_recoverable_ns).opt(site->achieved_gbps);
        } else {
          s.u64(fd.calls).u64(fd.bytes).u64(fd.time_ns).u64(fd.max_ns).text_or_null(fd.time_basis)
              .opt(fd.estimated_recoverable_ns).opt(fd.achieved_gbps);
        }
        s.u64(fd.calls).u64(fd.bytes).u64(fd.time_ns).opt(fd.estimated_recoverable_ns);
        return s.step(db_, error_);
      };
      if (fd.sites.empty()) {
        if (!row(nullptr)) return false;
      }
      for (const auto& site : fd.sites)
        if (!row(&site)) return false;
    }
    return true;
  }

  sqlite3* db_;
  const model::Job& job_;
  const analyses::Report& report_;
  std::string& error_;
};

}  // namespace

const char* sqlite_schema() { return kSchema; }

bool write_sqlite(const model::Job& job, const analyses::Report& report, const std::string& path,
                  std::string& error) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    error = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return false;
  }
  // A new file under a temporary name: nothing to protect from a crash (the
  // caller renames it only when it is complete), so no journal and no fsync.
  bool ok = exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA page_size=65536;"
                     " PRAGMA cache_size=-262144; PRAGMA temp_store=MEMORY; PRAGMA locking_mode=EXCLUSIVE; BEGIN;", error) &&
            Writer(db, job, report, error).run() && exec(db, "COMMIT;", error);
  if (sqlite3_close(db) != SQLITE_OK && ok) {
    error = "closing the database failed";
    ok = false;
  }
  return ok;
}

}  // namespace cuxfer::render
