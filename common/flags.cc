#include "common/flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace gpuest::common {
namespace {

std::string Dashed(absl::string_view name) {
  return absl::StrReplaceAll(name, {{"_", "-"}});
}

// "--metrics-listen=x" -> "--metrics_listen=x"; values and positionals are untouched.
std::string Underscored(const std::string& arg) {
  if (arg.size() < 3 || arg[0] != '-' || arg == "--") return arg;
  const size_t start = arg[1] == '-' ? 2 : 1;
  const size_t end = std::min(arg.find('='), arg.size());
  std::string out = arg;
  std::replace(out.begin() + start, out.begin() + end, '-', '_');
  return out;
}

// absl normalises a flag's file name (it may drop a leading "/"), so compare ends.
bool DefinedIn(const absl::CommandLineFlag& flag, absl::string_view file) {
  const std::string defined = flag.Filename();
  return !defined.empty() &&
         (absl::EndsWith(file, defined) || absl::EndsWith(defined, file));
}

bool IsHelp(const std::string& arg) {
  return arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpfull";
}

}  // namespace

std::string UsageText(const ProgramUsage& usage) {
  std::vector<absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (DefinedIn(*flag, usage.flags_file)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](auto* a, auto* b) { return a->Name() < b->Name(); });
  std::string text =
      absl::StrCat("Usage: ", usage.synopsis, "\n\n", usage.description, "\n\nFlags:\n");
  for (const absl::CommandLineFlag* flag : flags) {
    std::string def = flag->DefaultValue();
    if (flag->IsOfType<std::string>()) def = absl::StrCat("\"", def, "\"");
    absl::StrAppend(&text, "  --", Dashed(flag->Name()), "\n      ", flag->Help(),
                    " (default: ", def, ")\n");
  }
  absl::StrAppend(&text, "  --help\n      Print this help and exit.\n");
  if (!usage.epilogue.empty()) absl::StrAppend(&text, "\n", usage.epilogue, "\n");
  return text;
}

std::vector<std::string> ParseFlags(int argc, char** argv, const ProgramUsage& usage) {
  auto fail = [&](const std::string& message) {
    std::fprintf(stderr, "%s\nSee --help.\n", message.c_str());
    std::exit(2);
  };
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional.emplace_back(argv[i]);
      break;
    }
    if (IsHelp(arg)) {
      std::fputs(UsageText(usage).c_str(), stdout);
      std::exit(0);
    }
    if (arg == "--version") {
      std::printf("%s\n", GPUEST_VERSION);
      std::exit(0);
    }
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    const std::string body = Underscored(arg).substr(arg[1] == '-' ? 2 : 1);
    const size_t eq = body.find('=');
    std::string name = body.substr(0, eq);
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string value;
    if (eq != std::string::npos) {
      value = body.substr(eq + 1);
    } else if (flag != nullptr && flag->IsOfType<bool>()) {
      value = "true";
    } else if (flag == nullptr && name.rfind("no", 0) == 0 &&
               (flag = absl::FindCommandLineFlag(name.substr(2))) != nullptr &&
               flag->IsOfType<bool>()) {
      value = "false";
    } else if (flag != nullptr) {
      if (i + 1 >= argc) fail(absl::StrCat("flag --", Dashed(name), " needs a value"));
      value = argv[++i];
    }
    if (flag == nullptr || !DefinedIn(*flag, usage.flags_file)) {
      fail(absl::StrCat("unknown flag ", arg.substr(0, arg.find('='))));
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      fail(absl::StrCat("bad value for --", Dashed(flag->Name()), ": ", error));
    }
  }
  return positional;
}

}  // namespace gpuest::common
