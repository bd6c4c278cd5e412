// A small command-line reader shared by the subcommands: GNU-style long
// options (--name, --name=value, --name value), short options (-o value,
// -ovalue), "--" to end options. Usage errors are one line and exit code 2.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/text/units.h"

namespace cuxfer::cli {

inline constexpr int kExitUsage = 2;

class ArgReader {
 public:
  // `command` names the subcommand in messages ("cuxfer report").
  ArgReader(std::string command, std::vector<std::string> args);

  bool done() const { return pos_ >= args_.size(); }
  const std::string& peek() const { return args_[pos_]; }
  // The current argument starts with '-' and is not "-" (stdin) or a number.
  bool at_option() const;
  // Consumes "--": everything after it is positional.
  bool end_of_options();
  // Consumes a positional argument into `out`, or "--" and everything after
  // it; false (nothing consumed) at an option.
  bool take_positional(std::vector<std::string>& out);

  bool flag(std::string_view long_name, char short_name = 0);
  // Matches the option and consumes its value; on a missing value sets the
  // error and returns false.
  bool option(std::string_view long_name, char short_name, std::string& value);

  std::string take() { return args_[pos_++]; }
  std::vector<std::string> rest();

  // One line: "cuxfer report: unknown option '--x' (try 'cuxfer report --help')".
  std::string unknown_option() const;
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  void fail(std::string message);
  // The current argument is an option nobody took: fails with unknown_option().
  void reject_unknown();

 private:
  std::string command_;
  std::vector<std::string> args_;
  size_t pos_ = 0;
  std::string error_;
};

// One command's options, declared once, and the one loop that reads them.
// `--help`/`-h` prints the command's help (exit 0); a missing value, a bad
// value (a setter calls in.fail) and an unknown option end the loop with one
// line on stderr (exit 2). What the arguments that are not options are:
enum class Positionals {
  Collect,  // operands, anywhere among the options, and everything after "--" (report, diff, ...)
  Command,  // the first one, or "--", ends the options: a command line follows (record, tune)
  None,     // none accepted: "unexpected argument" (calibrate)
};

class OptionTable {
 public:
  OptionTable(const char* help, Positionals positionals) : help_(help), positionals_(positionals) {}

  OptionTable& flag(std::string_view name, char short_name, std::function<void()> set);
  // `set` gets the value and the reader, to fail() on a value it refuses.
  OptionTable& value(std::string_view name, char short_name, std::function<void(const std::string&, ArgReader&)> set);
  // Options another unit reads itself (SymbolOptions::take): tried first.
  OptionTable& group(std::function<bool(ArgReader&)> take);

  // Reads the options: nullopt to go on (Collect: the operands in
  // `operands`; Command: `in` stops at the command), else the exit status,
  // its message printed.
  std::optional<int> read(ArgReader& in, std::vector<std::string>* operands = nullptr) const;

 private:
  struct Entry {
    std::string name;
    char short_name;
    std::function<void()> set_flag;
    std::function<void(const std::string&, ArgReader&)> set_value;
  };
  const char* help_;
  Positionals positionals_;
  std::vector<Entry> entries_;
  std::vector<std::function<bool(ArgReader&)>> groups_;
};

using text::parse_unsigned;  // the commands' number parsing (analyzer/text/units.h)

// A count option's value ("--top 5", up to `max`): false, with "--NAME needs a
// count, got 'V'" failed on `in`, when it is not one.
bool parse_count(std::string_view name, const std::string& value, uint64_t max, size_t& out, ArgReader& in);

}  // namespace cuxfer::cli
