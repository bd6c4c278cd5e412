#include "analyzer/text/units.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

namespace cuxfer::text {

std::string format_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return v < 10    ? fmt::format("{:.2f} {}", v, kUnits[u])
         : v < 100 ? fmt::format("{:.1f} {}", v, kUnits[u])
                   : fmt::format("{:.0f} {}", v, kUnits[u]);
}

std::string format_duration(uint64_t ns) {
  if (ns < 1000) return fmt::format("{} ns", ns);
  double v = static_cast<double>(ns);
  auto three = [](double x, const char* unit) {
    return x < 10    ? fmt::format("{:.2f} {}", x, unit)
           : x < 100 ? fmt::format("{:.1f} {}", x, unit)
                     : fmt::format("{:.0f} {}", x, unit);
  };
  if (ns < 1000000) return three(v / 1e3, "us");
  if (ns < 1000000000) return three(v / 1e6, "ms");
  return three(v / 1e9, "s");
}

std::string format_count(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string counted(uint64_t n, std::string_view one, std::string_view many) {
  return format_count(n) + " " + std::string(n == 1 ? one : many);
}

std::string format_gbps(std::optional<double> v) {
  if (!v) return "n/a";
  return *v < 10 ? fmt::format("{:.2f}", *v) : fmt::format("{:.1f}", *v);
}

std::string format_percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

size_t display_width(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

std::string fit(std::string_view s, size_t width) {
  if (display_width(s) <= width) return std::string(s);
  if (width == 0) return {};
  std::string out;
  size_t cols = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80) {
      if (cols == width - 1) break;
      ++cols;
    }
    out += s[i];
  }
  return out + "…";
}

std::vector<std::string> wrap(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  std::string line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t sp = text.find(' ', pos);
    std::string_view word = text.substr(pos, sp == std::string_view::npos ? sp : sp - pos);
    pos = sp == std::string_view::npos ? text.size() : sp + 1;
    if (word.empty()) continue;
    if (!line.empty() && display_width(line) + 1 + display_width(word) > width) {
      lines.push_back(std::move(line));
      line.clear();
    }
    // A word longer than a line (a path) is cut into line-sized pieces.
    while (line.empty() && display_width(word) > width && width > 0) {
      size_t cut = 0, cols = 0;
      while (cut < word.size() && cols < width) {
        ++cut;
        while (cut < word.size() && (static_cast<unsigned char>(word[cut]) & 0xC0) == 0x80) ++cut;
        ++cols;
      }
      lines.emplace_back(word.substr(0, cut));
      word.remove_prefix(cut);
    }
    if (word.empty()) continue;
    if (!line.empty()) line += ' ';
    line += word;
  }
  if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

size_t terminal_width(size_t fallback) {
  if (const char* cols = std::getenv("COLUMNS")) {
    char* end = nullptr;
    long v = std::strtol(cols, &end, 10);
    if (end != cols && *end == '\0' && v >= 20 && v <= 1000) return static_cast<size_t>(v);
  }
  struct winsize ws {};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
    return ws.ws_col;
  return fallback;
}

bool parse_unsigned(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace cuxfer::text
