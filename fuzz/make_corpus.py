#!/usr/bin/env python3
"""Writes the seed corpus for the parser fuzzers (fuzz/corpus/{gguf,safetensors,tokenizer_json,cli_numbers,trace}/).

Every file is tiny (< 4 KB) and valid, so the fuzzers start from inputs that
reach deep into the parsers. Run from anywhere: python3 fuzz/make_corpus.py
"""
import hashlib
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
              BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == STRING:
        return gstr(v)
    if t == ARRAY:
        et, items = v
        out = struct.pack("<IQ", et, len(items))
        for it in items:
            out += gval(et, it)
        return out
    return struct.pack(SCALAR_FMT[t], v)


def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ne, ggml_type, data_bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    off = 0
    offsets = []
    for name, ne, gt, data in tensors:
        offsets.append(off)
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", gt, off)
        off = (off + len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    base = len(out)
    for (name, ne, gt, data), o in zip(tensors, offsets):
        out += b"\0" * (base + o - len(out)) + data
    return out


def f32s(n):
    return b"".join(struct.pack("<f", float(i)) for i in range(n))


def safetensors(entries, metadata=None):
    """entries: [(name, dtype, shape, data_bytes)]."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def tokenizer_json(tj, config=None):
    """tokenizer.json, then a NUL byte and tokenizer_config.json (tokenizer_json_fuzz's input)."""
    out = json.dumps(tj, ensure_ascii=False).encode()
    if config is not None:
        out += b"\0" + json.dumps(config).encode()
    return out


def byte_level_vocab():
    """GPT-2's byte alphabet as tokens 0..255."""
    chars, n = [], 0
    for b in range(256):
        if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + n))
            n += 1
    return {c: i for i, c in enumerate(chars)}


def trace(name, events, header_extra=None):
    """A valid typing trace (tools/laya/player/trace.h): the header with the rebuilt
    document's sha256 and counts, then one event per line."""
    doc = ""
    for e in events:
        if e["op"] in ("insert", "accept"):
            doc = doc[:e["pos"]] + e["text"] + doc[e["pos"]:]
        elif e["op"] == "delete":
            doc = doc[:e["pos"]] + doc[e["pos"] + e["n"]:]
    head = {"trace": name, "chars": len(doc), "events": len(events),
            "final_sha256": hashlib.sha256(doc.encode()).hexdigest()}
    head.update(header_extra or {})
    lines = [json.dumps(head, ensure_ascii=False)] + [json.dumps(e, ensure_ascii=False) for e in events]
    return ("\n".join(lines) + "\n").encode()


def typed(text, t0=0, step=90):
    """One insert per character of `text`, at the end."""
    return [{"t_ms": t0 + i * step, "op": "insert", "pos": i, "text": c} for i, c in enumerate(text)]


