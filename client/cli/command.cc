#include "client/cli/command.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lockstep {
namespace cli {
namespace {

void PrintUsage(std::ostream& os, const std::vector<Command>& commands) {
  os << "usage: lockstep <command> [options]\n\ncommands:\n";
  for (const Command& c : commands) {
    os << "  " << c.usage << "\n      " << c.summary << "\n";
  }
  os << "\n`lockstep <command> --help` lists a command's options.\n";
}

void PrintCommandHelp(std::ostream& os, const Command& c) {
  os << "usage: lockstep " << c.usage << "\n" << c.summary << "\n\noptions:\n";
  for (const OptionSpec& o : c.options) {
    os << "  --" << o.name << (o.takes_value ? "=VALUE" : "") << "\n      " << o.help << "\n";
  }
}

}  // namespace

absl::StatusOr<CommandArgs> CommandArgs::Parse(const std::vector<std::string>& args,
                                               const std::vector<OptionSpec>& specs) {
  CommandArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!absl::StartsWith(a, "--")) {
      out.positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::string value;
    bool has_value = false;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name));
    }
    if (spec->takes_value && !has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    } else if (!spec->takes_value && has_value) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
    }
    out.values_[name] = value;
  }
  return out;
}

std::string CommandArgs::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<int> CommandArgs::GetInt(const std::string& name, int fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  int v = 0;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected an integer, got \"", it->second, "\""));
  }
  return v;
}

absl::StatusOr<absl::Duration> CommandArgs::GetDuration(const std::string& name,
                                                        absl::Duration fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  absl::Duration d;
  if (!absl::ParseDuration(it->second, &d)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, ": expected a duration such as 500ms or 3s, got \"", it->second, "\""));
  }
  return d;
}

int Dispatch(int argc, char** argv, const std::vector<Command>& commands) {
  CommandContext ctx;
  ctx.argv0 = argv[0];
  if (argc < 2) {
    PrintUsage(*ctx.err, commands);
    return kExitUsage;
  }
  std::string name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    PrintUsage(*ctx.out, commands);
    return kExitOk;
  }
  for (const Command& c : commands) {
    if (c.name != name) continue;
    std::vector<std::string> args(argv + 2, argv + argc);
    for (const std::string& a : args) {
      if (a == "--help" || a == "-h") {
        PrintCommandHelp(*ctx.out, c);
        return kExitOk;
      }
    }
    absl::StatusOr<CommandArgs> parsed = CommandArgs::Parse(args, c.options);
    if (!parsed.ok()) {
      *ctx.err << "lockstep " << name << ": " << parsed.status().message() << "\n\n";
      PrintCommandHelp(*ctx.err, c);
      return kExitUsage;
    }
    return c.run(*parsed, ctx);
  }
  *ctx.err << "lockstep: unknown command \"" << name << "\"\n\n";
  PrintUsage(*ctx.err, commands);
  return kExitUsage;
}

}  // namespace cli
}  // namespace lockstep
