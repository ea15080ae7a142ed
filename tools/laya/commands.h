// Subcommands of the `laya` CLI, one file each (cmd_<name>.cpp). Each returns
// the process exit code; errors are printed to stderr as one clear line.
#pragma once

namespace laya::cli {

struct Command {
  const char* name;
  const char* help;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
};

// The table lives in main.cpp (explicit, no static registration).
extern const Command kCommands[];
extern const int kNumCommands;

}  // namespace laya::cli
