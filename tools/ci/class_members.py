#!/usr/bin/env python3
"""The data members of one C++ class, counted from its header.

    python3 tools/ci/class_members.py src/session/session.h Session
    python3 tools/ci/class_members.py --list src/session/session.h Session

Counts the non-static data members declared directly in the class body (one
per declarator: `size_t a_ = 0, b_ = 0;` is two); members of nested types,
member functions, static members, using / typedef / friend declarations and
nested type definitions are not data members of the class. Static data
members are counted apart. Standard library only (it shares the comment and
literal blanking of longest_functions.py).
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from longest_functions import blank, match_brace  # noqa: E402

FUNCTION_TAIL = re.compile(r"\)\s*(const|noexcept|override|final|volatile|&|&&|\s|->[^{;]*)*$")


def class_body(code, name):
    m = re.search(r"\b(class|struct)\s+" + re.escape(name) + r"\b[^;{]*\{", code)
    if not m:
        raise SystemExit(f"no definition of class {name}")
    start = m.end() - 1
    return code[start + 1:match_brace(code, start)]


def statements(body):
    """Split a class body into its member declarations (text), skipping
    function bodies."""
    out, cur, i = [], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "{":
            end = match_brace(body, i)
            if FUNCTION_TAIL.search("".join(cur)):
                out.append("".join(cur) + "{}")  # an inline function: its body ends it
                cur = []
            else:
                cur.append(body[i:end + 1])      # a brace initialiser or a nested type's body
            i = end + 1
            continue
        if ch == ";":
            out.append("".join(cur))
            cur = []
        elif ch == ":" and re.fullmatch(r"\s*(public|private|protected)\s*", "".join(cur)):
            cur = []
        else:
            cur.append(ch)
        i += 1
    return [" ".join(s.split()) for s in out if s.strip()]


def strip_angles(s):
    prev = None
    while prev != s:
        prev = s
        s = re.sub(r"<[^<>;{}]*>", "", s)
    return s


def split_top(s, sep):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def members(stmts):
    data, static = [], []
    for s in stmts:
        if re.match(r"^(using|typedef|friend|static_assert|template)\b", s):
            continue
        if re.search(r"\boperator\b", s):
            continue  # an operator (`operator=(...) = delete` would split at its `=`)
        if re.match(r"^(class|struct|union|enum)\b", s) and "{" in s:
            continue  # a nested type's definition
        t = strip_angles(s)
        # Each declarator, less its initialiser (`= x` or `{x}`).
        decls = [re.sub(r"\{.*\}$", "", split_top(d, "=")[0]).strip() for d in split_top(t, ",")]
        if "(" in decls[0]:
            continue  # a member function (declaration, definition, = default / = delete)
        names = [re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*(:\s*\d+)?$", d) for d in decls]
        names = [n.group(1) for n in names if n]
        (static if re.match(r"^(inline\s+)?(static|constexpr)\b", s) else data).extend(names)
    return data, static


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("header")
    ap.add_argument("cls")
    ap.add_argument("--list", action="store_true", help="name every member")
    args = ap.parse_args()
    with open(args.header, encoding="utf-8") as f:
        code = blank(f.read())
    data, static = members(statements(class_body(code, args.cls)))
    print(f"class {args.cls} ({args.header}): {len(data)} data members, {len(static)} static")
    if args.list:
        for n in data:
            print("  " + n)
        for n in static:
            print("  static " + n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
