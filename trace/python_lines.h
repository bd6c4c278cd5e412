// Python source lines from a code object's line table, as the shim copied it
// (trace::PyCode; the analyzer names frames with it, the shim matches policy
// entries with it): the instruction's byte offset -> its line. Two formats:
// 3.10's (start delta, line delta) byte pairs, and the location table of
// 3.11 and later (PEP 657). Pure, unit-tested with tables CPython wrote.
#pragma once

#include <cstdint>
#include <string_view>

namespace cuxfer::trace {

// The line of the instruction at `offset` (bytes into the bytecode) of a code
// object of CPython `version` (major << 8 | minor) whose first line is
// `first_line`; 0 when the table says it has none or cannot be read.
int python_line(uint32_t version, int first_line, std::string_view table, uint32_t offset);

}  // namespace cuxfer::trace
