#pragma once

#include <functional>
#include <string>

namespace cuxfer::cli {

// Every command that writes a file replaces it, as `cc -o` does: the content
// goes to a new temporary file in the same directory (created with O_EXCL, so
// a symlink or file planted at that name is never followed or written
// through), which is then renamed over the target. A reader never sees half a
// file, and a failed write leaves the old file as it was. docs/cli.md, "Files
// the commands write".

// Writes the temporary file, open for writing as `fd` and named `temp_path`
// (for a writer that opens it by name, as SQLite does); on failure sets
// `error` and returns false.
using FileWriter = std::function<bool(int fd, const std::string& temp_path, std::string& error)>;

// Replaces `path` with what `write` puts in the temporary file; on failure
// prints one line "<command>: cannot write PATH: <reason>", removes the
// temporary file and returns false.
bool replace_file_with(const std::string& path, const FileWriter& write, const char* command);

// Replaces `path` with `text` (as replace_file_with).
bool replace_file(const std::string& path, const std::string& text, const char* command);

}  // namespace cuxfer::cli
