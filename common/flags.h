// File: flags.h
//
// Command-line parsing for gpuest's programs on top of absl flags. Flags are defined
// with ABSL_FLAG(type, snake_name, ...) and spelled on the command line with dashes
// (--metrics-listen) or underscores; --help lists the program's own flags, with dashes,
// from their definitions, so it cannot drift from what is parsed.
#pragma once

#include <string>
#include <vector>

namespace gpuest::common {

struct ProgramUsage {
  std::string synopsis;     // "gpuest-server [flags]"
  std::string description;  // A paragraph on what the program does.
  std::string epilogue;     // Commands, environment, exit codes; may be empty.
  // The file whose flags --help lists: pass __FILE__ from the defining file.
  std::string flags_file;
};

// Parses argv; on --help prints usage to stdout and exits 0, on a bad flag prints the
// error and a hint to stderr and exits 2. Returns the positional arguments (argv[0]
// excluded).
std::vector<std::string> ParseFlags(int argc, char** argv, const ProgramUsage& usage);

// The usage text --help prints.
std::string UsageText(const ProgramUsage& usage);

}  // namespace gpuest::common
