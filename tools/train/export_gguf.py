#!/usr/bin/env python3
"""Hugging Face Llama folder (config.json, model.safetensors, tokenizer.json)
-> GGUF v3 (F16, Q8_0 or F32), with the tokenizer in the metadata as
llama.cpp's convert_hf_to_gguf.py writes it for a "gpt2" / "llama-bpe" BPE
tokenizer. Needs numpy only (safetensors is parsed here).

  python3 export_gguf.py HF_DIR OUT.gguf --type q8_0 [--name NAME]

Conventions (as llama.cpp's converter):
- q/k projection rows are permuted for the interleaved RoPE of arch "llama";
- tensors are written with dims reversed (ne[0] = row length);
- 1-D tensors (norms) stay F32; Q8_0 blocks are 32 values: fp16 d = max|x|/127,
  then 32 int8 q = round(x / d) (roundf: half away from zero).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

GGUF_MAGIC = b"GGUF"
ALIGN = 32
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
FTYPE = {"f32": 0, "f16": 1, "q8_0": 7}


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        dt = {"F32": np.float32, "F16": np.float16, "BF16": None, "F64": np.float64}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            f.seek(base + a)
            raw = f.read(b - a)
            if info["dtype"] == "BF16":
                u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
                arr = u.view(np.float32)
            else:
                arr = np.frombuffer(raw, dtype=dt[info["dtype"]])
            out[name] = arr.reshape(info["shape"]).astype(np.float32)
        return out


def permute(w, n_head, n_head_kv=None):
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def quantize_q8_0(x):
    """Exact ggml quantize_row_q8_0_ref layout: per block fp16 d, 32 x int8."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    assert x.shape[-1] % 32 == 0, x.shape
    blocks = x.reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d > 0, np.float32(1.0) / d, np.float32(0.0)).astype(np.float32)
    v = blocks * idv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)
    out = np.empty((blocks.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


class Writer:
    def __init__(self):
        self.kv = []
        self.tensors = []  # (name, shape(ne order), ggml type, bytes)

    def add(self, key, vtype, value):
        self.kv.append((key, vtype, value))

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _val(self, vtype, v):
        if vtype == T_STRING:
            return self._str(v)
        if vtype == T_ARRAY:
            et, items = v
            body = b"".join(self._val(et, x) for x in items) if et == T_STRING else \
                np.asarray(items, dtype={T_INT32: "<i4", T_UINT32: "<u4", T_FLOAT32: "<f4", T_INT64: "<i8", T_UINT8: "u1",
                                          T_BOOL: "u1"}[et]).tobytes()
            return struct.pack("<IQ", et, len(items)) + body
        fmt = {T_UINT8: "B", T_INT8: "b", T_UINT16: "H", T_INT16: "h", T_UINT32: "I", T_INT32: "i", T_FLOAT32: "f",
               T_BOOL: "?", T_UINT64: "Q", T_INT64: "q", T_FLOAT64: "d"}[vtype]
        return struct.pack("<" + fmt, v)

    def write(self, path):
        with open(path, "wb") as f:
            f.write(GGUF_MAGIC + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
            for k, t, v in self.kv:
                f.write(self._str(k) + struct.pack("<I", t) + self._val(t, v))
            off = 0
            for name, ne, gt, data in self.tensors:
                f.write(self._str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne) +
                        struct.pack("<IQ", gt, off))
                off += (len(data) + ALIGN - 1) // ALIGN * ALIGN
            pad = (-f.tell()) % ALIGN
            f.write(b"\0" * pad)
            for name, ne, gt, data in self.tensors:
                f.write(data)
                f.write(b"\0" * ((-len(data)) % ALIGN))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--type", default="q8_0", choices=["q8_0", "f16", "f32"])
    ap.add_argument("--name", default="laya-default")
    args = ap.parse_args()
    cfg = json.load(open(os.path.join(args.hf_dir, "config.json")))
    tj = json.load(open(os.path.join(args.hf_dir, "tokenizer.json"), encoding="utf-8"))
    W = read_safetensors(os.path.join(args.hf_dir, "model.safetensors"))
    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hidden = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or hidden // n_head
    rope = cfg.get("rope_parameters") or {}
    theta = float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))

    # ---- vocabulary (ids in order), merges, token types
    vocab = tj["model"]["vocab"]
    added = {a["content"]: a for a in tj.get("added_tokens", [])}
    n_vocab = cfg["vocab_size"]
    tokens = [None] * n_vocab
    for t, i in vocab.items():
        if i < n_vocab:
            tokens[i] = t
    for t, a in added.items():
        tokens[a["id"]] = t
    types = []
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i] = f"[PAD{i}]"
            types.append(5)  # UNUSED
        elif t in added and added[t].get("special", False):
            types.append(3)  # CONTROL
        elif t in added:
            types.append(4)  # USER_DEFINED
        else:
            types.append(1)  # NORMAL
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    eot = added["<|endoftext|>"]["id"] if "<|endoftext|>" in added else cfg["eos_token_id"]
    bos = cfg.get("bos_token_id", eot) if "<|endoftext|>" not in added else eot
    tcfg_path = os.path.join(args.hf_dir, "tokenizer_config.json")
    add_bos = json.load(open(tcfg_path)).get("add_bos_token", True) if os.path.exists(tcfg_path) else True

    w = Writer()
    w.add("general.architecture", T_STRING, "llama")
    w.add("general.type", T_STRING, "model")
    w.add("general.name", T_STRING, args.name)
    w.add("general.license", T_STRING, "MIT")
    w.add("llama.block_count", T_UINT32, cfg["num_hidden_layers"])
    w.add("llama.context_length", T_UINT32, cfg["max_position_embeddings"])
    w.add("llama.embedding_length", T_UINT32, hidden)
    w.add("llama.feed_forward_length", T_UINT32, cfg["intermediate_size"])
    w.add("llama.attention.head_count", T_UINT32, n_head)
    w.add("llama.attention.head_count_kv", T_UINT32, n_kv)
    w.add("llama.rope.freq_base", T_FLOAT32, theta)
    w.add("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, float(cfg["rms_norm_eps"]))
    w.add("llama.attention.key_length", T_UINT32, head_dim)
    w.add("llama.attention.value_length", T_UINT32, head_dim)
    w.add("general.file_type", T_UINT32, FTYPE[args.type])
    w.add("llama.vocab_size", T_UINT32, n_vocab)
    w.add("llama.rope.dimension_count", T_UINT32, head_dim)
    w.add("general.quantization_version", T_UINT32, 2)
    w.add("tokenizer.ggml.model", T_STRING, "gpt2")
    w.add("tokenizer.ggml.pre", T_STRING, "llama-bpe")
    w.add("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens))
    w.add("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types))
    w.add("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges))
    w.add("tokenizer.ggml.bos_token_id", T_UINT32, bos)
    w.add("tokenizer.ggml.eos_token_id", T_UINT32, eot)
    w.add("tokenizer.ggml.padding_token_id", T_UINT32, eot)
    for key, name in (("tokenizer.ggml.fim_pre_token_id", "<|fim_prefix|>"),
                      ("tokenizer.ggml.fim_suf_token_id", "<|fim_suffix|>"),
                      ("tokenizer.ggml.fim_mid_token_id", "<|fim_middle|>")):
        if name in added:
            w.add(key, T_UINT32, added[name]["id"])
    w.add("tokenizer.ggml.add_bos_token", T_BOOL, bool(add_bos))
    w.add("tokenizer.ggml.add_eos_token", T_BOOL, False)

    def put(name, arr, quant=True):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        ne = list(reversed(arr.shape))
        if arr.ndim == 1 or not quant or args.type == "f32":
            w.tensors.append((name, ne, GGML_F32, arr.astype("<f4").tobytes()))
        elif args.type == "f16":
            w.tensors.append((name, ne, GGML_F16, arr.astype("<f2").tobytes()))
        else:
            w.tensors.append((name, ne, GGML_Q8_0, quantize_q8_0(arr)))

    put("token_embd.weight", W["model.embed_tokens.weight"])
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        b = f"blk.{i}."
        put(b + "attn_norm.weight", W[p + "input_layernorm.weight"])
        put(b + "attn_q.weight", permute(W[p + "self_attn.q_proj.weight"], n_head, n_head))
        put(b + "attn_k.weight", permute(W[p + "self_attn.k_proj.weight"], n_head, n_kv))
        put(b + "attn_v.weight", W[p + "self_attn.v_proj.weight"])
        put(b + "attn_output.weight", W[p + "self_attn.o_proj.weight"])
        put(b + "ffn_norm.weight", W[p + "post_attention_layernorm.weight"])
        put(b + "ffn_gate.weight", W[p + "mlp.gate_proj.weight"])
        put(b + "ffn_up.weight", W[p + "mlp.up_proj.weight"])
        put(b + "ffn_down.weight", W[p + "mlp.down_proj.weight"])
    put("output_norm.weight", W["model.norm.weight"])
    if not cfg.get("tie_word_embeddings", False) and "lm_head.weight" in W:
        put("output.weight", W["lm_head.weight"])
    w.write(args.out)
    print(f"wrote {args.out}: {os.path.getsize(args.out) / 1e6:.2f} MB, {len(w.tensors)} tensors")


if __name__ == "__main__":
    sys.exit(main())
