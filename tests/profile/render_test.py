#!/usr/bin/env python3
"""The profile's charts, drawn without a browser: the HTML report and phase5_decode.svg
carry the three charts, and phase5_decode.png (librsvg's rendering of the SVG) shows
them where the SVG puts them.

    render_test.py        (run by Bazel; the profile of //tests/profile:profile)

Checks, on the tiny model's real profile run:
  - the HTML report and the SVG document each hold <svg id="waterfall|breakdown|trend">,
    every <svg> element of the HTML is well-formed XML, and the charts have 6 bars
    (5 stages + best), >= 6 breakdown segments and 5 trend series;
  - the PNG decodes (a small decoder below: zlib and the five PNG row filters), has the
    SVG's size in pixels, a white page, text drawn (dark pixels: a missing font draws
    none), and at the centre of every waterfall bar and breakdown segment at least 6 px
    wide and high, that shape's fill colour 3 px under its top edge (within 8 of 255 per
    channel: antialiasing reaches 1 px into a shape). A chart drawn at the wrong place, in the wrong colour,
    scaled, or not at all fails here.
The SVG and the PNG are kept in the test's undeclared outputs
(bazel-testlogs/tests/profile/render_test/test.outputs/).
"""
import colorsys
import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib

SVG_NS = "{http://www.w3.org/2000/svg}"


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def decode_png(data):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB / RGBA PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("phase5_decode.png does not start with the PNG signature")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]:
            fail(f"PNG chunk {kind!r} has a bad CRC")
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        pos += 12 + length
    if ihdr is None:
        fail("PNG has no IHDR")
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace != 0:
        fail(f"PNG is depth {depth}, colour type {ctype}, interlace {interlace}; this decoder reads 8-bit RGB(A)")
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    if len(raw) != h * (stride + 1):
        fail(f"PNG data is {len(raw)} bytes, expected {h * (stride + 1)}")
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            elif f != 0:
                fail(f"PNG row {y} has filter type {f}")
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def parse_colour(fill):
    m = re.fullmatch(r"#([0-9a-fA-F]{6})", fill)
    if m:
        return tuple(int(m.group(1)[i:i + 2], 16) for i in (0, 2, 4))
    m = re.fullmatch(r"hsl\(([\d.]+),([\d.]+)%,([\d.]+)%\)", fill)
    if m:
        r, g, b = colorsys.hls_to_rgb(float(m.group(1)) / 360, float(m.group(3)) / 100, float(m.group(2)) / 100)
        return (round(r * 255), round(g * 255), round(b * 255))
    fail(f"unexpected fill {fill!r}")


def chart_counts(where, root_or_text):
    text = root_or_text
    for cid in ("waterfall", "breakdown", "trend"):
        if f'<svg id="{cid}"' not in text:
            fail(f'{where}: chart <svg id="{cid}"> missing')
    bars = text.count('class="bar ')
    segs = text.count('class="seg"')
    series = text.count('class="series"')
    print(f"{where}: {bars} waterfall bars, {segs} breakdown segments, {series} trend series")
    if bars != 6:
        fail(f"{where}: expected 6 waterfall bars (5 stages + best), got {bars}")
    if segs < 6:
        fail(f"{where}: expected >= 6 breakdown segments, got {segs}")
    if series != 5:
        fail(f"{where}: expected 5 trend series, got {series}")


def main():
    tmp = os.environ["TEST_TMPDIR"]
    out = os.path.join(tmp, "profile_out")
    with open(os.path.join(tmp, "profile.log"), "w") as log:
        rc = subprocess.run(["tests/profile/profile.sh", f"--out_dir={out}", "--build_file=tests/profile/BUILD",
                             "--bandwidth_mib=64"], stdout=log, stderr=subprocess.STDOUT).returncode
    log_text = open(os.path.join(tmp, "profile.log")).read()
    if rc != 3:  # 3: the forced stage was reverted, as intended
        print(log_text, file=sys.stderr)
        fail(f"the profile exited with {rc}, expected 3")

    html = open(os.path.join(out, "phase5_decode.html")).read()
    chart_counts("HTML", html)
    for m in re.finditer(r"<svg .*?</svg>", html, re.S):
        try:
            ET.fromstring(m.group(0))
        except ET.ParseError as e:
            fail(f"an <svg> of the HTML report is not well-formed: {e}")

    svg_text = open(os.path.join(out, "phase5_decode.svg")).read()
    chart_counts("SVG", svg_text)
    try:
        root = ET.fromstring(svg_text.encode())
    except ET.ParseError as e:
        fail(f"phase5_decode.svg is not well-formed: {e}")

    png_path = os.path.join(out, "phase5_decode.png")
    if not os.path.exists(png_path):
        print(log_text, file=sys.stderr)
        fail("no phase5_decode.png written")
    kept = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
    if kept:
        shutil.copy(png_path, kept)
        shutil.copy(os.path.join(out, "phase5_decode.svg"), kept)
    w, h, px = decode_png(open(png_path, "rb").read())
    sw, sh = float(root.get("width")), float(root.get("height"))
    print(f"PNG {w}x{h} px, SVG {sw}x{sh}")
    if (w, h) != (round(sw), round(sh)):
        fail(f"the PNG is {w}x{h}, the SVG {sw}x{sh}: drawn at another scale")
    if px[2][2] != (255, 255, 255) or px[h - 3][w - 3] != (255, 255, 255):
        fail(f"the page is not white: corners {px[2][2]}, {px[h - 3][w - 3]}")
    # The text is #222; the darkest fill (BO write) is #555, 85 a channel.
    dark = sum(1 for row in px for p in row if max(p) < 70)
    print(f"{dark} dark (text) pixels")
    if dark < 2000:
        fail(f"only {dark} dark pixels: the text (heading, labels, axes) is not drawn")

    checked = 0
    for chart in root.iter(SVG_NS + "svg"):
        if chart.get("id") not in ("waterfall", "breakdown"):
            continue
        ox, oy = float(chart.get("x", 0)), float(chart.get("y", 0))
        for rect in chart.iter(SVG_NS + "rect"):
            cls = rect.get("class", "")
            if not (cls.startswith("bar ") or cls == "seg"):
                continue
            x, y, rw, rh = (float(rect.get(k)) for k in ("x", "y", "width", "height"))
            if rw < 6 or rh < 6:
                continue
            # 3 px under the top edge, halfway across: inside the shape, clear of the
            # white percentage a wide segment carries at its centre.
            cx, cy = int(ox + x + rw / 2), int(oy + y + 3)
            want, got = parse_colour(rect.get("fill")), px[cy][cx]
            if any(abs(a - b) > 8 for a, b in zip(want, got)):
                fail(f"{chart.get('id')} {cls} at ({cx},{cy}): pixel {got}, its fill {rect.get('fill')} is {want}")
            checked += 1
    print(f"{checked} bars / segments have their fill colour")
    if checked < 6:
        fail(f"only {checked} bars / segments large enough to check; expected >= 6")
    print(f"PASS: {png_path} ({os.path.getsize(png_path)} bytes)")


if __name__ == "__main__":
    main()
