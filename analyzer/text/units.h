// Human units for the text report. Binary prefixes for bytes (KiB, MiB),
// decimal GB/s for bandwidth (as CUDA's own tools report it), SI for time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuxfer::text {

std::string format_bytes(uint64_t bytes);          // "512 B", "4.0 KiB", "1.50 GiB"
std::string format_duration(uint64_t ns);          // "850 ns", "3.2 us", "12.3 ms", "1.24 s"
std::string format_count(uint64_t n);              // "1,234,567"
// A count and its noun, singular for one: "1 copy", "1,627 copies".
std::string counted(uint64_t n, std::string_view one, std::string_view many);
std::string format_gbps(std::optional<double> v);  // "12.3", "n/a"
std::string format_percent(double fraction);       // "81.5%"

// Cuts `s` to `width` display columns (UTF-8 aware), marking the cut with "…".
std::string fit(std::string_view s, size_t width);
// Display columns of a UTF-8 string (code points; no wide characters here).
size_t display_width(std::string_view s);
// Greedy word wrap into lines of at most `width` columns.
std::vector<std::string> wrap(std::string_view text, size_t width);

// Columns of the terminal: $COLUMNS, else the width of stdout if it is a
// terminal, else `fallback`.
size_t terminal_width(size_t fallback = 100);

// Strict unsigned decimal; false on anything else or overflow.
bool parse_unsigned(std::string_view s, uint64_t& out);

}  // namespace cuxfer::text
