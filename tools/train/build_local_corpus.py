#!/usr/bin/env python3
"""Corpus part 1 (runs on the development machine, no GPU): English (and a
little Chinese) prose from Debian manual pages and /usr/share/doc, plus C/C++
headers from /usr/include. Writes xz-compressed JSON lines
{"src": path, "kind": "en"|"zh"|"c"|"py", "text": ...} that travel to the GPU
machine with `carry` (the Python part is collected there, see
collect_python.py).

Deterministic: files are visited in sorted order, exact duplicates (after
normalising whitespace) are dropped, and the output order is sorted by path.

  python3 tools/train/build_local_corpus.py --out build-train-data
"""
import argparse
import gzip
import hashlib
import html
import json
import lzma
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The public typing traces must not leak into training data.
from corpus_common import EXCLUDE_BASENAMES, path_hash01, trace_hit, write_part  # noqa: E402

# ---------------------------------------------------------------- roff -> text
_ESC_CHARS = {
    "-": "-", "e": "\\", "(em": "\u2014", "(en": "\u2013", "(bu": "\u2022", "(aq": "'", "(dq": '"',
    "(lq": "\u201c", "(rq": "\u201d", "(oq": "\u2018", "(cq": "\u2019", "(co": "\u00a9", "(rg": "\u00ae",
    "(tm": "\u2122", "(mu": "\u00d7", "(de": "\u00b0", "(+-": "\u00b1", "(ti": "~", "(ha": "^", "(ga": "`",
    "(rs": "\\", "(bv": "|", "(or": "|", "(->": "\u2192", "(<-": "\u2190", "(>=": "\u2265", "(<=": "\u2264",
    "(hy": "-", "(sq": "\u25a1", "(lB": "[", "(rB": "]", "(fo": "\u00ab", "(fc": "\u00bb",
}
_RE_FONT = re.compile(r"\\f(\[[^\]]*\]|\(..|.)")
_RE_SIZE = re.compile(r"\\s[+-]?\d+")
_RE_NAMED = re.compile(r"\\\[([^\]]*)\]")
_RE_TWO = re.compile(r"\\\((..)")
_RE_STR = re.compile(r"\\\*(\[[^\]]*\]|\(..|.)")
_RE_NUMREG = re.compile(r"\\n(\[[^\]]*\]|\(..|.)")
_RE_MISC = re.compile(r"\\[&|^%:,/)!cdu{}]|\\\"[^\n]*$|\\[hvwlLDxXNoZkbzR]'[^']*'")
_MACRO_TEXT = {"SH", "SS", "B", "I", "BI", "IB", "BR", "RB", "IR", "RI", "SM", "SB", "TP", "IP", "UR", "MT", "Nm",
               "Nd", "Sh", "Ss", "Pp", "Fl", "Ar", "Op", "Xr", "It", "Dl", "Em", "Pa", "Cm", "Li", "Dv", "Ev"}
_MACRO_PARA = {"PP", "LP", "P", "Pp", "sp", "br", "SH", "SS", "TP", "IP", "HP", "Sh", "Ss", "It"}


def _unescape(s):
    s = _RE_FONT.sub("", s)
    s = _RE_SIZE.sub("", s)
    s = _RE_MISC.sub("", s)
    s = _RE_STR.sub("", s)
    s = _RE_NUMREG.sub("", s)

    def named(m):
        return _ESC_CHARS.get("(" + m.group(1), "")
    s = _RE_NAMED.sub(named, s)
    s = _RE_TWO.sub(lambda m: _ESC_CHARS.get("(" + m.group(1), ""), s)
    s = s.replace("\\-", "-").replace("\\e", "\\").replace("\\ ", " ").replace("\\~", " ").replace("\\0", " ")
    s = s.replace("\\'", "'").replace("\\`", "`").replace("\\.", ".")
    s = re.sub(r"\\(.)", r"\1", s)
    return s


