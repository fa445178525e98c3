// The `lockstep` CLI's subcommands. A subcommand is a name, a one-line summary for the
// usage text, its options, and a function; main.cc lists them. Adding one:
//   1. write client/cli/foo_command.{h,cc} with `Command FooCommand();`
//   2. add `FooCommand()` to the list in client/cli/main.cc (and a dep in BUILD.bazel).
// Options are "--name=value" or "--name value"; a Command declares the names it accepts
// (unknown ones are refused with exit 2) and reads them from CommandArgs.
// Thread model: the CLI runs subcommands on the main thread.
#ifndef LOCKSTEP_CLIENT_CLI_COMMAND_H_
#define LOCKSTEP_CLIENT_CLI_COMMAND_H_

#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {
namespace cli {

// Exit codes shared by every subcommand.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

struct OptionSpec {
  std::string name;  // without "--"
  std::string help;
  bool takes_value = true;  // false: a switch ("--keep_running")
};

class CommandArgs {
 public:
  // INVALID_ARGUMENT naming an unknown option or a missing value.
  static absl::StatusOr<CommandArgs> Parse(const std::vector<std::string>& args,
                                           const std::vector<OptionSpec>& specs);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // INVALID_ARGUMENT naming the option when the value is not an integer / duration.
  absl::StatusOr<int> GetInt(const std::string& name, int fallback) const;
  absl::StatusOr<absl::Duration> GetDuration(const std::string& name,
                                             absl::Duration fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

struct CommandContext {
  std::string argv0;
  std::ostream* out = &std::cout;
  std::ostream* err = &std::cerr;
};

struct Command {
  std::string name;
  std::string usage;    // "status [--coordinator=HOST:PORT] [--output=table|json]"
  std::string summary;  // one line
  std::vector<OptionSpec> options;
  std::function<int(const CommandArgs& args, const CommandContext& ctx)> run;
};

// Runs argv[1] as a subcommand from `commands`. No subcommand, "help", "--help": usage on
// stdout, exit 0 ("help" with no command) or 2 (none given). Unknown subcommand or bad
// options: usage on stderr, exit 2.
int Dispatch(int argc, char** argv, const std::vector<Command>& commands);

}  // namespace cli
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_COMMAND_H_
