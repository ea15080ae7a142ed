#!/usr/bin/env python3
"""The longest C++ function bodies under the given folders (default: src tools).

    python3 tools/ci/longest_functions.py              # top 5 of src/ and tools/
    python3 tools/ci/longest_functions.py --top 20 src/session

A function's length is its lines from the line of its name through its closing
brace, inclusive (comments and blank lines inside count: it is what a reader
scrolls through). Lambdas and local classes count as part of the function that
holds them; a lambda bound at namespace scope counts as a function of its own.

A brace scanner, no compiler needed: comments, string / char / raw-string
literals, digit separators and preprocessor lines are blanked first, then
namespace / class / struct / extern "C" bodies are entered and every other
brace block whose header has a parameter list is a function. Member
initialisers in braces (`: a_{x} {`) are told from the body. Files: .cpp .cc
.cxx .c .h .hpp .cu .cuh .inc. Standard library only, so it runs anywhere
python3 does.
"""
import argparse
import os
import re
import sys

EXTS = {".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cu", ".cuh", ".inc"}
IDENT = re.compile(r"[A-Za-z0-9_]")


def blank(text):
    """Return text with comments, literals and preprocessor lines replaced by
    spaces (newlines kept, so offsets and line numbers stay the same)."""
    out = list(text)
    n = len(text)
    i = 0
    line_start = True

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    def skip_literal(i):
        """Blank the "..." or '...' literal opening at i; return the index past it."""
        j = i + 1
        while j < n and text[j] != text[i] and text[j] != "\n":
            j += 2 if text[j] == "\\" else 1
        wipe(i + 1, j)
        return j + 1

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":
            j = i
            while j < n:  # to the end of the line, following backslash continuations
                if text[j] == "\n" and text[j - 1] != "\\":
                    break
                if text[j] == "/" and text.startswith("/*", j):  # a block comment may start here
                    end = text.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                    continue
                j += 1
            wipe(i, j)
            i = j
            continue
        line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            wipe(i, j)
            i = j
        elif c == '"':
            # Raw string: R"delim( ... )delim" with an optional u8 / u / U / L prefix.
            k = i - 1
            while k >= 0 and IDENT.match(text[k]):
                k -= 1
            prefix = text[k + 1:i]
            if prefix in ("R", "u8R", "uR", "UR", "LR"):
                p = text.find("(", i)
                delim = text[i + 1:p]
                end = text.find(")" + delim + '"', p)
                j = n if end < 0 else end + len(delim) + 2
                wipe(i + 1, j - 1)
                i = j
                continue
            i = skip_literal(i)
        elif c == "'":
            # A digit separator (1'000) or a character literal ('x', u8'x').
            k = i - 1
            while k >= 0 and (IDENT.match(text[k]) or text[k] in ".'"):
                k -= 1
            token = text[k + 1:i]
            if token and token[0].isdigit():
                i += 1
                continue
            i = skip_literal(i)
        else:
            i += 1
    return "".join(out)


TEMPLATE_PREFIX = re.compile(r"^\s*template\s*<")
CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b")
NOT_NAMES = {"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "alignas",
             "decltype", "noexcept", "__attribute__", "__declspec", "__launch_bounds__", "static_assert", "requires"}


def strip_template(header):
    """Drop leading template<...> clauses (which may say `class T`)."""
    while True:
        m = TEMPLATE_PREFIX.match(header)
        if not m:
            return header
        depth = 0
        for k in range(m.end() - 1, len(header)):
            if header[k] == "<":
                depth += 1
            elif header[k] == ">":
                depth -= 1
                if depth == 0:
                    header = header[k + 1:]
                    break
        else:
            return header


def top_level_parens(header):
    """Spans (open, close) of the parenthesised groups at depth 0."""
    spans, depth, start = [], 0, 0
    for k, ch in enumerate(header):
        if ch == "(":
            if depth == 0:
                start = k
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                spans.append((start, k))
    return spans


def function_name(header):
    """The declarator name of a function header, or None if it is not one."""
    h = strip_template(header)
    m = re.search(r"(~?[A-Za-z_][\w:]*::)?operator\s*(\(\s*\)|[^\s(]+)\s*\(", h)
    if m:
        return re.sub(r"\s+", "", m.group(0)[:-1])
    for (a, _b) in top_level_parens(h):
        before = h[:a].rstrip()
        if before.endswith("]") and "=" in before:  # a lambda bound at namespace scope
            var = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*=", before)
            return (var.group(1) if var else "?") + " (lambda)"
        m = re.search(r"(~?[A-Za-z_][\w:]*(?:<[^()]*>)?)$", before)
        if not m:
            continue
        name = m.group(1)
        base = re.sub(r"<.*", "", name).split("::")[-1].lstrip("~")
        if base in NOT_NAMES:
            continue
        return name
    return None


FUNCTION_TAIL = re.compile(r"^(\s|const\b|volatile\b|&|noexcept\b|override\b|final\b|mutable\b|constexpr\b"
                           r"|try\b|->[^;{]*|requires\b[^{]*)*$")


