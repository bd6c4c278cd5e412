// The policy file: which path the shim takes at a call site or for an
// allocation site (docs/policy.md is the reference). A site is named by the
// build id of the module that holds it and the offset of the return address
// from that module's load base, so an entry survives ASLR and rebuilds of
// every other module; the symbol and source fields are for people only.
//
// This header is the contract between `cuxfer policy` (which writes the file),
// `cuxfer record --policy` (which checks it) and the shim (which applies it).
// Nothing here throws: errors are values, one line each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuxfer::policy {

// The schema this cuxfer reads and writes. A file names its schema and
// version; another version is refused, never half-read.
inline constexpr std::string_view kSchemaName = "cuxfer.policy";
inline constexpr int kSchemaVersion = 1;
inline constexpr std::string_view kSchema = "cuxfer.policy/1";

// What kind of call a site is the return address of.
enum class SiteKind : uint8_t {
  Call = 0,        // a copy or memset call (cudaMemcpy*, cuMemcpy*, cuMemset*, ...)
  Allocation = 1,  // a device allocation (cudaMalloc, cuMemAlloc*, ...): the zero-copy path
};

// What the shim does with a matching call.
enum class Path : uint8_t {
  Passthrough = 0,  // the driver's own path; the rewrite's bookkeeping still sees the call
  Stage = 1,        // through the shim's pinned staging buffers
  Register = 2,     // register the host buffer in place (from its first copy) and copy from it
  ZeroCopy = 3,     // allocation sites: mapped pinned host memory instead of device memory
  Exclude = 4,      // never touched by the rewrite, and invisible to its heuristics
};

struct Site {
  SiteKind kind = SiteKind::Call;
  // A native site: its module's build id and the return address's offset.
  std::string build_id;  // lowercase hex, as the trace records it (GNU build id note)
  uint64_t offset = 0;   // return address - module load base (what addr2line -e MODULE takes)
  // For people (never used to match): the module's path when recorded, the
  // function, and "file:line". Empty when unknown.
  std::string module, symbol, source;
  // A Python site (docs/policy.md, "Python sites"): a line of a script,
  // matched by file (the recorded path, or any tail of it after a '/') and
  // function (the qualified name); the line picks among the function's
  // entries, the nearest one when the script was edited since. No function:
  // the line must be exact. build_id and offset are then unused.
  std::string python_file, python_function;
  int python_line = 0;
  bool python() const { return !python_file.empty(); }
};

struct Entry {
  Site site;
  Path path = Path::Passthrough;
  // The entry applies to calls (allocations) of at least this many bytes;
  // smaller ones are left to the shim's defaults. 0: every size.
  uint64_t min_bytes = 0;
  std::optional<uint64_t> estimated_gain_ns;  // what the analyzer estimated; an estimate
  std::vector<std::string> findings;          // the report findings that support the entry
  std::string reason;                         // free text for people
  std::string comment;                        // for people; `cuxfer policy` marks speculative entries
};

struct Policy {
  std::string generator;  // who wrote it ("cuxfer 0.1.0 policy"); optional
  std::string comment;    // free text; optional
  std::vector<Entry> entries;
};

// "passthrough", "stage", "register", "zero_copy", "exclude"; "call", "allocation".
const char* path_name(Path p);
const char* site_kind_name(SiteKind k);
bool parse_path(std::string_view name, Path& out);
bool parse_site_kind(std::string_view name, SiteKind& out);

// Lowercase, checked: an even number (2-128) of hex digits. False otherwise.
bool normalize_build_id(std::string_view in, std::string& out);

// Parses and validates a whole policy file. On failure returns false and sets
// `error` to one line naming where ("line 4, column 7: ..." for syntax, the
// field path for the rest: "entries[2].path: unknown path 'pin' (...)").
// `out` is filled only on success. Never throws.
bool parse_policy(std::string_view text, Policy& out, std::string& error);

// Reads and parses a file; the error line starts with the path.
bool read_policy_file(const std::string& path, Policy& out, std::string& error);

// Stable, pretty JSON (2-space indent, fixed key order, trailing newline):
// the same policy always gives the same bytes; parse_policy reads it back equal.
std::string write_policy(const Policy& policy);

// An entry's identity: two entries with equal keys are the same site.
bool same_site(const Site& a, const Site& b);
// The identity as one string, without the kind: "BUILDID+0xOFFSET", or
// "py:FILE:FUNCTION:LINE" for a Python site.
std::string site_identity(const Site& s);

}  // namespace cuxfer::policy
