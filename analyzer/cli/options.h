// A small command-line reader shared by the subcommands: GNU-style long
// options (--name, --name=value, --name value), short options (-o value,
// -ovalue), "--" to end options. Usage errors are one line and exit code 2.
#pragma once

#include <cstdint>
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

using text::parse_unsigned;  // the commands' number parsing (analyzer/text/units.h)

}  // namespace cuxfer::cli
