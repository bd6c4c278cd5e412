// Writes synthetic traces to a private directory and loads them the way
// `cuxfer report` does, so analyzer tests run on real files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "analyzer/analyses/report.h"
#include "analyzer/model/job.h"
#include "tests/unit/trace/synthetic_trace.h"

namespace cuxfer::testing {

class JobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cuxfer-analyzer-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string write(const SyntheticTrace& t, const std::string& name) {
    std::string p = path(name), error;
    EXPECT_TRUE(t.write(p, &error)) << error;
    return p;
  }

  // Loads traces (module+offset symbols: synthetic addresses name no file).
  model::Job load(const std::vector<SyntheticTrace>& traces) {
    std::vector<std::string> paths;
    for (size_t i = 0; i < traces.size(); ++i)
      paths.push_back(write(traces[i], "t" + std::to_string(loads_) + "-" + std::to_string(i) + ".trace"));
    ++loads_;
    return load_paths(paths);
  }
  model::Job load(const SyntheticTrace& t) { return load(std::vector<SyntheticTrace>{t}); }

  model::Job load_paths(const std::vector<std::string>& paths) {
    errors.clear();
    auto traces = model::read_traces(paths, errors);
    auto sym = symbolize::make_symbolizer(false);
    return model::build_job(std::move(traces), *sym);
  }

  std::vector<std::string> errors;
  int loads_ = 0;
  std::filesystem::path dir_;
};

inline const analyses::ClassTotals* find_class(const analyses::Report& r, trace::Direction d,
                                               trace::MemKind m) {
  for (const auto& c : r.classes)
    if (c.cls.direction == d && c.cls.memory == m) return &c;
  return nullptr;
}

// By the kind's name; a name that is no kind fails the test (an "expect no
// such finding" check must not pass on a typo).
inline const analyses::Finding* find_finding(const analyses::Report& r, const std::string& kind) {
  analyses::FindingKind k;
  if (!analyses::parse_finding_kind(kind, k)) {
    ADD_FAILURE() << "no finding kind named '" << kind << "'";
    return nullptr;
  }
  for (const auto& f : r.findings)
    if (f.kind == k) return &f;
  return nullptr;
}

}  // namespace cuxfer::testing
