#!/usr/bin/env python3
"""Tiny random-weight reference models of the families laya runs beside Llama:
phi3, granite, starcoder2, gemma, gemma2, gemma3 (text).

Each model is built from its transformers config class (hidden 64, 2 layers,
head_dim 32), saved as a Hugging Face folder (bf16 safetensors, a small
tokenizer.json of the family's own kind), reloaded from that folder, and run
in float32 with eager attention: the logits of a few prompts are the
reference (a golden file made by transformers, not by laya). The same weights
are written as GGUF files (F16 and Q8_0) with llama.cpp's tensor names and
metadata keys; the Q8_0 reference is the float32 run of the model whose
weights are that file's, dequantized.

Needs torch, transformers, tokenizers, safetensors, numpy (the H200 host has
them; no internet). Run:  python3 make_families.py [--mix] OUTDIR [family ...]
Writes OUTDIR/<family>/{hf/, <family>-f16.gguf, <family>-q8_0.gguf, ref/*.npy,
prompts.json, tokenizer_cases.json} and OUTDIR/manifest.json.

--mix writes the quantized types instead: the family at hidden 256 (K-quant
rows are 256 values) as OUTDIR/<family>/mix/{<family>-mix.gguf, ref/*.npy,
prompts.json}, its matrices in Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1 in
turn (ggml-common.h's block layouts, written here), and OUTDIR/manifest-mix.json.
logits_p* is the float32 model, logits_mix_p* the model with the file's
weights dequantized by this script's formulas.

Weights are rounded to bf16 and values below 2^-14 set to 0, so the bf16
safetensors and the F16 GGUF hold exactly the float32 weights.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

FAMILIES = ["phi3", "granite", "starcoder2", "gemma", "gemma2", "gemma3"]
HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FF = 64, 2, 2, 1, 32, 128
# --mix: the quantized-types models. K-quants need rows of 256 values, so the
# same families at hidden 256 (head_dim 64, 4 heads, 2 KV heads, FF 256).
MIX_GEOMETRY = (256, 2, 4, 2, 64, 256)
PROMPT_LENS = [1, 6, 33]
SLIDING = 16  # gemma2 / gemma3 local layers: shorter than the longest prompt

# A small corpus for training each tokenizer: code and prose, ASCII and not.
CORPUS = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n  sum += a[i] * b[i];\n}\n",
    "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\nprint(x.shape)\n",
    "The quick brown fox jumps over the lazy dog. The dog sleeps.\n",
    "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n",
    "fn main() { let v: Vec<i32> = (0..10).collect(); println!(\"{:?}\", v); }\n",
    "return self.value + other.value  # 12345 67890\n",
    "Größe, café, naïve — 東京 and 😀 are unicode.\n",
    "    while True:\n        line = f.readline()\n        if not line:\n            break\n",
    "const add = (a, b) => a + b;\nexport default add;\n",
] * 4

TOKENIZER_STRINGS = [
    "", " ", "Hello world", " Hello world", "Hello  world\n\nnew paragraph",
    "def fib(n):\n    return n if n < 2 else fib(n-1) + fib(n-2)\n",
    "x = 1234567 + 89;", "\t\ttabs and  spaces   ", "café naïve 東京 😀",
    "for (int i = 0; i < 10; ++i) { sum += i; }", "  leading spaces", "trailing spaces  ",
    "line1\r\nline2\n", "self.value", "print(\"hi\")\n",
]


# ---------------------------------------------------------------- tokenizers

def byte_bpe_tokenizer(specials, vocab_size):
    """StarCoder2 / Granite kind: byte-level BPE, digits split one by one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    j = json.loads(tok.to_str())
    j["post_processor"] = None
    return j


