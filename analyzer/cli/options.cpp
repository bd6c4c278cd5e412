#include "analyzer/cli/options.h"

#include <charconv>
#include <cstdio>

#include <fmt/format.h>

namespace cuxfer::cli {

ArgReader::ArgReader(std::string command, std::vector<std::string> args)
    : command_(std::move(command)), args_(std::move(args)) {}

bool ArgReader::at_option() const {
  if (done()) return false;
  const std::string& a = args_[pos_];
  return a.size() > 1 && a[0] == '-';
}

bool ArgReader::end_of_options() {
  if (done() || args_[pos_] != "--") return false;
  ++pos_;
  return true;
}

bool ArgReader::take_positional(std::vector<std::string>& out) {
  if (end_of_options()) {
    for (auto& p : rest()) out.push_back(std::move(p));
    return true;
  }
  if (done() || at_option()) return false;
  out.push_back(take());
  return true;
}

bool ArgReader::flag(std::string_view long_name, char short_name) {
  if (done()) return false;
  std::string_view a = args_[pos_];
  if ((a.starts_with("--") && a.substr(2) == long_name) ||
      (short_name && a.size() == 2 && a[0] == '-' && a[1] == short_name)) {
    ++pos_;
    return true;
  }
  return false;
}

bool ArgReader::option(std::string_view long_name, char short_name, std::string& value) {
  if (done()) return false;
  std::string_view a = args_[pos_];
  bool matched_needs_next = false;
  std::string shown;
  if (a.starts_with("--") && a.substr(2) == long_name) {
    matched_needs_next = true;
    shown = std::string(a);
  } else if (a.starts_with("--") && a.substr(2).starts_with(long_name) && a.size() > 2 + long_name.size() &&
             a[2 + long_name.size()] == '=') {
    value = std::string(a.substr(3 + long_name.size()));
    ++pos_;
    return true;
  } else if (short_name && a.size() >= 2 && a[0] == '-' && a[1] == short_name) {
    if (a.size() > 2) {
      value = std::string(a.substr(2));
      ++pos_;
      return true;
    }
    matched_needs_next = true;
    shown = std::string(a);
  }
  if (!matched_needs_next) return false;
  if (pos_ + 1 >= args_.size()) {
    fail(fmt::format("option {} needs a value", shown));
    ++pos_;
    return false;
  }
  value = args_[pos_ + 1];
  pos_ += 2;
  return true;
}

std::vector<std::string> ArgReader::rest() {
  std::vector<std::string> r(args_.begin() + static_cast<std::ptrdiff_t>(pos_), args_.end());
  pos_ = args_.size();
  return r;
}

std::string ArgReader::unknown_option() const {
  return fmt::format("{}: unknown option '{}' (try '{} --help')", command_, peek(), command_);
}

void ArgReader::fail(std::string message) {
  if (error_.empty()) error_ = fmt::format("{}: {}", command_, message);
}

void ArgReader::reject_unknown() {
  if (error_.empty()) error_ = unknown_option();
}

OptionTable& OptionTable::flag(std::string_view name, char short_name, std::function<void()> set) {
  entries_.push_back({std::string(name), short_name, std::move(set), nullptr});
  return *this;
}

OptionTable& OptionTable::value(std::string_view name, char short_name,
                                std::function<void(const std::string&, ArgReader&)> set) {
  entries_.push_back({std::string(name), short_name, nullptr, std::move(set)});
  return *this;
}

OptionTable& OptionTable::group(std::function<bool(ArgReader&)> take) {
  groups_.push_back(std::move(take));
  return *this;
}

bool parse_count(std::string_view name, const std::string& value, uint64_t max, size_t& out, ArgReader& in) {
  uint64_t n = 0;
  if (!parse_unsigned(value, n) || n > max) {
    in.fail(fmt::format("--{} needs a count, got '{}'", name, value));
    return false;
  }
  out = static_cast<size_t>(n);
  return true;
}

std::optional<int> OptionTable::read(ArgReader& in, std::vector<std::string>* operands) const {
  while (!in.done() && !in.failed()) {
    if (positionals_ == Positionals::Command && (in.end_of_options() || !in.at_option())) break;
    if (positionals_ == Positionals::Collect && operands && in.take_positional(*operands)) continue;
    if (positionals_ == Positionals::None && !in.at_option()) {
      in.fail("unexpected argument '" + in.peek() + "'");
      break;
    }
    bool taken = false;
    for (const auto& take : groups_)
      if ((taken = take(in))) break;
    if (taken) continue;
    if (in.flag("help", 'h')) {
      std::fputs(help_, stdout);
      return 0;
    }
    for (const auto& e : entries_) {
      std::string v;
      if (e.set_flag ? in.flag(e.name, e.short_name) : in.option(e.name, e.short_name, v)) {
        if (e.set_flag) e.set_flag();
        else e.set_value(v, in);
        taken = true;
        break;
      }
      if (in.failed()) break;  // a missing value: said
    }
    if (!taken) in.reject_unknown();
  }
  if (in.failed()) {
    std::fprintf(stderr, "%s\n", in.error().c_str());
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace cuxfer::cli
