#!/usr/bin/env python3
"""docs/ARCHITECTURE.md's layer map against the build's own list of layers.

    python3 tools/ci/check_arch_doc.py           # check (the ctest test docs.architecture_layers)
    python3 tools/ci/check_arch_doc.py --write   # rewrite the generated table, then check

The layers are the laya_layer(<name> SOURCES ... SEES <folders> DEPS ...) calls
of CMakeLists.txt, in the order written (lowest first). The check fails, with
what to do, when
  - the table between <!-- layers:begin --> and <!-- layers:end --> is not the
    one --write generates from those calls (a row per layer, what it SEES);
  - the diagram (the first ``` block of the doc) does not name every layer;
  - a top-level folder of src/ is no layer, or a layer's SEES names anything
    but itself and layers listed before it, or a folder src/ lacks (the build
    would link a folder that is not a layer, or a layer that points upwards);
  - a file of src/session/ is not named, in backticks (`scheduler` or
    `scheduler.h`), between <!-- session-parts:begin --> and <!-- session-parts:end -->.
Standard library only; runs in well under a second.
"""
import argparse
import difflib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = "docs/ARCHITECTURE.md"
CMAKE = "CMakeLists.txt"
BEGIN, END = "<!-- layers:begin -->", "<!-- layers:end -->"
PARTS_BEGIN, PARTS_END = "<!-- session-parts:begin -->", "<!-- session-parts:end -->"
PARTS_DIR = "src/session"
KEYWORDS = ("DIR", "SOURCES", "SEES", "DEPS", "LINK")


def strip_cmake_comments(text):
    """Drop # comments (and #[[ ]] bracket comments) outside quoted arguments."""
    out, i, n, quoted = [], 0, len(text), False
    while i < n:
        c = text[i]
        if quoted:
            if c == "\\":
                out.append(text[i:i + 2])
                i += 2
                continue
            quoted = c != '"'
        elif c == '"':
            quoted = True
        elif c == "#":
            m = re.match(r"#\[(=*)\[", text[i:])
            if m:
                end = text.find("]" + m.group(1) + "]", i + m.end())
                i = n if end < 0 else end + len(m.group(1)) + 2
            else:
                end = text.find("\n", i)
                i = n if end < 0 else end
            continue
        out.append(c)
        i += 1
    return "".join(out)


def cmake_layers(path):
    """[(name, [seen folders], dir), ...] in the order the laya_layer() calls stand
    (dir: the layer's folder, src/<name> unless DIR says another)."""
    with open(path, encoding="utf-8") as f:
        text = strip_cmake_comments(f.read())
    layers = []
    for m in re.finditer(r"(?<![\w(])laya_layer\s*\(", text):
        if re.search(r"function\s*\(\s*$", text[:m.start()]):
            continue  # the definition, function(laya_layer name)
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        args = text[m.end():i - 1].split()
        name, sees, key, folder = args[0], [], None, None
        for a in args[1:]:
            if a in KEYWORDS:
                key = a
            elif key == "SEES":
                sees.append(a)
            elif key == "DIR":
                folder = a
        layers.append((name, sees, folder or f"src/{name}"))
    return layers


def table(layers):
    rows = [BEGIN,
            "<!-- generated from CMakeLists.txt's laya_layer() calls: python3 tools/ci/check_arch_doc.py --write -->",
            "",
            "| layer | may include (its `SEES` list in CMakeLists.txt, besides itself) |",
            "|---|---|"]
    for name, sees, folder in layers:
        others = [s for s in sees if s != name]
        label = name if folder == f"src/{name}" else f"{name} (`{folder}/`)"
        rows.append(f"| {label} | {', '.join(others) if others else '—'} |")
    rows += ["", END]
    return "\n".join(rows)