def spm_tokenizer(specials, n_merges, prepend, unk):
    """Gemma / Phi-3 kind: SentencePiece-style BPE over '▁'-joined text with
    byte fallback (<0xNN> tokens), as the HF conversions of their models.
    The vocabulary: the specials, the 256 byte tokens, then the trained
    pieces; merges kept in training order."""
    from tokenizers import Tokenizer, models, normalizers, trainers
    norm = [normalizers.Replace(" ", "\u2581")]
    if prepend:
        norm.insert(0, normalizers.Prepend("\u2581"))
    base = Tokenizer(models.BPE())
    base.normalizer = normalizers.Sequence(norm)
    trainer = trainers.BpeTrainer(vocab_size=10_000, show_progress=False, limit_alphabet=200)
    base.train_from_iterator(CORPUS, trainer)
    bj = json.loads(base.to_str())
    merges = [m if isinstance(m, list) else m.split(" ") for m in bj["model"]["merges"]][:n_merges]
    vocab = {}
    for s in specials:
        vocab[s] = len(vocab)
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    # Single characters of the corpus (after normalization) then merged pieces.
    chars = sorted({c for line in CORPUS for c in ("\u2581" + line if prepend else line).replace(" ", "\u2581")})
    for c in chars:
        if c not in vocab:
            vocab[c] = len(vocab)
    kept = []
    for a, b in merges:
        if a in vocab and b in vocab and a + b not in vocab:
            vocab[a + b] = len(vocab)
            kept.append([a, b])
    added = [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for s in specials if s != unk]
    dec = [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
           {"type": "Fuse"}]
    if prepend:
        dec.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    normalizer = ([{"type": "Prepend", "prepend": "\u2581"}] if prepend else []) + \
        [{"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": normalizer},
        "pre_tokenizer": None, "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": dec},
        "model": {"type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": kept},
    }


def add_bos_processor(j, bos, bos_id):
    j["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}


# ---------------------------------------------------------------- families

def family_spec(name):
    """(config, tokenizer json, tokenizer_config, gguf facts)."""
    import transformers as tf
    common = dict(hidden_size=HIDDEN, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                  num_key_value_heads=KV_HEADS, max_position_embeddings=512)
    if name in ("starcoder2", "granite"):
        if name == "starcoder2":
            specials = ["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<repo_name>",
                        "<file_sep>"]
        else:
            specials = ["<|end_of_text|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<filename>",
                        "<reponame>", "<|start_of_role|>", "<|end_of_role|>"]
        tj = byte_bpe_tokenizer(specials, 320)
        eos = specials[0]
        vocab = tj["model"]["vocab"]
        V = max(vocab.values()) + 1
        tcfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": eos, "eos_token": eos,
                "unk_token": None, "add_bos_token": False, "add_eos_token": False,
                "clean_up_tokenization_spaces": False, "model_max_length": 512}
        ids = dict(bos_token_id=0, eos_token_id=0, pad_token_id=None)
        if name == "starcoder2":
            cfg = tf.Starcoder2Config(vocab_size=V, hidden_act="gelu_pytorch_tanh", norm_epsilon=1e-5, use_bias=True,
                                      rope_theta=100000.0, sliding_window=None, tie_word_embeddings=True,
                                      **ids, **common)
        else:
            cfg = tf.GraniteConfig(vocab_size=V, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True,
                                   embedding_multiplier=12.0, logits_scaling=8.0, residual_multiplier=0.22,
                                   attention_multiplier=0.03125 * 0.7, **ids, **common)
        return cfg, tj, tcfg, {"tok_model": "gpt2", "pre": "starcoder" if name == "starcoder2" else "refact",
                               "add_bos": False, "bos": 0, "eos": 0}
    # SentencePiece kind
    if name == "phi3":
        specials = ["<unk>", "<s>", "</s>", "<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>"]
        tj = spm_tokenizer(specials, 120, prepend=True, unk="<unk>")
        bos_id, eos_id = 1, 3
    else:
        specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                    "<|file_separator|>", "<start_of_turn>", "<end_of_turn>"]
        tj = spm_tokenizer(specials, 120, prepend=False, unk="<unk>")
        bos_id, eos_id = 2, 1
    bos = specials[bos_id]
    add_bos_processor(tj, bos, bos_id)
    V = max(tj["model"]["vocab"].values()) + 1
    tcfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos, "eos_token": specials[eos_id],
            "unk_token": "<unk>", "add_bos_token": True, "add_eos_token": False,
            "clean_up_tokenization_spaces": False, "model_max_length": 512}
    if name == "gemma":
        tcfg["pad_token"] = "<pad>"
    ids = dict(bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=0)
    facts = {"tok_model": "llama", "pre": "default", "add_bos": True, "bos": bos_id, "eos": eos_id,
             "unk": specials.index("<unk>")}
    if name == "phi3":
        cfg = tf.Phi3Config(vocab_size=V, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                            original_max_position_embeddings=512, sliding_window=None, **ids, **common)
    elif name == "gemma":
        cfg = tf.GemmaConfig(vocab_size=V, head_dim=HEAD_DIM, rms_norm_eps=1e-6, rope_theta=10000.0,
                             hidden_activation="gelu_pytorch_tanh", **ids, **common)
    elif name == "gemma2":
        cfg = tf.Gemma2Config(vocab_size=V, head_dim=HEAD_DIM, rms_norm_eps=1e-6, rope_theta=10000.0,
                              hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=HEAD_DIM,
                              sliding_window=SLIDING, attn_logit_softcapping=5.0, final_logit_softcapping=8.0,
                              **ids, **common)
    else:
        # Six layers, the sixth global: llama.cpp reads Gemma 3 GGUFs with a fixed
        # pattern of five sliding layers then a global one (set_swa_pattern(6)).
        # RoPE base 1e6 for the global layer, 10000 for the sliding ones
        # (transformers 5 writes them as rope_parameters per layer type); no rope
        # scaling (Gemma 3 1B's; the 4B-27B's linear 8 on the global layers has
        # no reference here yet).
        kw = dict(vocab_size=V, head_dim=HEAD_DIM, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
                  query_pre_attn_scalar=HEAD_DIM, sliding_window=SLIDING,
                  layer_types=["sliding_attention"] * 5 + ["full_attention"], **ids, **(common | {"num_hidden_layers": 6}))
        try:
            cfg = tf.Gemma3TextConfig(rope_theta=1000000.0, rope_local_base_freq=10000.0, **kw)
        except TypeError:
            cfg = tf.Gemma3TextConfig(rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}, **kw)
    return cfg, tj, tcfg, facts