def main():
    g = {
        "all_types.gguf": gguf(
            [("general.architecture", STRING, "llama"),
             ("v.u8", U8, 200), ("v.i8", I8, -5), ("v.u16", U16, 60000), ("v.i16", I16, -300),
             ("v.u32", U32, 4000000000), ("v.i32", I32, -7), ("v.f32", F32, 1.5), ("v.bool", BOOL, 1),
             ("v.u64", U64, 1 << 40), ("v.i64", I64, -(1 << 40)), ("v.f64", F64, 2.25),
             ("tokenizer.ggml.tokens", ARRAY, (STRING, ["a", "bc", ""])),
             ("tokenizer.ggml.scores", ARRAY, (F32, [0.5, -1.0])),
             ("v.ints", ARRAY, (I32, [1, 2, 3])),
             ("v.nested", ARRAY, (ARRAY, [(I16, [1, 2]), (STRING, ["s"]), (ARRAY, [(U8, [9])])]))],
            [("a.weight", [4, 2], 0, f32s(8)),
             ("b.f16", [3], 1, b"\x00\x3c" * 3),
             ("c.q8", [32], 8, b"\x00\x3c" + bytes(range(32)))]),
        "v2_align64.gguf": gguf([("general.alignment", U32, 64), ("x", STRING, "y")],
                                [("t0", [3], 0, f32s(3)), ("t1", [2, 2, 1, 1], 0, f32s(4))],
                                version=2, alignment=64),
        "header_only.gguf": gguf([("general.name", STRING, "empty")], []),
        "kquant.gguf": gguf([("general.architecture", STRING, "qwen3")],
                            [("q4k", [256], 12, bytes(144)), ("q6k", [256], 14, bytes(210)),
                             ("q4_0", [32, 2], 2, bytes(36)), ("bf16", [4], 30, bytes(8))]),
    }
    s = {
        "mixed.safetensors": safetensors(
            [("w.f32", "F32", [2, 3], f32s(6)), ("w.f16", "F16", [4], b"\x00\x3c" * 4),
             ("w.bf16", "BF16", [1, 2, 2], b"\x80\x3f" * 4)],
            metadata={"format": "pt"}),
        "empty.safetensors": safetensors([]),
        "scalar_zero.safetensors": safetensors([("s", "F32", [], f32s(1)), ("z", "BF16", [0, 3], b"")]),
        # An MLX-quantized module: U32 packed values, F16 scales and biases.
        "mlx_q4.safetensors": safetensors(
            [("m.weight", "U32", [2, 4], b"\x10\x32\x54\x76" * 8), ("m.scales", "F16", [2, 1], b"\x00\x3c" * 2),
             ("m.biases", "F16", [2, 1], b"\x00\x00" * 2)],
            metadata={"format": "mlx"}),
    }
    bl = byte_level_vocab()
    bl.update({"he": 256, "ll": 257, "hell": 258, "\u0120w": 259})
    t = {
        "byte_level.json": tokenizer_json(
            {"model": {"type": "BPE", "vocab": bl, "merges": ["h e", "l l", "he ll", "\u0120 w"]},
             "normalizer": {"type": "NFC"},
             "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                 {"type": "Split", "pattern": {"Regex": "\\p{L}+|\\p{N}{1,3}|\\s+"}, "behavior": "Isolated"},
                 {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
             "post_processor": {"type": "Sequence", "processors": [
                 {"type": "ByteLevel"},
                 {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                           {"Sequence": {"id": "A", "type_id": 0}}],
                  "special_tokens": {"<s>": {"id": "<s>", "ids": [260]}}}]},
             "decoder": {"type": "ByteLevel"},
             "added_tokens": [{"id": 260, "content": "<s>", "special": True},
                              {"id": 261, "content": "</s>", "special": True},
                              {"id": 262, "content": "<|user|>", "special": False, "lstrip": True}]},
            {"bos_token": "<s>", "eos_token": {"content": "</s>"}}),
        "sentencepiece.json": tokenizer_json(
            {"model": {"type": "BPE", "byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>",
                       "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0xC3>": 3, "<0xA9>": 4, "\u2581": 5,
                                 "a": 6, "b": 7, "\u2581a": 8, "ab": 9, "\u2581ab": 10},
                       "merges": [["\u2581", "a"], "a b", "\u2581a b"]},
             "normalizer": {"type": "Sequence", "normalizers": [
                 {"type": "Prepend", "prepend": "\u2581"},
                 {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
             "decoder": {"type": "Sequence", "decoders": [
                 {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                 {"type": "ByteFallback"}, {"type": "Fuse"},
                 {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
             "added_tokens": [{"id": 1, "content": "<s>", "special": True},
                              {"id": 2, "content": "</s>", "special": True}]},
            {"bos_token": "<s>", "eos_token": "</s>"}),
        "metaspace_no_config.json": tokenizer_json(
            {"model": {"type": "BPE", "vocab": {"\u2581": 0, "x": 1, "\u2581x": 2}, "merges": ["\u2581 x"]},
             "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"},
             "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"}}),
    }
    # The CLI number parser: one value per file, valid and near-valid.
    n = {f"v{i}.txt": v.encode() for i, v in enumerate(
        ["0", "8", "-1", "007", "1048576", "9223372036854775807", "99999999999999999999", "0.7", "-2.5E-1", ".5",
         "1e3", "nan", "0x10", " 5", "1,2,3", "[1, 2,\n3]", "1,,2", "", "\xff"])}
    word = typed("def f(x):")
    tr = {
        "typing.jsonl": trace("typing", word + [
            {"t_ms": 900, "op": "delete", "pos": 8, "n": 1},
            {"t_ms": 950, "op": "move", "pos": 0},
            {"t_ms": 990, "op": "move", "pos": 8},
            {"t_ms": 1000, "op": "insert", "pos": 8, "text": ")"},
            {"t_ms": 1100, "op": "accept", "pos": 9, "text": "\n    return x\n"}]),
        "unicode.jsonl": trace("zh", [
            {"t_ms": 10, "op": "insert", "pos": 0, "text": "\u4f1a\u8bae"},
            {"t_ms": 20.5, "op": "insert", "pos": 1, "text": "\u00e9\U0001F600"},
            {"t_ms": 30, "op": "delete", "pos": 0, "n": 2}]),
        "paste_then_edit.jsonl": trace("paste", [
            {"t_ms": 0, "op": "insert", "pos": 0, "text": "line one\nline two\n"},
            {"t_ms": 5, "op": "move", "pos": 5},
            {"t_ms": 7, "op": "delete", "pos": 5, "n": 3},
            {"t_ms": 9, "op": "insert", "pos": 5, "text": "1"}], {"lang": "en", "typed_span": [5, 6]}),
    }
    for sub, files in (("gguf", g), ("safetensors", s), ("tokenizer_json", t), ("cli_numbers", n), ("trace", tr)):
        d = os.path.join(HERE, "corpus", sub)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            assert len(data) < 4096, name
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            print(f"{sub}/{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
