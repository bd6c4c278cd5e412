#include "analyzer/render/sqlite_writer.h"

#include <sqlite3.h>

#include <functional>
#include <future>
#include <optional>
#include <unordered_map>
#include <vector>
#include <type_traits>
#include <ctime>
#include <string_view>

#include <fmt/format.h>

#include "trace/event.h"

namespace cuxfer::render {

namespace {

// docs/sqlite.md explains every column. The calls (calls_schema()) are
// written apart: most of their columns are decoded by a view from two stored
// integers, codes and flags, so that a row is 18 bound values, not 32
// (docs/benchmarks.md: 5 M calls). Times are CLOCK_MONOTONIC nanoseconds
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
CREATE TABLE gpu_records (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL REFERENCES processes(id), kind TEXT NOT NULL,
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, bytes INTEGER NOT NULL, copy_kind INTEGER NOT NULL,
  src_kind TEXT NOT NULL, dst_kind TEXT NOT NULL, stream INTEGER NOT NULL, device INTEGER NOT NULL,
  correlation_id INTEGER NOT NULL, call INTEGER REFERENCES call_rows(id));
CREATE TABLE nvtx_ranges (
  id INTEGER PRIMARY KEY, path TEXT NOT NULL, name TEXT NOT NULL, depth INTEGER NOT NULL);
CREATE TABLE nvtx_range_names (
  nvtx_range INTEGER NOT NULL REFERENCES nvtx_ranges(id), depth INTEGER NOT NULL, name TEXT NOT NULL,
  PRIMARY KEY (nvtx_range, depth)) WITHOUT ROWID;
CREATE TABLE findings (
  id INTEGER PRIMARY KEY, finding INTEGER NOT NULL, process INTEGER REFERENCES processes(id),
  kind TEXT NOT NULL, severity TEXT, call_site INTEGER REFERENCES call_sites(id), title TEXT NOT NULL,
  advice TEXT NOT NULL, calls INTEGER NOT NULL, bytes INTEGER NOT NULL, time_ns INTEGER NOT NULL,
  max_ns INTEGER NOT NULL, time_basis TEXT, estimated_recoverable_ns INTEGER, achieved_gbps REAL,
  finding_calls INTEGER NOT NULL, finding_bytes INTEGER NOT NULL, finding_time_ns INTEGER NOT NULL,
  finding_estimated_recoverable_ns INTEGER);
)";

// Created before the rows go in: calls arrive in start_ns order (an append
// to the index). Building them afterwards sorts every key in SQLite's
// sorter, whose merge chases pointers through the whole key set: superlinear
// (5 M calls: 14 s). No index on call_rows(process, call_site): maintained row by
// row it cost 6.5 s of CPU at 5 M calls (a B-tree descent to one of a few
// hundred insertion points per row), as much as everything else; queries
// grouped by site scan the table anyway, and docs/sqlite.md gives the one
// line that adds it for point lookups.
constexpr const char* kIndices = R"(
CREATE INDEX call_rows_start ON call_rows(start_ns);
CREATE INDEX gpu_records_call ON gpu_records(call);
)";

// call_rows.codes, bit by bit: the text columns' values, decoded by the view's
// CASE expressions below (written from the same to_string()s).
constexpr int kKindShift = 0, kDirectionShift = 8, kMemoryShift = 16, kSrcShift = 24, kDstShift = 32,
              kRewriteShift = 40, kShimShift = 42, kApiShift = 43;

std::string quote(std::string_view v) {
  std::string out = "'";
  for (char ch : v) {
    if (ch == '\'') out += '\'';
    out += ch;
  }
  return out + "'";
}

// CASE (codes >> shift) & 255 WHEN n THEN 'name' ... ELSE 'unknown' END over
// every byte value `name_of` names (the rest are "unknown" as to_string says).
template <typename F>
std::string byte_case(int shift, F name_of) {
  std::string out = fmt::format("CASE (codes >> {}) & 255", shift);
  for (int v = 0; v < 256; ++v) {
    std::string_view name = name_of(static_cast<uint8_t>(v));
    if (name != "unknown") out += fmt::format(" WHEN {} THEN {}", v, quote(name));
  }
  return out + " ELSE 'unknown' END";
}

