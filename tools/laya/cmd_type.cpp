// laya type: a small terminal editor (ncurses) with the engine's suggestion
// as dim ghost text after the cursor — typing into it is the product.
//
// It drives a Session exactly as an editor would: every key is one edit (or
// a cursor move) on the session, then a suggestion is asked for through the
// SuggestScheduler, so the input loop never waits for the model (the newest
// keystroke wins, an older suggestion is cancelled). The worker thread only
// stores its result; the input loop (the only thread that touches ncurses)
// polls every 15 ms and redraws.
//
// Keys: Tab accepts the suggestion, Ctrl-Right one word of it, Esc hides it;
// arrows, Home, End, Backspace, Delete, Enter edit; Ctrl-S saves FILE;
// Ctrl-Q quits. UTF-8 input (CJK, accents) through ncursesw.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <clocale>
#include <cstdio>
#include <cwchar>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <curses.h>
#include <fmt/format.h>

#include "cli_parse.h"
#include "cli_util.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/io.h"
#include "core/utf8.h"
#include "session/scheduler.h"
#include "session/model_slot.h"
#include "session/session.h"

namespace laya::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The document as the editor sees it: UTF-8 text and a cursor in code points,
// mirrored edit by edit into the session.
struct Doc {
  std::string text;
  size_t cursor = 0;  // code points
  size_t n_cp = 0;
  size_t byte(size_t cp) const { return utf8::offset_of(text, cp); }
  size_t line_start(size_t cp) const {
    const size_t b = byte(cp);
    const size_t nl = b == 0 ? std::string::npos : text.rfind('\n', b - 1);
    size_t n = 0;
    (void)utf8::count(std::string_view(text).substr(0, nl == std::string::npos ? 0 : nl + 1), &n, nullptr);
    return n;
  }
  size_t line_end(size_t cp) const {
    const size_t nl = text.find('\n', byte(cp));
    size_t n = 0;
    (void)utf8::count(std::string_view(text).substr(0, nl == std::string::npos ? text.size() : nl), &n, nullptr);
    return n;
  }
};

std::u32string decode(std::string_view s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const size_t len = std::max<size_t>(1, utf8::sequence_length(static_cast<unsigned char>(s[i])));
    char32_t c = static_cast<unsigned char>(s[i]) & (len == 1 ? 0x7F : len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (size_t k = 1; k < len && i + k < s.size(); ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(c);
    i += len;
  }
  return out;
}

std::string encode(char32_t c) {
  std::string o;
  if (c < 0x80) o += static_cast<char>(c);
  else if (c < 0x800) o += static_cast<char>(0xC0 | (c >> 6)), o += static_cast<char>(0x80 | (c & 0x3F));
  else if (c < 0x10000)
    o += static_cast<char>(0xE0 | (c >> 12)), o += static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
        o += static_cast<char>(0x80 | (c & 0x3F));
  else
    o += static_cast<char>(0xF0 | (c >> 18)), o += static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
        o += static_cast<char>(0x80 | ((c >> 6) & 0x3F)), o += static_cast<char>(0x80 | (c & 0x3F));
  return o;
}

int width_of(std::string_view s) {
  int w = 0;
  for (char32_t c : decode(s)) w += std::max(0, ::wcwidth(static_cast<wchar_t>(c)));
  return w;
}

class TypeEditor {
 public:
  TypeEditor(Session& s, std::string path, std::string model_name, int max_tokens)
      : s_(s), path_(std::move(path)), model_(std::move(model_name)) {
    opt_.max_tokens = max_tokens;
    opt_.single_line = true;  // ghost text is the rest of the line
  }
  Status load(std::string text) {
    doc_.text = std::move(text);
    (void)utf8::count(doc_.text, &doc_.n_cp, nullptr);
    doc_.cursor = doc_.n_cp;
    return s_.set_text(doc_.text);
  }
  int run();

 private:
  Status edit(size_t pos, size_t n_del, std::string_view ins);
  Status move_to(size_t cp);
  void ask();
  void draw();
  bool key(wint_t ch, bool is_code);
  void accept(bool one_word);
  void save();

  Session& s_;
  SuggestScheduler sched_;
  SuggestOptions opt_;
  std::string path_, model_;
  Doc doc_;
  std::mutex mu_;  // the fields the worker writes
  uint64_t latest_ = 0;
  std::string ghost_;
  bool ghost_hidden_ = false;
  Clock::time_point key_at_;
  double last_ms_ = -1;
  std::vector<double> ms_;
  std::atomic<bool> dirty_{true};
  std::string message_;
  int ctrl_right_ = -1;
};

Status TypeEditor::edit(size_t pos, size_t n_del, std::string_view ins) {
  const size_t b0 = doc_.byte(pos), b1 = doc_.byte(pos + n_del);
  doc_.text.replace(b0, b1 - b0, ins);
  size_t n = 0;
  (void)utf8::count(ins, &n, nullptr);
  doc_.n_cp = doc_.n_cp - n_del + n;
  doc_.cursor = pos + n;
  return s_.edit(pos, n_del, ins);
}

Status TypeEditor::move_to(size_t cp) {
  doc_.cursor = std::min(cp, doc_.n_cp);
  return s_.move(doc_.cursor);
}

void TypeEditor::ask() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ghost_.clear();
    ghost_hidden_ = false;
    key_at_ = Clock::now();
  }
  SuggestCallbacks cb;
  cb.on_done = [this](const SuggestDone& d) {
    if (d.outcome != SuggestOutcome::kDone || !d.suggestion) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (d.ticket != latest_) return;  // a newer keystroke is on its way
    ghost_ = d.suggestion->text;
    last_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - key_at_).count();
    ms_.push_back(last_ms_);
    dirty_ = true;
  };
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = sched_.submit(s_, opt_, std::move(cb));
}