def randomize(model, name, gen):
    """Weights with some signal (not the 0.02 init), exactly bf16 and f16."""
    with torch.no_grad():
        for pn, p in model.named_parameters():
            if p.ndim == 2:
                std = 0.5 if "embed" in pn else 1.0 / math.sqrt(p.shape[1])
                v = torch.randn(p.shape, generator=gen) * std
            elif pn.endswith("bias"):
                v = torch.randn(p.shape, generator=gen) * 0.1
            else:  # norms: around 1 ((1 + w) for the Gemmas: around 0)
                v = torch.randn(p.shape, generator=gen) * 0.1 + (0.0 if name.startswith("gemma") else 1.0)
            v = v.bfloat16().float()
            v[v.abs() < 2.0 ** -14] = 0
            p.copy_(v)


# ---------------------------------------------------------------- GGUF

GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q8_0 = 0, 1, 2, 3, 6, 7, 8
GGML_Q4_K, GGML_Q5_K, GGML_Q6_K = 12, 13, 14
MIX = "mix"  # write_gguf's "type" for the quantized-types file: MIX_TYPES in turn, matrix by matrix
MIX_TYPES = [GGML_Q4_K, GGML_Q5_K, GGML_Q6_K, GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1]
BLOCK = {GGML_Q4_0: 32, GGML_Q4_1: 32, GGML_Q5_0: 32, GGML_Q5_1: 32, GGML_Q8_0: 32,
         GGML_Q4_K: 256, GGML_Q5_K: 256, GGML_Q6_K: 256}
T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9


class Gguf:
    def __init__(self):
        self.kv, self.tensors = [], []

    def add(self, key, vtype, value, etype=None):
        self.kv.append((key, vtype, value, etype))

    def tensor(self, name, arr, ggml_type):
        self.tensors.append((name, arr, ggml_type))

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _val(self, t, v):
        if t == T_U32: return struct.pack("<I", v)
        if t == T_I32: return struct.pack("<i", v)
        if t == T_F32: return struct.pack("<f", v)
        if t == T_BOOL: return struct.pack("<B", 1 if v else 0)
        if t == T_STR: return self._str(v)
        raise ValueError(t)

    def write(self, path):
        out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
        for key, t, v, et in self.kv:
            out += self._str(key) + struct.pack("<I", t)
            if t == T_ARR:
                out += struct.pack("<IQ", et, len(v))
                for e in v:
                    out += self._val(et, e)
            else:
                out += self._val(t, v)
        blobs, off = [], 0
        for name, arr, gt in self.tensors:
            ne = list(reversed(arr.shape))  # ggml order: row length first
            data = encode(arr, gt)
            out += self._str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
            out += struct.pack("<IQ", gt, off)
            blobs.append(data)
            off += (len(data) + 31) // 32 * 32
        out += b"\0" * ((-len(out)) % 32)
        for d in blobs:
            out += d + b"\0" * ((-len(d)) % 32)
        with open(path, "wb") as f:
            f.write(out)