def roff_to_text(src):
    out = []
    para = []
    in_nofill = False

    def flush():
        if para:
            out.append((" ".join(para) if not in_nofill else "\n".join(para)).strip())
            para.clear()
    for line in src.splitlines():
        if line.startswith(".\\\"") or line.startswith("'\\\"") or line.startswith('.\\"'):
            continue
        if line.startswith(".") or line.startswith("'"):
            parts = line[1:].strip().split(None, 1)
            if not parts:
                continue
            mac = parts[0]
            arg = parts[1] if len(parts) > 1 else ""
            if mac in ("nf", "EX", "Bd"):
                flush(); in_nofill = True; continue
            if mac in ("fi", "EE", "Ed"):
                flush(); in_nofill = False; continue
            if mac in _MACRO_PARA:
                flush()
            if mac in _MACRO_TEXT and arg:
                arg = arg.replace('"', "")
                t = _unescape(arg).strip()
                if mac in ("SH", "Sh"):
                    flush(); out.append(t.upper() if t.isupper() else t); continue
                if mac in ("BR", "RB", "IR", "RI", "BI", "IB"):
                    t = "".join(arg.split())  # alternating fonts join without spaces
                    t = _unescape(" ".join(arg.split()))  # keep it readable
                para.append(t)
            continue
        t = _unescape(line)
        if in_nofill:
            para.append(t.rstrip())
        elif t.strip():
            para.append(t.strip())
        else:
            flush()
    flush()
    text = "\n\n".join(p for p in out if p)
    return re.sub(r"\n{3,}", "\n\n", text)


# ---------------------------------------------------------------- doc files
_RE_TAG = re.compile(r"<[^>]+>")


def html_to_text(s):
    s = re.sub(r"(?is)<(script|style)[^>]*>.*?</\1>", "", s)
    s = re.sub(r"(?i)<br\s*/?>|</p>|</h\d>|</li>|</tr>|</div>", "\n", s)
    s = _RE_TAG.sub("", s)
    s = html.unescape(s)
    s = re.sub(r"[ \t]+", " ", s)
    return re.sub(r"\n\s*\n\s*", "\n\n", s).strip()


