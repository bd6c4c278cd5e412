#include "analyzer/render/json_renderer.h"

#include <algorithm>
#include <set>

namespace cuxfer::render {
namespace {

using nlohmann::json;

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json frame_json(const symbolize::Frame& f) {
  return {{"address", f.address},   {"module", f.module}, {"offset", f.offset},
          {"function", f.function}, {"file", f.file},     {"line", f.line},
          {"python", f.python}};
}

json alloc_json(const analyses::AllocTotals& a) {
  return {{"calls", a.calls}, {"bytes", a.bytes}, {"cpu_blocked_ns", a.cpu_blocked_ns}, {"frees", a.frees}};
}

json cupti_json(const analyses::ProcessSummary& p) {
  json j = {{"state", p.cupti_state}, {"reason", p.cupti_reason}};
  if (p.cupti_handover_s >= 0)
    j["handover"] = {{"at_s", p.cupti_handover_s}, {"reason", p.cupti_handover_reason}};
  const model::GateStats& g = p.cupti_gate;
  if (g.governed)
    j["copy_records"] = {{"governed", true},
                         {"on_share", g.on_share},
                         {"changes", g.changes},
                         {"samples", g.samples},
                         {"copies", g.calls},
                         {"copies_with_gpu_time", g.timed},
                         {"sync_copies_records_off", g.untimed_sync},
                         {"async_copies_records_off", g.untimed_async},
                         {"async_copies_records_off_sites_timed", g.untimed_repeats}};
  return j;
}

// Per rank and the spread (null unless the job has two ranks or more).
json ranks_json(const analyses::Ranks& r) {
  if (r.ranks.empty()) return nullptr;
  json ranks = json::array();
  for (const auto& k : r.ranks) {
    json classes = json::array(), findings = json::array();
    for (const auto& c : k.classes) classes.push_back({{"class", c.cls}, {"calls", c.calls}, {"bytes", c.bytes}});
    for (const auto& f : k.findings)
      findings.push_back({{"kind", f.kind}, {"calls", f.calls}, {"bytes", f.bytes}, {"time_ns", f.time_ns}});
    ranks.push_back({{"rank", k.rank},
                     {"host", k.host},
                     {"pids", k.pids},
                     {"launcher", k.launcher},
                     {"copies", k.copies},
                     {"bytes", k.bytes},
                     {"pageable_bytes", k.pageable_bytes},
                     {"cpu_blocked_ns", k.cpu_blocked_ns},
                     {"gpu_ns", opt(k.gpu_ns)},
                     {"failed_calls", k.failed_calls},
                     {"classes", std::move(classes)},
                     {"findings", std::move(findings)}});
  }
  const analyses::RankSpread& s = *r.spread;
  return {{"ranks", std::move(ranks)},
          {"unranked_processes", r.unranked_processes},
          {"spread",
           {{"most_bytes", {{"rank", s.most_bytes_rank}, {"bytes", s.most_bytes}}},
            {"most_pageable", {{"rank", s.most_pageable_rank}, {"bytes", s.most_pageable_bytes}}},
            {"slowest", {{"rank", s.slowest_rank}, {"cpu_blocked_ns", s.slowest_cpu_blocked_ns}}},
            {"bytes_imbalance", opt(s.bytes_imbalance)},
            {"pageable_imbalance", opt(s.pageable_imbalance)},
            {"cpu_blocked_imbalance", opt(s.cpu_blocked_imbalance)}}}};
}

}  // namespace

json report_to_json(const analyses::Report& r, const JsonOptions& options) {
  json j;
  j["schema"] = r.schema;
  j["simulated"] = r.simulated;
  j["timing"] = r.timing;
  j["program"] = r.program;
  j["argv"] = r.argv;
  j["start_realtime_ns"] = r.start_realtime_ns;
  j["span_ns"] = r.span_ns;

  json processes = json::array();
  for (const auto& p : r.processes) {
    processes.push_back({
        {"pid", p.pid},
        {"ppid", p.ppid},
        {"exe", p.exe},
        {"argv", p.argv},
        {"hostname", p.hostname},
        {"trace", p.trace_path},
        {"trace_name", p.trace_name},
        {"cuxfer_version", p.cuxfer_version},
        {"start_realtime_ns", p.start_realtime_ns},
        {"complete", p.complete},
        {"cut_reason", p.cut_reason},
        {"cupti", cupti_json(p)},
        {"simulated", p.simulated},
        {"stack_depth", p.stack_depth},
        {"events", p.events},
        {"events_dropped", p.events_dropped},
        {"gpu_records", p.gpu_records},
        {"gpu_records_dropped", p.gpu_records_dropped},
        {"gpu_records_unmatched", p.gpu_records_unmatched},
        {"gpu_records_joined_by_time", p.gpu_records_joined_by_time},
        {"events_without_gpu_record", p.events_without_gpu},
        {"callsites_dropped", p.callsites_dropped},
        {"copies", p.copies},
        {"bytes", p.bytes},
        {"cpu_blocked_ns", p.cpu_blocked_ns},
        {"failed_calls", p.failed_calls},
        {"notes", p.notes},
    });
  }
  j["processes"] = std::move(processes);

  j["totals"] = {{"calls", r.totals.calls},
                 {"bytes", r.totals.bytes},
                 {"cpu_blocked_ns", r.totals.cpu_blocked_ns},
                 {"failed_calls", r.totals.failed_calls}};
  j["failed_calls"] = r.totals.failed_calls;

  json classes = json::array();
  for (const auto& c : r.classes) {
    classes.push_back({
        {"direction", trace::to_string(c.cls.direction)},
        {"memory", trace::to_string(c.cls.memory)},
        {"calls", c.calls},
        {"bytes", c.bytes},
        {"cpu_blocked_ns", c.cpu_blocked_ns},
        {"gpu_ns", opt(c.gpu_ns)},
        {"gbps", opt(c.gbps)},
        {"gbps_basis", c.gbps_basis.empty() ? json(nullptr) : json(c.gbps_basis)},
        {"gpu_calls", c.gpu_calls},
        {"async_calls", c.async_calls},
        {"failed_calls", c.failed_calls},
        {"staged_calls", c.staged_calls},
        {"staged_bytes", c.staged_bytes},
    });
  }
  j["classes"] = std::move(classes);

  j["memsets"] = {{"calls", r.memsets.calls},
                  {"bytes", r.memsets.bytes},
                  {"cpu_blocked_ns", r.memsets.cpu_blocked_ns},
                  {"failed_calls", r.memsets.failed_calls}};
  j["allocations"] = {{"device", alloc_json(r.allocations.device)},
                      {"managed", alloc_json(r.allocations.managed)},
                      {"host_pinned", alloc_json(r.allocations.host_pinned)},
                      {"host_registered", alloc_json(r.allocations.host_registered)}};

  json apis = json::array();
  for (const auto& a : r.apis)
    apis.push_back({{"name", a.name},
                    {"calls", a.calls},
                    {"bytes", a.bytes},
                    {"cpu_blocked_ns", a.cpu_blocked_ns},
                    {"failed_calls", a.failed_calls}});
  j["apis"] = std::move(apis);

  j["pageable_share"] = {{"pageable_bytes", r.pageable_share.pageable_bytes},
                         {"host_bytes", r.pageable_share.host_bytes},
                         {"fraction", r.pageable_share.fraction}};
  const auto& rw = r.rewrite;
  nlohmann::json reasons = nlohmann::json::array();
  for (const auto& p : rw.passthrough_reasons)
    reasons.push_back({{"reason", p.reason},
                       {"direction", p.direction.empty() ? nlohmann::json() : nlohmann::json(p.direction)},
                       {"threshold_bytes", p.threshold_bytes ? nlohmann::json(*p.threshold_bytes) : nlohmann::json()},
                       {"text", p.text},
                       {"calls", p.calls},
                       {"bytes", p.bytes}});
  j["rewrite"] = {{"active", rw.active},
                  {"staged_calls", rw.staged_calls},
                  {"staged_bytes", rw.staged_bytes},
                  {"staged_cpu_ns", rw.staged_cpu_ns},
                  {"staged_if_pinned_at_source_ns", rw.staged_if_pinned_ns},
                  {"pinned_basis", rw.pinned_basis},
                  {"registered_calls", rw.registered_calls},
                  {"registered_bytes", rw.registered_bytes},
                  {"passthrough_pageable_calls", rw.passthrough_pageable_calls},
                  {"passthrough_pageable_bytes", rw.passthrough_pageable_bytes},
                  {"passthrough_reasons", std::move(reasons)},
                  {"pool_allocations", rw.pool_allocations},
                  {"pool_bytes", rw.pool_bytes},
                  {"pinning_cost_ns", rw.pinning_cost_ns},
                  {"registrations", rw.registrations},
                  {"registration_bytes", rw.registration_bytes},
                  {"registration_cost_ns", rw.registration_cost_ns},
                  {"registrations_refused", rw.registrations_refused},
                  {"zero_copy_allocations", rw.zero_copy_allocations},
                  {"zero_copy_allocation_bytes", rw.zero_copy_allocation_bytes},
                  {"zero_copy_calls", rw.zero_copy_calls},
                  {"zero_copy_bytes", rw.zero_copy_bytes}};
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : r.overlap.devices)
    devices.push_back({{"pid", d.pid},
                       {"device", d.device},
                       {"kernels", d.kernels},
                       {"kernel_busy_ns", d.kernel_busy_ns},
                       {"dma_ns", d.dma_ns},
                       {"dma_under_kernels_ns", d.dma_under_kernels_ns},
                       {"sync_copy_ns", d.sync_copy_ns},
                       {"sync_copy_idle_ns", d.sync_copy_idle_ns}});
  j["overlap"] = {{"kernels_recorded", r.overlap.kernels_recorded}, {"devices", std::move(devices)}};
  auto managed_json = [](const analyses::ManagedTotals& t) {
    return nlohmann::json{{"allocations", t.allocations},         {"allocated_bytes", t.allocated_bytes},
                          {"htod_bytes", t.htod_bytes},           {"dtoh_bytes", t.dtoh_bytes},
                          {"htod_migrations", t.htod_migrations}, {"dtoh_migrations", t.dtoh_migrations},
                          {"on_demand_bytes", t.on_demand_bytes}, {"prefetched_bytes", t.prefetched_bytes},
                          {"migration_ns", t.migration_ns},       {"on_demand_ns", t.on_demand_ns},
                          {"gpu_fault_groups", t.gpu_fault_groups}, {"cpu_faults", t.cpu_faults}};
  };
  nlohmann::json managed_sites = nlohmann::json::array();
  for (const auto& s : r.managed.sites) {
    auto e = managed_json(s);
    e["pid"] = s.pid;
    e["callsite"] = s.callsite;
    e["location"] = s.callsite ? json(s.frame.display()) : json(nullptr);
    managed_sites.push_back(std::move(e));
  }
  json pairs = json::array();
  for (const auto& p : r.peer_pairs)
    pairs.push_back({{"pid", p.pid},
                     {"src_device", p.src_device},
                     {"dst_device", p.dst_device},
                     {"calls", p.calls},
                     {"bytes", p.bytes},
                     {"cpu_blocked_ns", p.cpu_blocked_ns},
                     {"gpu_ns", p.gpu_ns ? json(*p.gpu_ns) : json(nullptr)}});
  j["peer_pairs"] = std::move(pairs);
  j["managed"] = {{"records_on", r.managed.records_on},
                  {"unavailable", r.managed.unavailable},
                  {"total", managed_json(r.managed.total)},
                  {"sites", std::move(managed_sites)}};
  json per_device = json::array();
  for (const auto& d : r.devices)
    per_device.push_back({{"pid", d.pid},
                          {"device", d.device},
                          {"calls", d.calls},
                          {"bytes", d.bytes},
                          {"h2d_bytes", d.h2d_bytes},
                          {"d2h_bytes", d.d2h_bytes},
                          {"d2d_bytes", d.d2d_bytes},
                          {"peer_bytes", d.peer_bytes},
                          {"pageable_bytes", d.pageable_bytes},
                          {"cpu_blocked_ns", d.cpu_blocked_ns},
                          {"gpu_ns", d.gpu_ns ? json(*d.gpu_ns) : json(nullptr)}});
  j["devices"] = std::move(per_device);