def classify(header):
    """'container', 'function', 'member-init' or 'other' for the brace that ends header
    ('member-init': a brace inside the header, skipped whole, the header goes on)."""
    h = strip_template(header).strip()
    if h.count("(") > h.count(")"):
        return "member-init"  # a brace inside a parameter list: a default argument `= {}`
    if re.match(r"^(inline\s+)?namespace\b", h) or re.match(r'^extern\s*"\s*"$', h):
        return "container"
    parens = top_level_parens(h)
    first_paren = parens[0][0] if parens else len(h)
    m = CONTAINER.search(h)
    if m and m.start() < first_paren and not re.search(r"\benum\b", h):
        # class / struct / union: but `struct X f(...)` is a function returning one.
        if not parens or h[:first_paren].rstrip().endswith(">") or re.search(r":\s*[\w:<>, ]*$", h[:first_paren]):
            return "container"
        if "=" not in h[:first_paren] and not function_name(h):
            return "container"
    if m and m.group(1) == "enum":
        return "other"
    if not parens or function_name(h) is None:
        return "other"
    last_close = parens[-1][1]
    tail = h[last_close + 1:]
    # After the parameter list: `: member(x), other{y}` is a constructor's initialiser
    # list; a brace that follows a name there is a member's initialiser, not the body.
    init = re.search(r"(?<!:):(?!:)", h[parens[0][1] + 1:])
    if init:
        init_pos = parens[0][1] + 1 + init.start()
        if re.search(r"[A-Za-z_]\w*(<[^()]*>)?\s*$", h[init_pos + 1:]) and not re.search(r"[)}]\s*$", h):
            return "member-init"
        return "function"
    if "=" in re.sub(r"operator\s*[^\s(]*", "operator", h[:parens[0][0]]) and not function_name(h).endswith("(lambda)"):
        return "other"  # `Foo x = Foo(1) {`-like initialisers
    if not FUNCTION_TAIL.match(tail):
        return "other"  # `std::array<T, f() + 1> member_{`: the parentheses were not a parameter list
    return "function"


def scan(path, text):
    """Yield (name, first_line, last_line) for each function in one file."""
    code = blank(text)
    line_of = []
    ln = 1
    for ch in code:
        line_of.append(ln)
        if ch == "\n":
            ln += 1
    # Stack of scopes: (kind, name); kind 'container' or 'other'. Functions are
    # skipped whole once found.
    stack = [("container", "")]
    header_start = 0
    i, n = 0, len(code)
    while i < n:
        ch = code[i]
        if ch in ";":
            header_start = i + 1
        elif ch == "}":
            if len(stack) > 1:
                stack.pop()
            header_start = i + 1
        elif ch == "{":
            kind = classify(code[header_start:i]) if stack[-1][0] == "container" else "other"
            if kind == "member-init":
                i = match_brace(code, i) + 1
                continue
            if kind == "function":
                header = code[header_start:i]
                name = function_name(header)
                cls = "::".join(s[1] for s in stack if s[1])
                if cls and "::" not in name:
                    name = cls + "::" + name
                # The line of the name: the first line of the header that holds it.
                stripped = strip_template(header)
                offset = header_start + len(header) - len(stripped)
                first = offset + len(stripped) - len(stripped.lstrip())
                end = match_brace(code, i)
                yield name, line_of[first], line_of[min(end, n - 1)]
                i = end + 1
                header_start = i
                continue
            name = ""
            if kind == "container":
                m = re.search(r"\b(?:class|struct|union)\s+(?:\[\[[^\]]*\]\]\s*)?(?:alignas\s*\([^)]*\)\s*)?([A-Za-z_]\w*)",
                              strip_template(code[header_start:i]))
                name = m.group(1) if m else ""
            stack.append(("container" if kind == "container" else "other", name))
            header_start = i + 1
        elif ch == ":" and stack[-1][0] == "container":
            # Access specifiers (`public:`) end a header; `::` and init lists do not.
            before = code[header_start:i].strip()
            if before in ("public", "private", "protected"):
                header_start = i + 1
        i += 1


def match_brace(code, i):
    depth = 0
    for k in range(i, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


def files_under(roots):
    for root in roots:
        if os.path.isfile(root):
            yield root
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for f in sorted(filenames):
                if os.path.splitext(f)[1] in EXTS:
                    yield os.path.join(dirpath, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=["src", "tools"])
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args()
    found = []
    for path in files_under(args.paths):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for name, first, last in scan(path, text):
            found.append((last - first + 1, name, path, first, last))
    found.sort(key=lambda r: (-r[0], r[2], r[3]))
    print(f"| # | lines | function | where |")
    print(f"|---|---|---|---|")
    for k, (length, name, path, first, last) in enumerate(found[:args.top], 1):
        print(f"| {k} | {length} | `{name}` | {path}:{first}-{last} |")
    print(f"\n{len(found)} functions in {sum(1 for _ in files_under(args.paths))} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
