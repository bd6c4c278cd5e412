// The job as an SQLite database (`cuxfer export --sqlite`), for users' own SQL,
// as Nsight Systems' SQLite export is used: processes, every call, every GPU
// record, call sites with their symbolized frames, the report's findings and
// a meta table. docs/sqlite.md documents every table and column; the schema
// below is the same text.
#pragma once

#include <string>

#include "analyzer/analyses/report.h"
#include "analyzer/model/job.h"

namespace cuxfer::render {

inline constexpr const char* kSqliteSchemaVersion = "cuxfer.sqlite/1";

// The CREATE TABLE and CREATE INDEX statements (indices are created before the
// rows go in). calls.api's CASE lists the job's API names; this text lists one.
std::string sqlite_schema();

// Writes `job` (and `report`, analyze() of the same job: its call-site ids,
// process summaries and findings) into a new database at `path`, which must
// not exist (the caller writes to a temporary name and renames it). One
// transaction, prepared statements. False with `error` set on any failure;
// the caller removes the file then.
bool write_sqlite(const model::Job& job, const analyses::Report& report, const std::string& path,
                  std::string& error);

// The same, computing analyze(job) itself, on a second thread while the calls
// are written (what `cuxfer export --sqlite` uses).
bool write_sqlite(const model::Job& job, const std::string& path, std::string& error);

}  // namespace cuxfer::render