  // With --top, the first N locations plus any holding a site a finding
  // refers to, and every site of those.
  std::set<uint32_t> referenced;
  for (const auto& f : r.findings) referenced.insert(f.callsites.begin(), f.callsites.end());
  std::set<uint32_t> shown_sites;
  json locations = json::array();
  for (size_t i = 0; i < r.locations.size(); ++i) {
    const auto& l = r.locations[i];
    const bool wanted = !options.top_sites || i < *options.top_sites ||
                        std::any_of(l.callsites.begin(), l.callsites.end(),
                                    [&](uint32_t id) { return referenced.count(id) > 0; });
    if (!wanted) continue;
    shown_sites.insert(l.callsites.begin(), l.callsites.end());
    locations.push_back({
        {"id", l.id},
        {"key", l.key},
        {"callsites", l.callsites},
        {"pids", l.pids},
        {"function", l.frame.function},
        {"file", l.frame.file},
        {"line", l.frame.line},
        {"module", l.frame.module},
        {"location", l.frame.display()},
        {"calls", l.calls},
        {"bytes", l.bytes},
        {"cpu_blocked_ns", l.cpu_blocked_ns},
        {"max_cpu_blocked_ns", l.max_cpu_ns},
        {"gpu_ns", opt(l.gpu_ns)},
        {"failed_calls", l.failed_calls},
        {"class", l.main_class},
        {"stacks_differ", l.stacks_differ},
    });
  }
  json sites = json::array();
  for (size_t i = 0; i < r.callsites.size(); ++i) {
    const auto& s = r.callsites[i];
    if (!shown_sites.count(s.id)) continue;
    json stack = json::array();
    for (const auto& f : s.stack) stack.push_back(frame_json(f));
    sites.push_back({
        {"id", s.id},
        {"pid", s.pid},
        {"function", s.frame.function},
        {"file", s.frame.file},
        {"line", s.frame.line},
        {"module", s.frame.module},
        {"offset", s.frame.offset},
        {"address", s.frame.address},
        {"location", s.frame.display()},
        {"calls", s.calls},
        {"bytes", s.bytes},
        {"cpu_blocked_ns", s.cpu_blocked_ns},
        {"max_cpu_blocked_ns", s.max_cpu_ns},
        {"gpu_ns", opt(s.gpu_ns)},
        {"failed_calls", s.failed_calls},
        {"class", s.main_class},
        {"stack", std::move(stack)},
    });
  }
  j["callsites"] = std::move(sites);
  j["locations"] = std::move(locations);
  j["calls_without_callsite"] = r.calls_without_site;