def between(doc, begin, end):
    """(start, stop) of the text from begin through end, or None."""
    a = doc.find(begin)
    b = doc.find(end, a + 1) if a >= 0 else -1
    return (a, b + len(end)) if a >= 0 and b >= 0 else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"rewrite the table in {DOC}")
    ap.add_argument("--check", action="store_true", help="only check (the default)")
    ap.add_argument("--root", default=ROOT, help="the repository (default: this script's)")
    args = ap.parse_args()
    doc_path = os.path.join(args.root, DOC)
    layers = cmake_layers(os.path.join(args.root, CMAKE))
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    errors = []
    if not layers:
        errors.append(f"{CMAKE}: no laya_layer() calls found")

    # The build's list itself: every src/ folder a layer, every SEES a layer at or below.
    names = [n for n, _, _ in layers]
    folders = {n: f for n, _, f in layers}
    for k, (name, sees, _) in enumerate(layers):
        if name not in sees:
            errors.append(f"{CMAKE}: layer {name}: SEES does not list {name} itself")
        for s in sees:
            folder = folders.get(s, f"src/{s}")
            if not os.path.isdir(os.path.join(args.root, folder)):
                errors.append(f"{CMAKE}: layer {name} SEES {s}, but there is no folder {folder}/")
            if s != name and s not in names[:k]:
                where = "listed after it" if s in names else "not a layer"
                errors.append(f"{CMAKE}: layer {name} SEES {s}, which is {where} (layers stand lowest first)")
    src = os.path.join(args.root, "src")
    for d in sorted(os.listdir(src)):
        if os.path.isdir(os.path.join(src, d)) and d not in names:
            errors.append(f"src/{d}/ is no layer: add a laya_layer({d} ...) call to {CMAKE}")

    # The generated table.
    want = table(layers)
    span = between(doc, BEGIN, END)
    if span is None:
        errors.append(f"{DOC}: no {BEGIN} ... {END} block (the layer table's place)")
    elif doc[span[0]:span[1]] != want:
        if args.write:
            doc = doc[:span[0]] + want + doc[span[1]:]
            with open(doc_path, "w", encoding="utf-8") as f:
                f.write(doc)
            print(f"{DOC}: layer table rewritten from {CMAKE}")
        else:
            diff = difflib.unified_diff(doc[span[0]:span[1]].splitlines(), want.splitlines(),
                                        f"{DOC} (now)", f"{DOC} (from {CMAKE})", lineterm="")
            errors.append(f"{DOC}: the layer table differs from {CMAKE}'s laya_layer() calls "
                          f"(run: python3 tools/ci/check_arch_doc.py --write):\n" + "\n".join(diff))

    # The diagram names every layer.
    fence = re.search(r"^```[^\n]*\n(.*?)^```", doc, re.S | re.M)
    if not fence:
        errors.append(f"{DOC}: no diagram (a ``` block) found")
    else:
        missing = [n for n in names if not re.search(r"\b" + re.escape(n) + r"\b", fence.group(1))]
        if missing:
            errors.append(f"{DOC}: the diagram does not show layer(s) {', '.join(missing)}: draw them in")

    # The session layer's parts: every file named.
    parts = between(doc, PARTS_BEGIN, PARTS_END)
    if parts is None:
        errors.append(f"{DOC}: no {PARTS_BEGIN} ... {PARTS_END} block (the session layer's parts)")
    else:
        block = doc[parts[0]:parts[1]]
        stems = set()
        for dirpath, _dirs, files in os.walk(os.path.join(args.root, PARTS_DIR)):
            for f in files:
                if f.endswith((".h", ".cpp", ".inc")):
                    stems.add(os.path.splitext(f)[0])
        # Named in backticks, alone or with its extension: `scheduler`, `scheduler.h`.
        missing = sorted(s for s in stems if not re.search(r"`" + re.escape(s) + r"(\.\w+)?`", block))
        if missing:
            errors.append(f"{DOC}: the session layer's parts do not name {', '.join(missing)} "
                          f"({PARTS_DIR}/): add a line for each between the session-parts markers")

    if errors:
        for e in errors:
            print("error: " + e, file=sys.stderr)
        return 1
    print(f"{DOC}: the layer table, diagram and session parts agree with {CMAKE} ({len(layers)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