void TypeEditor::accept(bool one_word) {
  std::string take;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ghost_hidden_ || ghost_.empty()) return;
    take = ghost_;
  }
  if (one_word) {
    // Leading spaces, then the word: what Ctrl-Right moves over in an editor.
    size_t i = 0;
    while (i < take.size() && (take[i] == ' ' || take[i] == '\t')) ++i;
    while (i < take.size() && take[i] != ' ' && take[i] != '\t') ++i;
    take.resize(i);
  }
  if (edit(doc_.cursor, 0, take).ok()) ask();
}

void TypeEditor::save() {
  if (path_.empty()) {
    message_ = "no file to save to (laya type FILE)";
    return;
  }
  OutputOptions o;
  o.overwrite = true;  // the file being edited: saving over it is the point
  o.option = "FILE";
  Status st = write_file_atomic(path_, doc_.text, o);
  message_ = st.ok() ? fmt::format("saved {} ({} bytes)", path_, doc_.text.size()) : st.message();
}

bool TypeEditor::key(wint_t ch, bool is_code) {
  const size_t c = doc_.cursor;
  Status st;
  bool changed = true;
  if (!is_code && ch == 17) return false;  // Ctrl-Q
  if (!is_code && ch == 19) {
    save();
    return true;
  }
  if (!is_code && ch == '\t') {
    accept(false);
    return true;
  }
  if (is_code && static_cast<int>(ch) == ctrl_right_) {
    accept(true);
    return true;
  }
  if (!is_code && ch == 27) {
    std::lock_guard<std::mutex> lock(mu_);
    ghost_hidden_ = true;
    return true;
  }
  if (is_code) {
    switch (ch) {
      case KEY_LEFT: st = move_to(c > 0 ? c - 1 : 0); break;
      case KEY_RIGHT: st = move_to(c + 1); break;
      case KEY_HOME: st = move_to(doc_.line_start(c)); break;
      case KEY_END: st = move_to(doc_.line_end(c)); break;
      case KEY_UP:
      case KEY_DOWN: {
        const size_t col = c - doc_.line_start(c);
        if (ch == KEY_UP) {
          const size_t ls = doc_.line_start(c);
          if (ls == 0) return true;
          const size_t prev = doc_.line_start(ls - 1);
          st = move_to(std::min(prev + col, ls - 1));
        } else {
          const size_t le = doc_.line_end(c);
          if (le >= doc_.n_cp) return true;
          st = move_to(std::min(le + 1 + col, doc_.line_end(le + 1)));
        }
        break;
      }
      case KEY_BACKSPACE: st = c > 0 ? edit(c - 1, 1, "") : Status::Ok(); break;
      case KEY_DC: st = c < doc_.n_cp ? edit(c, 1, "") : Status::Ok(); break;
      case KEY_ENTER: st = edit(c, 0, "\n"); break;
      default: changed = false;
    }
  } else if (ch == 127 || ch == 8) {
    st = c > 0 ? edit(c - 1, 1, "") : Status::Ok();
  } else if (ch == '\n' || ch == '\r') {
    st = edit(c, 0, "\n");
  } else if (ch >= 32) {
    st = edit(c, 0, encode(static_cast<char32_t>(ch)));
  } else {
    changed = false;
  }
  if (!st.ok()) message_ = st.message();
  if (changed) ask();
  return true;
}

