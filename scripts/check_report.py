#!/usr/bin/env python3
"""Renders a laya latency report (replay --html, bench-typing --html) in headless Chromium and checks it:
the page loads without errors, every <svg> drew something (bars, lines or points), and the
screenshot is a real picture (PNG decoded, not one flat colour).

  scripts/check_report.py REPORT.html [--png out.png]
Exit 77 (skipped) when Chromium is not installed (Debian: apt install chromium)."""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

ap = argparse.ArgumentParser()
ap.add_argument("report")
ap.add_argument("--png")
a = ap.parse_args()
browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
if not browser:
    print("SKIP: Chromium is not installed (apt install chromium)")
    sys.exit(77)
url = "file://" + os.path.abspath(a.report)
png = a.png or os.path.join(tempfile.mkdtemp(), "report.png")
common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
          "--v=0", "--user-data-dir=" + tempfile.mkdtemp()]
dom = subprocess.run(common + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
if dom.returncode != 0:
    sys.exit(f"FAIL: chromium --dump-dom exited {dom.returncode}: {dom.stderr[-2000:]}")
errors = [l for l in dom.stderr.splitlines() if "CONSOLE" in l and ("Error" in l or "error" in l)]
if errors:
    sys.exit("FAIL: the page logged errors:\n" + "\n".join(errors[:10]))
svgs = re.findall(r"<svg\b.*?</svg>", dom.stdout, re.S)
if not svgs:
    sys.exit("FAIL: no <svg> in the rendered page")
empty = [i for i, s in enumerate(svgs) if len(re.findall(r"<(rect|polyline|path)\b", s)) < 2]
if empty:
    sys.exit(f"FAIL: {len(empty)} of {len(svgs)} charts drew nothing (svg #{empty[:5]})")
shot = subprocess.run(common + ["--window-size=1400,2400", f"--screenshot={png}", url], capture_output=True,
                      text=True, timeout=120)
if shot.returncode != 0 or not os.path.exists(png):
    sys.exit(f"FAIL: no screenshot: {shot.stderr[-2000:]}")


def png_pixels(path):
    """(width, height, distinct colours in a sample of rows) of an 8-bit RGB/RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = {2: 3, 6: 4}[ctype]
    raw = zlib.decompress(idat)
    stride = w * bpp + 1
    prev = bytearray(w * bpp)
    colours = set()
    for y in range(h):
        f, line = raw[y * stride], bytearray(raw[y * stride + 1:(y + 1) * stride])
        for i in range(len(line)):  # undo the row filter (PNG spec, section 9)
            left = line[i - bpp] if i >= bpp else 0
            up, ul = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if f == 1: line[i] = (line[i] + left) & 255
            elif f == 2: line[i] = (line[i] + up) & 255
            elif f == 3: line[i] = (line[i] + (left + up) // 2) & 255
            elif f == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255
        prev = line
        if y % 16 == 0:
            colours.update(bytes(line[i:i + 3]) for i in range(0, len(line), bpp * 4))
    return w, h, len(colours)


w, h, colours = png_pixels(png)
if colours < 8:
    sys.exit(f"FAIL: the screenshot ({w}x{h}) has {colours} colours: nothing was drawn")
print(f"ok: {len(svgs)} charts, screenshot {w}x{h} with {colours} colours: {png}")