def read_maybe_gz(path, limit=4 << 20):
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read(limit + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(limit + 1)
    except (OSError, EOFError, gzip.BadGzipFile, lzma.LZMAError):
        return None
    if len(data) > limit:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def looks_texty(s):
    if not s or "\x00" in s:
        return False
    letters = sum(c.isalpha() or c.isspace() for c in s[:20000])
    return letters > 0.75 * min(len(s), 20000)


def walk_sorted(root):
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            yield os.path.join(d, f)


def collect_man(root="/usr/share/man"):
    langs = {"": "en", "zh_CN": "zh", "zh_TW": "zh"}
    for sub in sorted(os.listdir(root)):
        if sub.startswith("man"):
            lang, base = "en", os.path.join(root, sub)
        elif sub in langs:
            lang, base = "zh", os.path.join(root, sub)
        else:
            continue
        for p in walk_sorted(base):
            if os.path.islink(p):
                continue
            src = read_maybe_gz(p)
            if not src or src.lstrip().startswith(".so "):
                continue
            text = roff_to_text(src)
            if len(text) < 200:
                continue
            yield {"src": p, "kind": lang, "text": text}


DOC_SKIP = re.compile(r"(^|/)(copyright|changelog[^/]*|.*\.(png|gif|jpg|svg|ico|css|js|pdf|ps|dvi|mo|po|pc|deb))$", re.I)
DOC_PROSE_EXT = re.compile(r"(\.(txt|md|rst|text|html?)|/(README|NEWS|TODO|FAQ|AUTHORS|THANKS|HACKING|USAGE|BUGS)[^/]*)(\.gz)?$", re.I)


def collect_doc(root="/usr/share/doc"):
    for p in walk_sorted(root):
        if os.path.islink(p) or DOC_SKIP.search(p) or not DOC_PROSE_EXT.search(p):
            continue
        s = read_maybe_gz(p)
        if not s:
            continue
        if re.search(r"\.html?(\.gz)?$", p, re.I):
            s = html_to_text(s)
        if len(s) < 200 or not looks_texty(s):
            continue
        yield {"src": p, "kind": "en", "text": s}


def collect_info(root="/usr/share/info"):
    for p in walk_sorted(root):
        if os.path.islink(p) or not re.search(r"\.info(-\d+)?(\.gz)?$", p):
            continue
        s = read_maybe_gz(p)
        if not s:
            continue
        s = s.replace("\x1f", "").replace("\x7f", "")
        s = re.sub(r"\n\s*\*\s*Menu:.*?(?=\n\n)", "", s, flags=re.S)
        if len(s) < 200:
            continue
        yield {"src": p, "kind": "en", "text": s}


def keep(d, gcloud_cap_ppm=80_000):
    """Thousands of near-identical generated pages (Google Cloud CLI) would be
    half of the English: keep a hash-chosen 8% of them."""
    if "/gcloud" in d["src"]:
        h = int(hashlib.md5(d["src"].encode()).hexdigest()[:8], 16) % 1_000_000
        return h < gcloud_cap_ppm
    return True


def collect_headers(root="/usr/include", budget=40 << 20):
    total = 0
    for p in walk_sorted(root):
        if os.path.islink(p) or not re.search(r"\.(h|hpp|hh|hxx|inl|tcc)$|/c\+\+/\d+/[a-z_]+$", p):
            continue
        s = read_maybe_gz(p, limit=1 << 20)
        if not s or len(s) < 200:
            continue
        total += len(s)
        if total > budget:
            break
        yield {"src": p, "kind": "c", "text": s}


def collect_python(roots, budget):
    total = 0
    for root in roots:
        for p in walk_sorted(root):
            if not p.endswith(".py") or os.path.basename(p) in EXCLUDE_BASENAMES or os.path.islink(p):
                continue
            s = read_maybe_gz(p, limit=1 << 20)
            if not s or len(s) < 100:
                continue
            total += len(s)
            if total > budget:
                return
            yield {"src": p, "kind": "py", "text": s}


def norm_key(text):
    return hashlib.sha1(" ".join(text.split()).encode("utf-8")).digest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="build-train-data")
    ap.add_argument("--header-mb", type=int, default=16, help="C/C++ headers: the first N MiB in path order")
    ap.add_argument("--en-mb", type=float, default=32,
                    help="English: keep a hash-chosen subset of about N MiB (the fetched parts add more)")
    ap.add_argument("--reuse", action="store_true", help="re-filter OUT/local_corpus.jsonl.xz instead of collecting again")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    seen = set()
    stats = {}
    docs = []
    if args.reuse:  # the man/doc/header part of an earlier run of this script (same files)
        def reuse():
            with lzma.open(os.path.join(args.out, "local_corpus.jsonl.xz"), "rt", encoding="utf-8") as f:
                for line in f:
                    d = json.loads(line)
                    if not d["src"].startswith("/usr/share/info/"):
                        yield d
        gens = (reuse(), collect_info())
    else:
        gens = (collect_man(), collect_doc(), collect_info(), collect_headers(budget=args.header_mb << 20))
    for gen in gens:
        for d in gen:
            if not keep(d):
                continue
            if os.path.basename(d["src"]) in EXCLUDE_BASENAMES or trace_hit(d["text"]):
                continue
            k = norm_key(d["text"])
            if k in seen:
                continue
            seen.add(k)
            docs.append(d)
            s = stats.setdefault(d["kind"], [0, 0])
            s[0] += 1
            s[1] += len(d["text"])
    en = [d for d in docs if d["kind"] == "en"]
    en_total = sum(len(d["text"]) for d in en)
    if en_total > args.en_mb * (1 << 20):  # hash-chosen cap (fetch_corpus.py adds more English)
        keep_share = args.en_mb * (1 << 20) / en_total
        docs = [d for d in docs if d["kind"] != "en" or path_hash01(d["src"], "local-en") < keep_share]
        stats["en"] = [sum(1 for d in docs if d["kind"] == "en"), sum(len(d["text"]) for d in docs if d["kind"] == "en")]
        print(f"en: kept a hash-chosen {keep_share:.0%} of {en_total / 1e6:.1f} M chars")
    docs.sort(key=lambda d: d["src"])
    path = os.path.join(args.out, "local_corpus.jsonl.xz")
    write_part(path, docs, preset=9)
    for k, (n, c) in sorted(stats.items()):
        print(f"{k}: {n} files, {c / 1e6:.1f} M chars")
    print("wrote", path, os.path.getsize(path) / 1e6, "MB")


if __name__ == "__main__":
    sys.exit(main())