void TypeEditor::draw() {
  int rows = 0, cols = 0;
  getmaxyx(stdscr, rows, cols);
  erase();
  const int text_rows = std::max(1, rows - 1);
  std::vector<std::string> lines;
  size_t start = 0;
  for (;;) {
    const size_t nl = doc_.text.find('\n', start);
    lines.push_back(doc_.text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  const size_t cb = doc_.byte(doc_.cursor);
  const size_t cur_line = static_cast<size_t>(std::count(doc_.text.begin(), doc_.text.begin() + static_cast<long>(cb), '\n'));
  const size_t line_b = cur_line == 0 ? 0 : doc_.text.rfind('\n', cb - 1) + 1;
  const size_t top = cur_line >= static_cast<size_t>(text_rows) ? cur_line - text_rows + 1 : 0;
  std::string ghost;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ghost_hidden_) ghost = ghost_;
  }
  for (size_t i = top; i < lines.size() && static_cast<int>(i - top) < text_rows; ++i) {
    const int y = static_cast<int>(i - top);
    if (i != cur_line) {
      mvaddnstr(y, 0, lines[i].c_str(), static_cast<int>(lines[i].size()));
      continue;
    }
    const std::string before = lines[i].substr(0, cb - line_b), after = lines[i].substr(cb - line_b);
    mvaddstr(y, 0, before.c_str());
    attron(A_DIM);
    addstr(ghost.c_str());
    attroff(A_DIM);
    addstr(after.c_str());
  }
  std::vector<double> v;
  {
    std::lock_guard<std::mutex> lock(mu_);
    v = ms_;
  }
  // A message (saved, an error) first: a narrow terminal cuts the end of the line.
  std::string status = message_.empty() ? fmt::format(" laya type | {} | ", model_) : " " + message_ + " | ";
  if (!v.empty()) {
    std::sort(v.begin(), v.end());
    const double p99 = v[std::min(v.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(v.size())))];
    status += fmt::format("keystroke -> suggestion {:.2f} ms, p99 {:.2f} ms ({} keys) | ", last_ms_, p99, v.size());
  }
  if (message_.empty()) status += "Tab accept  Esc dismiss  ^S save  ^Q quit";
  attron(A_REVERSE);
  mvaddnstr(rows - 1, 0, status.c_str(), static_cast<int>(status.size()));
  attroff(A_REVERSE);
  const std::string before = doc_.text.substr(line_b, cb - line_b);
  move(static_cast<int>(cur_line - top), std::min(cols - 1, width_of(before)));
  refresh();
}

int TypeEditor::run() {
  if (const char* seq = tigetstr(const_cast<char*>("kRIT5")); seq && seq != reinterpret_cast<char*>(-1))
    ctrl_right_ = key_defined(seq);
  ask();
  for (;;) {
    if (dirty_.exchange(false)) draw();
    wint_t ch = 0;
    const int r = get_wch(&ch);
    if (r == ERR) continue;  // the 15 ms poll: a suggestion may have arrived
    message_.clear();
    if (r == KEY_CODE_YES && ch == KEY_RESIZE) {
      dirty_ = true;
      continue;
    }
    if (!key(ch, r == KEY_CODE_YES)) break;
    dirty_ = true;
  }
  sched_.forget(s_);
  return 0;
}

}  // namespace

int cmd_type(int argc, char** argv) {
  CLI::App app{"A terminal editor with the model's suggestion as ghost text (Tab accepts)", "laya type"};
  app.footer("Example: laya type notes.md");
  std::string path;
  int max_tokens = 8;
  app.add_option("file", path, "the file to edit (created by Ctrl-S if absent)");
  app.add_option("--max-tokens", max_tokens, "tokens per suggestion")->transform(int_in(1, 64));
  EngineFlags flags;
  flags.add_to(app, false);
  if (auto rc = parse_args(app, argc, argv, "type")) return *rc;
  std::string text;
  if (!path.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      if (!std::filesystem::is_regular_file(path, ec))
        return report_error("type", Status(StatusCode::kInvalidArgument, fmt::format("{}: not a regular file", path)));
      auto r = read_file(path, size_t{64} << 20);
      if (!r.ok()) return report_error("type", r.status());
      text = std::move(r).value();
    }
    size_t n = 0, bad = 0;
    if (!utf8::count(text, &n, &bad))
      return report_error("type", Status(StatusCode::kInvalidArgument,
                                         fmt::format("{}: not UTF-8 text (byte {})", path, bad)));
  }
  // The model lives in a slot, as for every entry point that serves sessions.
  ModelSlotOptions mo;
  flags.apply(&mo.engine);
  mo.engine.n_ctx = 2048;  // a cap: min(2048, the model's trained context)
  auto slot = ModelSlot::create(flags.model_path, mo);
  if (!slot.ok()) return report_error("type", slot.status());
  Session session(**slot);
  const size_t slash = flags.model_path.find_last_of('/');
  TypeEditor ed(session, path, slash == std::string::npos ? flags.model_path : flags.model_path.substr(slash + 1),
                max_tokens);
  if (Status st = ed.load(text); !st.ok()) return report_error("type", st);
  std::setlocale(LC_ALL, "");
  set_escdelay(25);  // Esc alone, not the start of an arrow key, after 25 ms
  if (!initscr()) return report_error("type", Status(StatusCode::kIo, "cannot start the terminal (TERM unset?)"));
  raw();  // Ctrl-S and Ctrl-Q reach us (no flow control)
  noecho();
  keypad(stdscr, TRUE);
  timeout(15);
  const int rc = ed.run();
  endwin();
  return rc;
}

}  // namespace laya::cli