def _inv(v):
    """1 / v in float32, 0 where v is 0."""
    return np.where(v != 0, 1.0 / np.where(v != 0, v, 1), 0).astype(np.float32)


def _f16(v):
    """(stored fp16, its float32 value, its float32 inverse or 0)."""
    h = v.astype(np.float16)
    f = h.astype(np.float32)
    return h, f, _inv(f)


def _round(v):
    """roundf: halves away from zero (numpy's round would take them to even)."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def q8_0(arr):
    """ggml's reference Q8_0: per 32 values d = max|x| / 127 (stored fp16),
    q = round(x / d). Returns (bytes, dequantized float32)."""
    x = arr.reshape(-1, 32).astype(np.float32)
    amax = np.abs(x).max(axis=1)
    d = amax / 127.0
    inv = _inv(d)  # d >= 0
    q = _round(x * inv[:, None]).astype(np.int8)
    d16 = d.astype(np.float16)
    blocks = np.zeros(x.shape[0], dtype=[("d", "<f2"), ("q", "i1", 32)])
    blocks["d"], blocks["q"] = d16, q
    deq = (q.astype(np.float32) * d16.astype(np.float32)[:, None]).reshape(arr.shape)
    return blocks.tobytes(), deq


def legacy(arr, gt):
    """Q4_0 / Q4_1 / Q5_0 / Q5_1, blocks of 32 (ggml-common.h layouts; ggml's
    reference quantizers' choice of d and min). Returns (bytes, dequantized)."""
    x = arr.reshape(-1, 32).astype(np.float32)
    bits = 4 if gt in (GGML_Q4_0, GGML_Q4_1) else 5
    nmax = (1 << bits) - 1
    if gt in (GGML_Q4_0, GGML_Q5_0):  # symmetric: d = (the value of largest |x|) / -(2^(bits-1))
        big = x[np.arange(len(x)), np.abs(x).argmax(axis=1)]
        d16, d, _ = _f16(big / -float(1 << (bits - 1)))
        inv = np.where(big != 0, -float(1 << (bits - 1)) / np.where(big != 0, big, 1), 0).astype(np.float32)
        q = np.clip(np.floor(x * inv[:, None] + (1 << (bits - 1)) + 0.5), 0, nmax).astype(np.uint8)
        deq = (q.astype(np.float32) - float(1 << (bits - 1))) * d[:, None]
        m16 = None
    else:  # affine: x ~ q * d + min
        lo, hi = x.min(axis=1), x.max(axis=1)
        d16, d, _ = _f16((hi - lo) / nmax)
        m16, m, _ = _f16(lo)
        inv = np.where(hi > lo, nmax / np.where(hi > lo, hi - lo, 1), 0).astype(np.float32)
        q = np.clip(np.floor((x - lo[:, None]) * inv[:, None] + 0.5), 0, nmax).astype(np.uint8)
        deq = q.astype(np.float32) * d[:, None] + m[:, None]
    # value j in the low nibble of byte j, value j + 16 in its high nibble; for
    # 5 bits the fifth bits of values 0..31 are bits 0..31 of qh.
    qs = (q[:, :16] & 0xF) | ((q[:, 16:] & 0xF) << 4)
    fields = [("d", "<f2")] + ([("m", "<f2")] if m16 is not None else [])
    if bits == 5:
        fields.append(("qh", "<u4"))
    fields.append(("qs", "u1", 16))
    blocks = np.zeros(len(x), dtype=fields)
    blocks["d"], blocks["qs"] = d16, qs
    if m16 is not None:
        blocks["m"] = m16
    if bits == 5:
        blocks["qh"] = ((q.astype(np.uint64) >> 4) << np.arange(32, dtype=np.uint64)).sum(axis=1).astype(np.uint32)
    return blocks.tobytes(), deq.reshape(arr.shape)


def k_quant(arr, gt):
    """Q4_K / Q5_K / Q6_K, super-blocks of 256 (ggml-common.h layouts). The
    scales are chosen simply (range / levels), not by ggml's search: the
    reference dequantizes these bytes, whatever they are. Returns (bytes,
    dequantized float32, as dequantize_row_q*_K computes it)."""
    x = arr.reshape(-1, 256).astype(np.float32)
    nb = len(x)
    if gt == GGML_Q6_K:
        xs = x.reshape(nb, 16, 16)  # 16 sub-blocks of 16, int8 scales, one fp16 d
        amax = np.abs(xs).max(axis=2)
        d16, d, dinv = _f16(amax.max(axis=1) / 31.0 / 127.0)
        sc = np.clip(_round(amax / 31.0 * dinv[:, None]), 0, 127).astype(np.int8)
        eff = d[:, None] * sc.astype(np.float32)
        einv = _inv(eff)
        q = np.clip(_round(xs * einv[:, :, None]), -32, 31).astype(np.int32)
        deq = eff[:, :, None] * q.astype(np.float32)
        Q = (q + 32).astype(np.uint8).reshape(nb, 2, 4, 32)  # [half, quarter k, l]: value 128 n + 32 k + l
        ql = np.concatenate([(Q[:, :, 0] & 0xF) | ((Q[:, :, 2] & 0xF) << 4),
                             (Q[:, :, 1] & 0xF) | ((Q[:, :, 3] & 0xF) << 4)], axis=2)  # [n, 64]
        qh = (Q[:, :, 0] >> 4) | ((Q[:, :, 1] >> 4) << 2) | ((Q[:, :, 2] >> 4) << 4) | ((Q[:, :, 3] >> 4) << 6)
        blocks = np.zeros(nb, dtype=[("ql", "u1", 128), ("qh", "u1", 64), ("scales", "i1", 16), ("d", "<f2")])
        blocks["ql"], blocks["qh"], blocks["scales"], blocks["d"] = ql.reshape(nb, 128), qh.reshape(nb, 64), sc, d16
        return blocks.tobytes(), deq.reshape(arr.shape)
    nmax = 15 if gt == GGML_Q4_K else 31  # 8 sub-blocks of 32: x ~ d * sc * q - dmin * m, 6-bit sc and m
    xs = x.reshape(nb, 8, 32)
    lo = np.minimum(xs.min(axis=2), 0)
    scale, mn = (xs.max(axis=2) - lo) / nmax, -lo
    d16, d, dinv = _f16(scale.max(axis=1) / 63.0)
    dm16, dm, dminv = _f16(mn.max(axis=1) / 63.0)
    sc = np.clip(_round(scale * dinv[:, None]), 0, 63).astype(np.uint8)
    m = np.clip(_round(mn * dminv[:, None]), 0, 63).astype(np.uint8)
    eff_d, eff_m = d[:, None] * sc.astype(np.float32), dm[:, None] * m.astype(np.float32)
    einv = _inv(eff_d)
    q = np.clip(_round((xs + eff_m[:, :, None]) * einv[:, :, None]), 0, nmax).astype(np.uint8)
    deq = eff_d[:, :, None] * q.astype(np.float32) - eff_m[:, :, None]
    scales = np.zeros((nb, 12), dtype=np.uint8)  # get_scale_min_k4's packing
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    qc = q.reshape(nb, 4, 2, 32)  # [64-value chunk c, sub-block 2c + h, l]
    qs = ((qc[:, :, 0] & 0xF) | ((qc[:, :, 1] & 0xF) << 4)).reshape(nb, 128)
    fields = [("d", "<f2"), ("dmin", "<f2"), ("scales", "u1", 12)]
    if gt == GGML_Q5_K:  # fifth bit of value 64 c + 32 h + l: bit 2 c + h of qh[l]
        fields.append(("qh", "u1", 32))
    fields.append(("qs", "u1", 128))
    blocks = np.zeros(nb, dtype=fields)
    blocks["d"], blocks["dmin"], blocks["scales"], blocks["qs"] = d16, dm16, scales, qs
    if gt == GGML_Q5_K:
        hb = (qc >> 4).astype(np.uint32)
        blocks["qh"] = sum(hb[:, c, h] << (2 * c + h) for c in range(4) for h in range(2)).astype(np.uint8)
    return blocks.tobytes(), deq.reshape(arr.shape)


def quantize(arr, gt):
    """(bytes, dequantized float32) of a 2-D array in ggml type gt."""
    if gt == GGML_Q8_0: return q8_0(arr)
    if gt in (GGML_Q4_K, GGML_Q5_K, GGML_Q6_K): return k_quant(arr, gt)
    return legacy(arr, gt)


def encode(arr, gt):
    if gt == GGML_F32: return arr.astype("<f4").tobytes()
    if gt == GGML_F16: return arr.astype("<f2").tobytes()
    return quantize(arr, gt)[0]


def permute_rope(w, n_head):
    """convert_hf_to_gguf's LlamaModel permutation of q/k rows (interleaved RoPE)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_names(name):
    """HF parameter suffix -> GGUF name, per family (llama.cpp tensor_mapping)."""
    m = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
         "model.norm.bias": "output_norm.bias", "lm_head.weight": "output.weight"}
    layer = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.qkv_proj": "attn_qkv",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
             "mlp.gate_up_proj": "ffn_up", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}
    if name.startswith("gemma2") or name.startswith("gemma3"):
        layer |= {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
                  "post_feedforward_layernorm": "post_ffw_norm"}
    else:
        layer["post_attention_layernorm"] = "ffn_norm"

    def f(hf):
        if hf in m: return m[hf]
        parts = hf.split(".")
        assert parts[0] == "model" and parts[1] == "layers", hf
        mid, kind = ".".join(parts[3:-1]), parts[-1]
        return "blk.%s.%s.%s" % (parts[2], layer[mid], kind)
    return f


def write_gguf(path, fam, cfg, state, tj, facts, gt, tied):
    arch = fam
    g = Gguf()
    g.add("general.architecture", T_STR, arch)
    g.add("general.name", T_STR, fam + "-tiny")
    g.add("general.alignment", T_U32, 32)
    A = arch + "."
    g.add(A + "context_length", T_U32, cfg.max_position_embeddings)
    g.add(A + "embedding_length", T_U32, HIDDEN)
    g.add(A + "block_count", T_U32, cfg.num_hidden_layers)
    g.add(A + "feed_forward_length", T_U32, FF)
    g.add(A + "attention.head_count", T_U32, HEADS)
    g.add(A + "attention.head_count_kv", T_U32, KV_HEADS)
    g.add(A + "rope.dimension_count", T_U32, HEAD_DIM)
    if fam.startswith("gemma"):
        g.add(A + "attention.key_length", T_U32, HEAD_DIM)
        g.add(A + "attention.value_length", T_U32, HEAD_DIM)
    if fam == "starcoder2":
        g.add(A + "attention.layer_norm_epsilon", T_F32, cfg.norm_epsilon)
    else:
        g.add(A + "attention.layer_norm_rms_epsilon", T_F32, cfg.rms_norm_eps)
    theta = getattr(cfg, "rope_theta", None)
    if theta is None:
        rp = getattr(cfg, "rope_parameters", None) or {}
        theta = (rp.get("full_attention") or rp).get("rope_theta", 10000.0)
    g.add(A + "rope.freq_base", T_F32, float(theta))
    if fam == "granite":
        g.add(A + "embedding_scale", T_F32, cfg.embedding_multiplier)
        g.add(A + "residual_scale", T_F32, cfg.residual_multiplier)
        g.add(A + "logit_scale", T_F32, cfg.logits_scaling)
        g.add(A + "attention.scale", T_F32, cfg.attention_multiplier)
    if fam in ("gemma2", "gemma3"):
        g.add(A + "attention.sliding_window", T_U32, SLIDING)
    if fam == "gemma2":
        g.add(A + "attn_logit_softcapping", T_F32, cfg.attn_logit_softcapping)
        g.add(A + "final_logit_softcapping", T_F32, cfg.final_logit_softcapping)
    g.add("general.file_type", T_U32, {GGML_F16: 1, GGML_Q8_0: 7, MIX: 15}[gt])  # 15: mostly Q4_K_M
    # tokenizer
    vocab = tj["model"]["vocab"]
    toks = [None] * (max(vocab.values()) + 1)
    for s, i in vocab.items():
        toks[i] = s
    for a in tj["added_tokens"]:
        toks[a["id"]] = a["content"]
    special = {a["id"] for a in tj["added_tokens"] if a["special"]}
    g.add("tokenizer.ggml.model", T_STR, facts["tok_model"])
    g.add("tokenizer.ggml.pre", T_STR, facts["pre"])
    g.add("tokenizer.ggml.tokens", T_ARR, toks, T_STR)
    if facts["tok_model"] == "llama":
        # SentencePiece merges by score: a piece made by an earlier merge scores higher.
        rank = {a + b: i for i, (a, b) in enumerate(tj["model"]["merges"])}
        scores = [-float(rank[t]) if t in rank else 0.0 for t in toks]
        types = []
        for i, t in enumerate(toks):
            if i == facts["unk"]: types.append(2)
            elif i in special: types.append(3)
            elif t.startswith("<0x") and len(t) == 6: types.append(6)
            else: types.append(1)
        g.add("tokenizer.ggml.scores", T_ARR, scores, T_F32)
        g.add("tokenizer.ggml.token_type", T_ARR, types, T_I32)
        g.add("tokenizer.ggml.unknown_token_id", T_U32, facts["unk"])
    else:
        g.add("tokenizer.ggml.token_type", T_ARR, [3 if i in special else 1 for i in range(len(toks))], T_I32)
        merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
        g.add("tokenizer.ggml.merges", T_ARR, merges, T_STR)
    g.add("tokenizer.ggml.bos_token_id", T_U32, facts["bos"])
    g.add("tokenizer.ggml.eos_token_id", T_U32, facts["eos"])
    g.add("tokenizer.ggml.add_bos_token", T_BOOL, facts["add_bos"])
    g.add("tokenizer.ggml.add_eos_token", T_BOOL, False)
    if fam.startswith("gemma"):
        g.add("tokenizer.ggml.add_space_prefix", T_BOOL, False)  # as convert_hf_to_gguf.py's Gemma
    # tensors, in convert_hf_to_gguf's order: token_embd, layers, output_norm, output
    name_of = gguf_names(fam)
    deq_state, types, n_mat = {}, {}, 0
    order = sorted(state.keys(), key=lambda k: (0 if "embed" in k else 2 if not k.startswith("model.layers.") else 1,
                                                int(k.split(".")[2]) if k.startswith("model.layers.") else 0, k))
    for k in order:
        if tied and k == "lm_head.weight":
            continue
        a = state[k].float().numpy()
        gname = name_of(k)
        if fam.startswith("gemma") and gname.endswith("norm.weight"):
            a = a + 1.0  # convert_hf_to_gguf stores Gemma's (1 + w)
        if fam == "granite" and gname.endswith(("attn_q.weight", "attn_k.weight")):
            a = permute_rope(a, HEADS if "attn_q" in gname else KV_HEADS)
        q = GGML_Q8_0 if gt == GGML_Q8_0 else MIX_TYPES[n_mat % len(MIX_TYPES)] if gt == MIX else None
        if a.ndim == 2:
            n_mat += 1
        if a.ndim == 2 and q is not None and a.shape[1] % BLOCK[q] == 0:
            t = q
            # Blocks run along rows, so quantizing the HF layout gives the
            # same values as the (row-permuted) file holds.
            deq_state[k] = torch.from_numpy(quantize(state[k].float().numpy(), q)[1].copy())
            types[gname] = t
        elif a.ndim == 2:
            t = GGML_F16
        else:
            t = GGML_F32
        g.tensor(gname, a, t)
    g.write(path)
    if gt == MIX:  # every type of MIX_TYPES is in the file
        assert set(types.values()) == set(MIX_TYPES), (fam, types)
    return deq_state


# ---------------------------------------------------------------- run

def logits_of(model, prompts):
    out = []
    with torch.no_grad():
        for p in prompts:
            ids = torch.tensor([p], dtype=torch.long, device="cuda" if torch.cuda.is_available() else "cpu")
            out.append(model(input_ids=ids).logits[0].float().cpu().numpy())
    return out


def make(fam, root, seed, mix=False):
    import shutil
    import transformers as tf
    from safetensors.torch import save_file
    from tokenizers import Tokenizer
    d = os.path.join(root, fam, "mix") if mix else os.path.join(root, fam)
    hf = os.path.join(d, "hf")
    os.makedirs(os.path.join(d, "ref"), exist_ok=True)
    os.makedirs(hf, exist_ok=True)
    cfg, tj, tcfg, facts = family_spec(fam)
    gen = torch.Generator().manual_seed(seed)
    model = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float()
    randomize(model, fam, gen)
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    state = {k: v.detach().clone() for k, v in model.state_dict().items()
             if not (tied and k == "lm_head.weight") and "rotary" not in k}
    cfg.save_pretrained(hf)
    save_file({k: v.bfloat16().contiguous() for k, v in state.items()}, os.path.join(hf, "model.safetensors"),
              metadata={"format": "pt"})
    with open(os.path.join(hf, "tokenizer.json"), "w") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
    with open(os.path.join(hf, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=1)
    Tokenizer.from_file(os.path.join(hf, "tokenizer.json"))  # it must load
    # The reference runs the folder as a user would load it.
    ref = tf.AutoModelForCausalLM.from_pretrained(hf, attn_implementation="eager").float()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    ref = ref.to(dev).eval()
    V = cfg.vocab_size
    n_special = len(tj["added_tokens"]) + 1
    pg = torch.Generator().manual_seed(seed + 1)
    prompts = [torch.randint(n_special, V, (n,), generator=pg).tolist() for n in PROMPT_LENS]
    if facts["add_bos"]:
        prompts = [[facts["bos"]] + p[:-1] for p in prompts]
    for i, lg in enumerate(logits_of(ref, prompts)):
        np.save(os.path.join(d, "ref", "logits_p%d.npy" % i), lg.astype("<f4"))
    json.dump({"prompts": prompts}, open(os.path.join(d, "prompts.json"), "w"))
    # GGUF files; a quantized file's reference is the model with that file's weights.
    if mix:
        deq = write_gguf(os.path.join(d, fam + "-mix.gguf"), fam, cfg, state, tj, facts, MIX, tied)
    else:
        write_gguf(os.path.join(d, fam + "-f16.gguf"), fam, cfg, state, tj, facts, GGML_F16, tied)
        deq = write_gguf(os.path.join(d, fam + "-q8_0.gguf"), fam, cfg, state, tj, facts, GGML_Q8_0, tied)
    sd = ref.state_dict()
    with torch.no_grad():
        for k, v in deq.items():
            sd[k].copy_(v.to(dev))
        if tied:
            ref.tie_weights()
    for i, lg in enumerate(logits_of(ref, prompts)):
        np.save(os.path.join(d, "ref", "logits_%s_p%d.npy" % ("mix" if mix else "q8_0", i)), lg.astype("<f4"))
    if mix:  # the folder served the float reference; the tokenizer cases are the family's own
        shutil.rmtree(hf)
        return {"vocab": V, "tied": tied, "prompt_lens": [len(p) for p in prompts], "mix": True}
    # tokenizer cases, by transformers' fast tokenizer of the folder
    at = tf.AutoTokenizer.from_pretrained(hf)
    raw = Tokenizer.from_file(os.path.join(hf, "tokenizer.json"))
    strings = TOKENIZER_STRINGS + [s for s in ("<fim_prefix>def f():<fim_suffix>\n<fim_middle>",
                                               "<|fim_prefix|>x = <|fim_suffix|>\n<|fim_middle|>")
                                   if s.split(">")[0] + ">" in tj["model"]["vocab"] or
                                   any(a["content"] == s.split(">")[0] + ">" for a in tj["added_tokens"])]
    cases = []
    for s in strings:
        cases.append({"text": s, "ids_with_special": at(s)["input_ids"],
                      "ids_no_special": at(s, add_special_tokens=False)["input_ids"],
                      "ids_raw_tokenizers": raw.encode(s, add_special_tokens=False).ids,
                      "decoded": at.decode(at(s, add_special_tokens=False)["input_ids"])})
    json.dump({"cases": cases}, open(os.path.join(d, "tokenizer_cases.json"), "w"), ensure_ascii=False, indent=0)
    return {"vocab": V, "tied": tied, "prompt_lens": [len(p) for p in prompts],
            "class": type(ref).__name__, "config_class": type(cfg).__name__}


def main():
    global HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FF
    import transformers
    args = sys.argv[1:]
    mix = "--mix" in args
    args = [a for a in args if a != "--mix"]
    if mix:
        HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FF = MIX_GEOMETRY
    root = args[0]
    fams = args[1:] or FAMILIES
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    manifest = {"transformers": transformers.__version__, "torch": torch.__version__, "families": {}}
    for fam in fams:
        try:
            manifest["families"][fam] = make(fam, root, 1000 + FAMILIES.index(fam), mix)
            print("made", fam, manifest["families"][fam], flush=True)
        except Exception as e:  # one family's failure must not lose the others
            import traceback
            traceback.print_exc()
            manifest["families"][fam] = {"error": repr(e)}
    json.dump(manifest, open(os.path.join(root, "manifest-mix.json" if mix else "manifest.json"), "w"), indent=1)
    print(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main()
