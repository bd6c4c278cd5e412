// Fuzzes the policy file parser (policy::parse_policy) with arbitrary text. A
// policy file is written by people and by `cuxfer policy`, and read by the
// shim inside the app's process: it must be refused with one error line,
// never crash or throw. Whatever it accepts, write_policy must write in a form
// it accepts again, equal field by field and byte for byte on the second
// write (docs/policy.md: "the same policy always gives the same bytes").
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "policy/policy.h"

namespace {

using namespace cuxfer::policy;

[[noreturn]] void broken(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_policy_parser: invariant broken: %s\n%s\n", what, detail.c_str());
  std::abort();
}

bool same_entry(const Entry& a, const Entry& b) {
  return same_site(a.site, b.site) && a.site.module == b.site.module && a.site.symbol == b.site.symbol &&
         a.site.source == b.site.source && a.path == b.path && a.min_bytes == b.min_bytes &&
         a.estimated_gain_ns == b.estimated_gain_ns && a.findings == b.findings && a.reason == b.reason;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Policy p;
  std::string error;
  if (!parse_policy(text, p, error)) {
    if (error.empty()) broken("a refused policy says why", std::string(text));
    for (char ch : error)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) broken("the error is one line of text", error);
    return 0;
  }
  const std::string written = write_policy(p);
  Policy again;
  if (!parse_policy(written, again, error)) broken("write_policy output is refused", error + "\n" + written);
  if (again.generator != p.generator || again.comment != p.comment || again.entries.size() != p.entries.size())
    broken("round trip changed the policy", written);
  for (size_t i = 0; i < p.entries.size(); ++i)
    if (!same_entry(p.entries[i], again.entries[i])) broken("round trip changed an entry", written);
  if (write_policy(again) != written) broken("write_policy is not stable", written);
  return 0;
}