// The calls: a table of the stored values (call_rows) and the view `calls`
// that decodes them. The view, not generated columns: SQLite computes every
// generated column, virtual ones too, on each INSERT (+0.8 s per million rows,
// a third of the 5 M export, docs/benchmarks.md); a view costs nothing to
// write and reads the same. api is the job's API names, interned: codes >> 43
// indexes `apis`.
std::string calls_schema(const std::vector<std::string>& apis) {
  std::string api = fmt::format("CASE codes >> {}", kApiShift);
  for (size_t i = 0; i < apis.size(); ++i) api += fmt::format(" WHEN {} THEN {}", i, quote(apis[i]));
  api += " END";
  if (apis.empty()) api = "CAST(NULL AS TEXT)";
  auto flag = [](int bit) { return fmt::format("(flags >> {}) & 1", bit); };
  auto bit = [](uint8_t mask) {
    int b = 0;
    while (!(mask & (1u << b))) ++b;
    return b;
  };
  auto mem = [](uint8_t v) { return std::string_view(trace::to_string(static_cast<trace::MemKind>(v))); };
  const std::string direction = byte_case(kDirectionShift, [](uint8_t v) {
    return std::string_view(trace::to_string(static_cast<trace::Direction>(v)));
  });
  const std::string memory = byte_case(kMemoryShift, mem);
  return fmt::format(R"(
CREATE TABLE call_rows (
  id INTEGER PRIMARY KEY, process INTEGER NOT NULL REFERENCES processes(id), thread INTEGER NOT NULL,
  bytes INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  gpu_ns INTEGER, gpu_records INTEGER NOT NULL, gpu_start_ns INTEGER, gpu_end_ns INTEGER,
  stream INTEGER NOT NULL, device INTEGER, call_site INTEGER REFERENCES call_sites(id),
  correlation_id INTEGER NOT NULL, error INTEGER NOT NULL, flags INTEGER NOT NULL, codes INTEGER NOT NULL,
  nvtx_range INTEGER REFERENCES nvtx_ranges(id));
CREATE VIEW calls AS SELECT
  id, process, thread,
  {api} AS api,
  {kind} AS kind,
  {direction} AS direction,
  {memory} AS memory,
  {src} AS src_kind,
  {dst} AS dst_kind,
  bytes, start_ns, end_ns, gpu_ns, gpu_records, gpu_start_ns, gpu_end_ns, stream, device,
  CASE (codes >> {rw}) & 3 WHEN 1 THEN 'staged' WHEN 2 THEN 'registered' WHEN 3 THEN 'zero_copy' END AS rewrite_path,
  call_site, correlation_id,
  {async_} AS async,
  {failed} AS failed,
  {ptds} AS per_thread_stream,
  {runtime_only} AS runtime_only,
  {gpu_expected} AS gpu_expected,
  {kind_from_driver} AS kind_from_driver,
  {staged} AS staged,
  {registered} AS registered,
  (codes >> {shim}) & 1 AS shim,
  error,
  ({direction}) || ' ' || ({memory}) AS class,
  max(end_ns - start_ns, 0) AS cpu_blocked_ns,
  flags, codes, nvtx_range
FROM call_rows;
)",
      fmt::arg("api", api),
      fmt::arg("kind", byte_case(kKindShift, [](uint8_t v) { return std::string_view(trace::to_string(static_cast<trace::EventKind>(v))); })),
      fmt::arg("direction", direction), fmt::arg("memory", memory), fmt::arg("src", byte_case(kSrcShift, mem)),
      fmt::arg("dst", byte_case(kDstShift, mem)), fmt::arg("rw", kRewriteShift), fmt::arg("shim", kShimShift),
      fmt::arg("async_", flag(bit(trace::kFlagAsync))), fmt::arg("failed", flag(bit(trace::kFlagFailed))),
      fmt::arg("ptds", flag(bit(trace::kFlagPerThreadStream))),
      fmt::arg("runtime_only", flag(bit(trace::kFlagRuntimeOnly))),
      fmt::arg("gpu_expected", flag(bit(trace::kFlagGpuExpected))),
      fmt::arg("kind_from_driver", flag(bit(trace::kFlagKindFromDriver))),
      fmt::arg("staged", flag(bit(trace::kFlagStaged))), fmt::arg("registered", flag(bit(trace::kFlagRegistered))));
}

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
  // SQLite copies the text (SQLITE_TRANSIENT): a caller's temporary (a
  // conditional's std::string) is gone by step(), which AddressSanitizer
  // caught as a read after its scope.
  Statement& text(std::string_view v) {
    sqlite3_bind_text(stmt_, ++n_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
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

void bind_frame(Statement& s, const symbolize::Frame& f) {
  s.text(f.python ? "python" : "native").text_or_null(f.module).text_or_null(f.function).text_or_null(f.file);
  if (f.line > 0) s.i64(f.line);
  else s.null();
}

class Writer {
 public:
  // `report` is asked for only after the calls and GPU records are written:
  // the report may still be being computed on the other core meanwhile.
  Writer(sqlite3* db, const model::Job& job, std::function<const analyses::Report&()> report, std::string& error)
      : db_(db), job_(job), get_report_(std::move(report)), error_(error) {}

  bool run() {
    if (!(exec(db_, kSchema, error_) && exec(db_, calls_schema(intern_apis()).c_str(), error_) &&
          exec(db_, kIndices, error_) && nvtx_ranges() && calls() && gpu_records() && sites()))
      return false;
    report_ = &get_report_();
    return meta() && processes() && findings();
  }

 private:
  bool meta() {
    Statement s(db_, "INSERT INTO meta VALUES (?, ?)", error_);
    if (!s.ok()) return false;
    std::string created = utc_now();
    return s.text("schema").text(kSqliteSchemaVersion).step(db_, error_) &&
           s.text("cuxfer_version").text(CUXFER_VERSION).step(db_, error_) &&
           s.text("created").text(created).step(db_, error_) &&
           s.text("timing").text(report_->timing).step(db_, error_);
  }

  bool processes() {
    Statement s(db_, "INSERT INTO processes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", error_);
    if (!s.ok()) return false;
    for (size_t i = 0; i < job_.processes.size(); ++i) {
      const auto& t = job_.processes[i].trace;
      const analyses::ProcessSummary* sum = i < report_->processes.size() ? &report_->processes[i] : nullptr;
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

  // The job's API names, each once; api_code_[process][trace api id] indexes them.
  std::vector<std::string> intern_apis() {
    std::vector<std::string> names;
    std::unordered_map<std::string, uint64_t> index;
    api_code_.resize(job_.processes.size());
    for (size_t p = 0; p < job_.processes.size(); ++p) {
      const trace::Trace& t = job_.processes[p].trace;
      // Every id an event may carry: api_name() answers "?" past the table.
      for (size_t id = 0; id <= t.api_names.size(); ++id) {
        std::string name = t.api_name(static_cast<uint16_t>(id));
        auto [it, added] = index.emplace(name, names.size());
        if (added) names.push_back(name);
        api_code_[p].push_back(it->second);
      }
    }
    return names;
  }

  uint64_t api_code(uint32_t process, uint16_t api) const {
    const auto& codes = api_code_[process];
    return codes[api < codes.size() ? api : codes.size() - 1];
  }

  // One call's 18 stored values (calls_schema(): the rest are computed).
  // `range`: its NVTX range stack (Job::call_ranges), kNoRange for none.
  void bind_call(Statement& s, uint64_t id, const model::Call& c, bool shim, uint32_t range) {
    const trace::Event& e = *c.event;
    uint64_t rewrite = c.staged() ? 1 : c.registered() ? 2 : c.cls.memory == trace::MemKind::Mapped ? 3 : 0;
    uint64_t codes = uint64_t{e.kind} << kKindShift |
                     uint64_t{static_cast<uint8_t>(c.cls.direction)} << kDirectionShift |
                     uint64_t{static_cast<uint8_t>(c.cls.memory)} << kMemoryShift |
                     uint64_t{static_cast<uint8_t>(e.src_kind)} << kSrcShift |
                     uint64_t{static_cast<uint8_t>(e.dst_kind)} << kDstShift | rewrite << kRewriteShift |
                     uint64_t{shim ? 1u : 0u} << kShimShift | api_code(c.process, e.api) << kApiShift;
    s.u64(id).u64(c.process).u64(e.thread_id).u64(e.bytes).u64(e.t_enter_ns).u64(e.t_exit_ns);
    if (c.has_gpu_time()) s.u64(c.gpu_ns).u64(c.gpu_records).u64(c.gpu_begin_ns).u64(c.gpu_end_ns);
    else s.null().i64(0).null().null();
    s.u64(e.stream);
    if (e.device >= 0) s.i64(e.device);
    else s.null();
    if (c.site != model::kNoSite) s.u64(c.site + 1);
    else s.null();
    s.u64(e.correlation_id).i64(e.result).u64(e.flags).u64(codes);
    if (range != model::kNoRange) s.u64(range);
    else s.null();
  }

  bool calls() {
    // kBatch rows per statement: SQLite's per-statement work (step, reset)
    // paid once per batch; the remainder one row at a time.
    constexpr int kBatch = 64;
    const std::string row = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    const std::string head = "INSERT INTO call_rows (id, process, thread, bytes, start_ns, end_ns, gpu_ns, gpu_records,"
                             " gpu_start_ns, gpu_end_ns, stream, device, call_site, correlation_id, error, flags,"
                             " codes, nvtx_range) VALUES ";
    std::string many = head + row;
    for (int i = 1; i < kBatch; ++i) many += "," + row;
    Statement one(db_, (head + row).c_str(), error_);
    if (!one.ok()) return false;
    Statement batch(db_, many.c_str(), error_);
    if (!batch.ok()) return false;
    uint64_t id = 0;
    for (const auto* list : {&job_.calls, &job_.shim_calls}) {
      bool shim = list == &job_.shim_calls;
      const size_t n = list->size();
      size_t i = 0;
      // The shim's own events run in no range of the app's.
      auto range = [&](size_t k) { return shim ? model::kNoRange : job_.range_of(k); };
      for (; i + kBatch <= n; i += kBatch) {
        for (int k = 0; k < kBatch; ++k) bind_call(batch, id++, (*list)[i + k], shim, range(i + k));
        if (!batch.step(db_, error_)) return false;
      }
      for (; i < n; ++i) {
        bind_call(one, id++, (*list)[i], shim, range(i));
        if (!one.step(db_, error_)) return false;
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

  // NVTX range stacks (Job::ranges): one row each, and its names by depth.
  bool nvtx_ranges() {
    Statement r(db_, "INSERT INTO nvtx_ranges VALUES (?,?,?,?)", error_);
    Statement n(db_, "INSERT INTO nvtx_range_names VALUES (?,?,?)", error_);
    if (!r.ok() || !n.ok()) return false;
    for (size_t i = 0; i < job_.ranges.size(); ++i) {
      const auto& names = job_.ranges[i].names;
      if (!r.u64(i).text(job_.ranges[i].path()).text(names.empty() ? std::string() : names.back())
               .u64(names.size()).step(db_, error_))
        return false;
      for (size_t d = 0; d < names.size(); ++d)
        if (!n.u64(i).u64(d + 1).text(names[d]).step(db_, error_)) return false;
    }
    return true;
  }

  bool findings() {
    Statement s(db_, "INSERT INTO findings VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", error_);
    if (!s.ok()) return false;
    uint64_t id = 0;
    for (size_t f = 0; f < report_->findings.size(); ++f) {
      const analyses::Finding& fd = report_->findings[f];
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

  std::vector<std::vector<uint64_t>> api_code_;
  sqlite3* db_;
  const model::Job& job_;
  std::function<const analyses::Report&()> get_report_;
  const analyses::Report* report_ = nullptr;
  std::string& error_;
};

}  // namespace

std::string sqlite_schema() { return kSchema + calls_schema({"cudaMemcpy"}) + kIndices; }

namespace {

bool write(const model::Job& job, std::function<const analyses::Report&()> report, const std::string& path,
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
            Writer(db, job, std::move(report), error).run() && exec(db, "COMMIT;", error);
  if (sqlite3_close(db) != SQLITE_OK && ok) {
    error = "closing the database failed";
    ok = false;
  }
  return ok;
}

}  // namespace

bool write_sqlite(const model::Job& job, const analyses::Report& report, const std::string& path,
                  std::string& error) {
  return write(job, [&]() -> const analyses::Report& { return report; }, path, error);
}

bool write_sqlite(const model::Job& job, const std::string& path, std::string& error) {
  // analyze() reads the job as the writer does (both only read it): it runs
  // on the other core while the calls go in.
  std::future<analyses::Report> pending = std::async(std::launch::async, [&job] { return analyses::analyze(job); });
  std::optional<analyses::Report> report;
  return write(job, [&]() -> const analyses::Report& {
    if (!report) report = pending.get();
    return *report;
  }, path, error);
}

}  // namespace cuxfer::render
