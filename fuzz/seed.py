#!/usr/bin/env python3
"""Seed the fuzz corpora from real PBF files (tests/fixtures or $PBF_SORT_TEST_DATA):
BlobHeaders for `frame`, Blob messages for `blob`, decompressed blocks for
`block` and `scan`, and index and plan streams (made by the debug binaries, if
built) for `streams`. Usage: seed.py CORPUS_DIR [BIN_DIR]. Only inputs up to
MAX bytes are kept so every execution stays fast."""
import hashlib, os, struct, subprocess, sys, zlib

MAX = 256 * 1024
root = os.path.dirname(os.path.abspath(__file__))
data = os.environ.get("PBF_SORT_TEST_DATA") or os.path.join(root, "..", "tests", "fixtures")
corpus = sys.argv[1]
bins = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "..", "target", "debug")

def put(target, blob):
    if not blob or len(blob) > MAX:
        return
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(blob).hexdigest()), "wb") as f:
        f.write(blob)

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7F) << s; s += 7
        if c < 0x80:
            return v, i

def fields(b):
    i = 0
    while i < len(b):
        tag, i = varint(b, i)
        n, w = tag >> 3, tag & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 2:
            l, i = varint(b, i); v = b[i:i + l]; i += l
        elif w == 1:
            v = b[i:i + 8]; i += 8
        elif w == 5:
            v = b[i:i + 4]; i += 4
        else:
            return
        yield n, v

files = sorted(f for f in os.listdir(data) if f.endswith(".pbf"))
for name in files:
    raw = open(os.path.join(data, name), "rb").read()
    off, k = 0, 0
    while off + 4 <= len(raw) and k < 8:
        (hl,) = struct.unpack(">I", raw[off:off + 4])
        header = raw[off + 4:off + 4 + hl]
        try:
            size = dict(fields(header)).get(3, 0)
        except IndexError:
            break
        body = raw[off + 4 + hl:off + 4 + hl + size]
        put("frame", header)
        put("blob", body)
        try:
            f = dict(fields(body))
            block = f[1] if 1 in f else zlib.decompress(f[3]) if 3 in f else None
        except Exception:
            block = None
        if block is not None:
            put("block", block)
            put("scan", block)
        off += 4 + hl + size
        k += 1

index, overlap = os.path.join(bins, "pbf-index"), os.path.join(bins, "pbf-overlap")
if os.path.exists(index) and os.path.exists(overlap):
    for name in files:
        if name.startswith("bad-"):
            continue
        idx = subprocess.run([index, "-q", os.path.join(data, name)], capture_output=True).stdout
        put("streams", idx)
        put("streams", subprocess.run([overlap, "-q"], input=idx, capture_output=True).stdout)
for t in ["frame", "blob", "block", "scan", "streams"]:
    d = os.path.join(corpus, t)
    print(f"seed: {t}: {len(os.listdir(d)) if os.path.isdir(d) else 0} inputs")
