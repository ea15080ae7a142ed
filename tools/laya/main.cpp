// laya: the command-line front end. `laya <command> --help` for each command.
#include <cstdio>
#include <cstring>

#include "commands.h"

namespace laya::cli {
int cmd_version(int, char**) {
  std::printf("laya 0.1.0\n");
  return 0;
}
}  // namespace laya::cli

namespace laya::cli {
int cmd_info(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_complete(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_bench_typing(int argc, char** argv);
int cmd_replay(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_mkmodel(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_type(int argc, char** argv);
int cmd_bench_sessions(int argc, char** argv);
int cmd_lsp(int argc, char** argv);
const Command kCommands[] = {
    {"info", "show a model's architecture, size, types and memory needs", cmd_info},
    {"logits", "write the logits of a token sequence to .npy", cmd_logits},
    {"complete", "continue a prompt, streaming the text", cmd_complete},
    {"bench", "prefill/decode speed, decode latency percentiles, bandwidth, RSS", cmd_bench},
    {"bench-typing", "keystroke savings of greedy suggestions on typing traces", cmd_bench_typing},
    {"bench-sessions", "many documents on one engine: switch latency, shared KV, save and load", cmd_bench_sessions},
    {"replay", "play typing traces on a session: suggestion latency, reuse, free keystrokes", cmd_replay},
    {"tokenize", "text → token ids (JSON); --batch for JSON lines on stdin", cmd_tokenize},
    {"detokenize", "token ids → text", cmd_detokenize},
    {"serve", "HTTP server: /infill for llama.vim / llama.vscode, OpenAI /v1/completions, /metrics", cmd_serve},
    {"type", "a terminal editor with the suggestion as ghost text (Tab accepts)", cmd_type},
    {"mkmodel", "write a random-weight GGUF with the shapes of a real model", cmd_mkmodel},
    {"lsp", "language server over stdio: LSP inline completions (ghost text)", cmd_lsp},
    {"version", "print the version", cmd_version},
};
const int kNumCommands = sizeof(kCommands) / sizeof(kCommands[0]);
}  // namespace laya::cli

static void usage() {
  std::fprintf(stderr, "usage: laya <command> [options]\n\ncommands:\n");
  for (int i = 0; i < laya::cli::kNumCommands; ++i)
    std::fprintf(stderr, "  %-12s %s\n", laya::cli::kCommands[i].name, laya::cli::kCommands[i].help);
  std::fprintf(stderr, "\n`laya <command> --help` shows a command's options.\n");
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  for (int i = 0; i < laya::cli::kNumCommands; ++i) {
    if (!std::strcmp(argv[1], laya::cli::kCommands[i].name)) return laya::cli::kCommands[i].run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "laya: unknown command '%s'\n", argv[1]);
  usage();
  return 2;
}