  json findings = json::array();
  for (const auto& f : r.findings) {
    auto site_rows = [&](const std::vector<analyses::FindingSite>& v, const char* id_name, bool processes) {
      json rows = json::array();
      for (const auto& s : v) {
        json row = {
            {id_name, s.callsite == 0 ? json(nullptr) : json(s.callsite)},
            {"calls", s.calls},
            {"bytes", s.bytes},
            {"time_ns", s.time_ns},
            {"max_ns", s.max_ns},
            {"estimated_recoverable_ns", opt(s.estimated_recoverable_ns)},
            {"achieved_gbps", opt(s.achieved_gbps)},
            {"calls_per_second", opt(s.calls_per_second)},
        };
        if (processes) row["processes"] = s.processes;
        rows.push_back(std::move(row));
      }
      return rows;
    };
    json per_site = site_rows(f.sites, "callsite", false);
    findings.push_back({
        {"kind", analyses::finding_kind_name(f.kind)},
        {"title", f.title},
        {"calls", f.calls},
        {"bytes", f.bytes},
        {"time_ns", f.time_ns},
        {"time_basis", f.time_basis},
        {"max_ns", f.max_ns},
        {"estimated_recoverable_ns", opt(f.estimated_recoverable_ns)},
        {"callsites", f.callsites},
        {"sites", std::move(per_site)},
        {"locations", site_rows(f.locations, "location", true)},
        {"achieved_gbps", opt(f.achieved_gbps)},
        {"reference_gbps", opt(f.reference_gbps)},
        {"reference_source", f.reference_source},
        {"calls_per_second", opt(f.calls_per_second)},
        {"advice", f.advice},
    });
  }
  j["findings"] = std::move(findings);
  // The findings' estimates overlap; this counts each call site once (null: fewer than two estimates).
  j["findings_combined"] = r.combined_estimate
                               ? json{{"estimated_recoverable_ns", r.combined_estimate->recoverable_ns},
                                      {"sum_of_estimates_ns", r.combined_estimate->sum_ns},
                                      {"findings_with_estimates", r.combined_estimate->findings}}
                               : json(nullptr);
  j["ranks"] = ranks_json(r.ranks);
  // NVTX ranges, inclusive of their nested ranges (docs/report.md).
  json ranges = json::array();
  for (const auto& g : r.ranges) {
    json classes = json::array();
    for (const auto& k : g.classes) classes.push_back({{"class", k.cls}, {"calls", k.calls}, {"bytes", k.bytes}});
    json found = json::object();
    for (const auto& f : g.findings) found[f.kind] = f.calls;
    ranges.push_back({{"path", g.path},
                      {"name", g.name},
                      {"depth", g.depth},
                      {"calls", g.calls},
                      {"bytes", g.bytes},
                      {"pageable_bytes", g.pageable_bytes},
                      {"cpu_blocked_ns", g.cpu_blocked_ns},
                      {"gpu_ns", g.gpu_ns ? json(*g.gpu_ns) : json(nullptr)},
                      {"gpu_calls", g.gpu_calls},
                      {"failed_calls", g.failed_calls},
                      {"classes", std::move(classes)},
                      {"findings", std::move(found)}});
  }
  j["ranges"] = std::move(ranges);
  j["notes"] = r.notes;
  return j;
}

std::string render_json(const analyses::Report& report, const JsonOptions& options) {
  // Replace rather than throw on bytes that are not UTF-8 (paths, argv).
  return report_to_json(report, options).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace cuxfer::render
