#!/usr/bin/env python3
"""laya's default model: corpus (Python part), tokenizer, Llama training with
a fill-in-the-middle objective, evaluation, Hugging Face export. Runs on the
GPU machine (see run_device.sh, which also writes the GGUF files). The other
parts come from --data: local_corpus.jsonl.xz (build_local_corpus.py) and
part-KIND.jsonl.xz (fetch_corpus.py), read by corpus_common.read_parts.

`--prep-check` runs the corpus and tokenizer path on a sample without torch
(needs only `tokenizers` and `numpy`), to check a corpus before a GPU call.

Everything is seeded; the number of optimizer steps is either given (--steps,
to reproduce a run exactly) or fitted to --train-seconds from the speed
measured during warm-up (the run's metrics.json records the steps taken).
"""
import argparse
import hashlib
import json
import lzma
import math
import os
import random
import re
import sys
import sysconfig
import site
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus_common import EXCLUDE_BASENAMES, han_count, is_val, part_files, read_parts, trace_hit  # noqa: E402

VOCAB = 12288  # measured choice (8192 / 12288 / 16384 / 20480), see models/README.md "Tokenizer"
torch = F = None  # imported in main() unless --prep-check (no torch needed there)
T0 = time.time()

# Characters of each part in the tokenizer's training sample (the parts' shares of the vocabulary follow).
TOK_SAMPLE = {"py": 12e6, "en": 9e6, "zh": 6e6, "c": 2.25e6, "go": 2.25e6, "rust": 2.25e6, "js": 2.25e6}
# Training rows per part (models/README.md, Data, says why). Chinese is small (8.8 M chars, ~4.4 M tokens)
# but is the product's example language: 10 % of ~530 M tokens is ~12 passes over it. The three traced
# languages (py, en, zh) get 76 %; C, Go, Rust and JS/TS 6 % each (~5 passes over their ~5-6 M tokens).
DEFAULT_MIX = "py:0.34,en:0.32,zh:0.10,c:0.06,go:0.06,rust:0.06,js:0.06"


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


# ------------------------------------------------------------------ corpus
def python_roots():
    roots = set()
    for p in list(site.getsitepackages()) + [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]]:
        if p and os.path.isdir(p):
            roots.add(os.path.realpath(p))
    # Drop roots nested in another root.
    out = sorted(roots)
    return [r for r in out if not any(r != o and r.startswith(o + os.sep) for o in out)]


def good_python(s):
    if len(s) < 200 or len(s) > 400_000 or "\x00" in s:
        return False
    lines = s.split("\n")
    long_chars = sum(len(l) for l in lines if len(l) > 200)
    if long_chars > 0.2 * len(s):
        return False  # generated tables, minified data
    alpha = sum(c.isalpha() for c in s[:20000])
    return alpha > 0.35 * min(len(s), 20000)


def collect_python(budget_chars):
    docs, total = [], 0
    for root in python_roots():
        for d, dirs, files in os.walk(root):
            dirs.sort()
            for f in sorted(files):
                if not f.endswith(".py") or f in EXCLUDE_BASENAMES:  # sources of public typing traces
                    continue
                p = os.path.join(d, f)
                if os.path.islink(p):
                    continue
                try:
                    with open(p, "rb") as fh:
                        s = fh.read(400_001).decode("utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                if not good_python(s) or trace_hit(s):
                    continue
                docs.append({"src": p, "kind": "py", "text": s})
                total += len(s)
                if total >= budget_chars:
                    return docs
    return docs


def dedup(docs):
    seen, out = set(), []
    for d in docs:
        k = hashlib.sha1(" ".join(d["text"].split()).encode("utf-8", "replace")).digest()
        if k not in seen:
            seen.add(k)
            out.append(d)
    return out


# ------------------------------------------------------------------ model
def build_model(args, vocab, eot):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    import transformers
    kw = dict(vocab_size=vocab, hidden_size=args.hidden, intermediate_size=args.ffn, num_hidden_layers=args.layers,
              num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, head_dim=args.hidden // args.heads,
              max_position_embeddings=args.ctx, rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=eot,
              eos_token_id=eot, attention_bias=False, mlp_bias=False, hidden_act="silu", initializer_range=0.02)
    if int(transformers.__version__.split(".")[0]) >= 5:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": args.rope_theta}
    else:
        kw["rope_theta"] = args.rope_theta
    cfg = LlamaConfig(**kw)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(cfg)
    # Scaled init of the residual output projections (GPT-2 style).
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(1 / math.sqrt(2 * args.layers))
            layer.mlp.down_proj.weight.mul_(1 / math.sqrt(2 * args.layers))
    return model, cfg


def read_gguf_q8_0(path):
    """The tensors of a GGUF written by export_gguf.py (Q8_0 matrices, F32 vectors), as float32 arrays in
    HF layout: the inverse of export_gguf's put() and permute(). Used by --init-gguf to continue training
    from a shipped file (Q8_0's rounding, ~0.4 % of a block's largest weight, is noise the next steps absorb)."""
    from gguf_dump import read_gguf
    data = open(path, "rb").read()
    try:
        _ver, meta, infos, base = read_gguf(data)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    kv = {k: v for k, (_t, v) in meta.items()}
    n_head = kv["llama.attention.head_count"]
    n_kv = kv["llama.attention.head_count_kv"]
    out = {}
    for name, dims, ty, off in infos:
        shape = tuple(reversed(dims))
        n = int(np.prod(shape))
        if ty == 0:
            arr = np.frombuffer(data, dtype="<f4", count=n, offset=base + off)
        elif ty == 8:
            blk = np.frombuffer(data, dtype=np.uint8, count=n // 32 * 34, offset=base + off).reshape(-1, 34)
            d = blk[:, :2].copy().view("<f2").astype(np.float32)
            q = blk[:, 2:].copy().view(np.int8).astype(np.float32)
            arr = (q * d).reshape(-1)
        else:
            raise ValueError(f"{path}: tensor {name} has ggml type {ty}; --init-gguf reads Q8_0 and F32")
        out[name] = arr.reshape(shape).astype(np.float32)

    def unpermute(w, heads):
        return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    hf = {"model.embed_tokens.weight": out["token_embd.weight"], "model.norm.weight": out["output_norm.weight"]}
    names = {"attn_norm": "input_layernorm", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
             "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj"}
    i = 0
    while f"blk.{i}.attn_q.weight" in out:
        b, p = f"blk.{i}.", f"model.layers.{i}."
        hf[p + "self_attn.q_proj.weight"] = unpermute(out[b + "attn_q.weight"], n_head)
        hf[p + "self_attn.k_proj.weight"] = unpermute(out[b + "attn_k.weight"], n_kv)
        for g, h in names.items():
            hf[p + h + ".weight"] = out[b + g + ".weight"]
        i += 1
    return hf


def prepare(args, metrics):
    """Corpus, tokenizer, token streams. Cached in --prep-dir (a second call on
    the same machine skips it)."""
    # ---- corpus
    small = args.smoke or args.prep_check
    log("parts:", [os.path.basename(p) for p in part_files(args.data)])
    docs = list(read_parts(args.data))
    py_budget = (5 if small else args.py_mb) * 1e6
    docs += collect_python(py_budget)
    if small:
        rng0 = random.Random(0)
        docs = [d for d in docs if rng0.random() < args.small_frac]
    n_all = len(docs)
    docs = [d for d in docs if os.path.basename(d["src"].split("#")[0]) not in EXCLUDE_BASENAMES
            and not trace_hit(d["text"])]
    n_trace = n_all - len(docs)
    n0 = len(docs)
    docs = dedup(docs)
    log(f"corpus: {n0} files, {len(docs)} after dedup ({n_trace} dropped for typing-trace text)")
    stats = {}
    for d in docs:
        s = stats.setdefault(d["kind"], {"files": 0, "chars": 0, "bytes": 0, "han": 0})
        s["files"] += 1
        s["chars"] += len(d["text"])
        s["bytes"] += len(d["text"].encode("utf-8"))
        if d["kind"] == "zh":
            s["han"] += han_count(d["text"])
    log("corpus stats", stats)
    metrics["corpus"] = stats

    if args.prep_check:
        for k, v in sorted(stats.items()):
            log(f"  {k}: {v}")
    # ---- tokenizer (trained on a sample of the training split)
    try:
        from tokenizers import Tokenizer, trainers, pre_tokenizers
    except ImportError:
        if not args.prep_check:
            raise
        log("prep check: `tokenizers` is not installed here; corpus reading checked, tokenizer skipped")
        return None
    from train_tokenizer import SPECIAL, make_tokenizer
    rng = random.Random(args.seed)
    train_docs = [d for d in docs if not is_val(d["src"])]
    val_docs = [d for d in docs if is_val(d["src"])]
    tok_budget = TOK_SAMPLE
    sample = []
    by_kind = {}
    for d in train_docs:
        by_kind.setdefault(d["kind"], []).append(d["text"])
    for kind in sorted(by_kind):
        texts = by_kind[kind][:]
        rng.shuffle(texts)
        left = tok_budget.get(kind, 2e6) / (20 if small else 1)
        for t in texts:
            if left <= 0:
                break
            sample.append(t[:200_000])
            left -= len(t)
    rng.shuffle(sample)
    if args.tokenizer:
        # Continued training (--init-gguf): the first run's tokenizer, without the BOS post-processor the
        # HF export adds (the streams below put <|endoftext|> in front of each document themselves).
        tj = json.load(open(args.tokenizer, encoding="utf-8"))
        tj["post_processor"] = None
        with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False)
        log(f"tokenizer: {args.tokenizer} (not retrained)")
    else:
        tok = make_tokenizer()
        trainer = trainers.BpeTrainer(vocab_size=args.vocab, min_frequency=2, special_tokens=SPECIAL,
                                      show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      max_token_length=24)
        t_tok = time.time()
        tok.train_from_iterator(sample, trainer=trainer, length=len(sample))
        log(f"tokenizer trained on {sum(len(t) for t in sample) / 1e6:.1f} M chars in {time.time() - t_tok:.1f} s")
        tok.save(os.path.join(args.out, "tokenizer.json"))
    del sample
    tok = Tokenizer.from_file(os.path.join(args.out, "tokenizer.json"))
    V = tok.get_vocab_size()
    ids = {s: tok.token_to_id(s) for s in SPECIAL}
    EOT, FP, FS, FM = ids["<|endoftext|>"], ids["<|fim_prefix|>"], ids["<|fim_suffix|>"], ids["<|fim_middle|>"]
    log(f"tokenizer: vocab {V}, specials {ids}")
    # Byte length of each token (for bits per byte).
    tok_bytes = np.zeros(V, dtype=np.int64)
    # ByteLevel alphabet order is not the byte order; build the real GPT-2 map.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_dec = {chr(c): b for b, c in zip(bs, cs)}
    for t, i in tok.get_vocab().items():
        tok_bytes[i] = 0 if t in SPECIAL else sum(1 for ch in t if ch in byte_dec)
    metrics["tokenizer"] = {"vocab": V, "specials": ids}

    # ---- tokenize: training stream per kind with FIM on part of the documents
    def encode_many(texts):
        out = []
        B = 4096
        for i in range(0, len(texts), B):
            out += [np.array(e.ids, dtype=np.int32) for e in tok.encode_batch(texts[i:i + B])]
        return out

    streams = {}
    frng = random.Random(args.seed + 1)
    for kind in sorted(by_kind):
        kd = [d for d in train_docs if d["kind"] == kind]
        frng.shuffle(kd)
        plain, fim_parts = [], []
        for d in kd:
            t = d["text"]
            if len(t) > 64 and frng.random() < args.fim_rate:
                a, b = sorted(frng.randrange(len(t) + 1) for _ in range(2))
                fim_parts.append((t[:a], t[a:b], t[b:]))
            else:
                plain.append(t)
        enc_plain = encode_many(plain)
        flat = [x for tr in fim_parts for x in tr]
        enc_f = encode_many(flat)
        E, P_, S_, M_ = (np.array([v], dtype=np.int32) for v in (EOT, FP, FS, FM))
        seqs = [np.concatenate([E, e]) for e in enc_plain]
        for j in range(len(fim_parts)):
            p, m, sf = enc_f[3 * j], enc_f[3 * j + 1], enc_f[3 * j + 2]
            seqs.append(np.concatenate([E, P_, p, S_, sf, M_, m]))
        del enc_plain, enc_f
        frng.shuffle(seqs)
        arr = np.concatenate(seqs) if seqs else np.zeros(0, dtype=np.int32)
        total = int(arr.size)
        del seqs
        streams[kind] = arr
        log(f"tokens[{kind}]: {total / 1e6:.1f} M ({len(plain)} plain, {len(fim_parts)} FIM docs)")
    metrics["train_tokens_available"] = {k: int(v.size) for k, v in streams.items()}
    val_streams = {}
    for kind in sorted(by_kind):
        kd = [d["text"] for d in val_docs if d["kind"] == kind]
        enc = encode_many(kd)
        n_tok, n_bytes, n_han = sum(e.size for e in enc), sum(len(t.encode("utf-8")) for t in kd), sum(map(han_count, kd))
        metrics.setdefault("tokenizer_val", {})[kind] = {
            "bytes_per_token": n_bytes / max(1, n_tok), "tokens_per_han": n_tok / n_han if n_han > 1000 else None}
        log(f"val[{kind}]: {n_bytes / max(1, n_tok):.2f} bytes/token" +
            (f", {n_tok / n_han:.2f} tokens per Han character" if n_han > 1000 else ""))
        arr = np.concatenate([np.concatenate([np.array([EOT], dtype=np.int32), e]) for e in enc]) if enc else np.zeros(0, np.int32)
        if arr.size > 1_500_000:
            arr = arr[:1_500_000]
        val_streams[kind] = arr
        log(f"val tokens[{kind}]: {arr.size} from {len(kd)} files")

    return tok, streams, val_streams, tok_bytes


def save_prep(d, tok, streams, val_streams, tok_bytes, metrics):
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    for k, v in streams.items():
        np.save(os.path.join(d, f"train_{k}.npy"), v)
    for k, v in val_streams.items():
        np.save(os.path.join(d, f"val_{k}.npy"), v)
    np.save(os.path.join(d, "tok_bytes.npy"), tok_bytes)
    with open(os.path.join(d, "prep.json"), "w") as f:
        json.dump({k: metrics[k] for k in ("corpus", "tokenizer", "tokenizer_val", "train_tokens_available")
                   if k in metrics}, f)
    open(os.path.join(d, "DONE"), "w").close()


def load_prep(d, metrics):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    streams, val_streams = {}, {}
    for f in sorted(os.listdir(d)):
        if f.startswith("train_") and f.endswith(".npy"):
            streams[f[6:-4]] = np.load(os.path.join(d, f))
        elif f.startswith("val_") and f.endswith(".npy"):
            val_streams[f[4:-4]] = np.load(os.path.join(d, f))
    metrics.update(json.load(open(os.path.join(d, "prep.json"))))
    return tok, streams, val_streams, np.load(os.path.join(d, "tok_bytes.npy"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="build-train-data", help="folder with local_corpus.jsonl.xz")
    ap.add_argument("--work", default="/tmp/laya-train")
    ap.add_argument("--out", default="/tmp/laya-train/hf")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=VOCAB)
    ap.add_argument("--py-mb", type=float, default=300, help="Python source budget (M chars)")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--ffn", type=int, default=1152)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=0, help="0: fit to --train-seconds")
    ap.add_argument("--train-seconds", type=float, default=420)
    ap.add_argument("--fim-rate", type=float, default=0.3)
    ap.add_argument("--mix", default=DEFAULT_MIX, help="share of training rows per part (renormalised)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny data and steps: checks the pipeline")
    ap.add_argument("--prep-only", action="store_true", help="corpus, tokenizer and token streams only (cached in WORK/prep)")
    ap.add_argument("--prep-check", action="store_true",
                    help="no torch: corpus + tokenizer + tokenization on a --small-frac sample, nothing saved")
    ap.add_argument("--small-frac", type=float, default=0.03, help="share of files used by --smoke / --prep-check")
    ap.add_argument("--budget-seconds", type=float, default=0,
                    help="wall-clock budget of this process; training stops to leave --post-reserve for the rest")
    ap.add_argument("--post-reserve", type=float, default=45)
    ap.add_argument("--init-gguf", default="", help="continue training from this Q8_0 GGUF (from export_gguf.py)")
    ap.add_argument("--tokenizer", default="", help="use this tokenizer.json instead of training one (with --init-gguf)")
    args = ap.parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    metrics = {"args": vars(args)}
    if args.prep_check:
        if prepare(args, metrics) is None:
            return
        log("prep check: done", json.dumps({k: metrics[k] for k in ("tokenizer", "tokenizer_val", "train_tokens_available")
                                            if k in metrics}))
        return
    global torch, F
    import torch
    import torch.nn.functional as F
    torch.manual_seed(args.seed)

    from tokenizers import Tokenizer
    prep_dir = os.path.join(args.work, "prep")
    if not args.smoke and os.path.exists(os.path.join(prep_dir, "DONE")):
        tok, streams, val_streams, tok_bytes = load_prep(prep_dir, metrics)
        log("loaded prepared data from", prep_dir)
    else:
        tok, streams, val_streams, tok_bytes = prepare(args, metrics)
        if not args.smoke:
            save_prep(prep_dir, tok, streams, val_streams, tok_bytes, metrics)
            log("saved prepared data to", prep_dir)
    from train_tokenizer import SPECIAL
    tok.save(os.path.join(args.out, "tokenizer.json"))
    if args.prep_only:
        log("prep only: done")
        return
    V = tok.get_vocab_size()
    ids = {t: tok.token_to_id(t) for t in SPECIAL}
    EOT = ids["<|endoftext|>"]

    # ---- model + data on the GPU
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, cfg = build_model(args, V, EOT)
    if args.init_gguf:
        init = read_gguf_q8_0(args.init_gguf)
        sd = model.state_dict()
        missing = [k for k in sd if k != "lm_head.weight" and k not in init]
        if missing or init["model.embed_tokens.weight"].shape != tuple(sd["model.embed_tokens.weight"].shape):
            raise SystemExit(f"--init-gguf {args.init_gguf}: does not match the model ({missing[:3]}, "
                             f"embedding {init['model.embed_tokens.weight'].shape} vs "
                             f"{tuple(sd['model.embed_tokens.weight'].shape)})")
        with torch.no_grad():
            for k, v in init.items():
                sd[k].copy_(torch.from_numpy(v))
        log(f"initialised from {args.init_gguf} ({len(init)} tensors)")
        metrics["init_gguf"] = args.init_gguf
    model.to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    log(f"model: {nparams / 1e6:.2f} M params, config {cfg.to_dict().get('hidden_size')}x{args.layers}")
    metrics["params"] = nparams
    mix = {k: float(v) for k, v in (x.split(":") for x in args.mix.split(","))}
    kinds = [k for k in sorted(streams) if mix.get(k, 0) > 0 and streams[k].size > args.ctx + 2]
    probs = torch.tensor([mix[k] for k in kinds], dtype=torch.float64)
    probs /= probs.sum()
    T = args.ctx
    gstream = torch.from_numpy(np.concatenate([streams[k] for k in kinds]).astype(np.int64)).to(dev)
    lens = torch.tensor([streams[k].size for k in kinds], dtype=torch.float64, device=dev)
    offs = torch.cumsum(lens, 0) - lens
    del streams
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    ar = torch.arange(T + 1, device=dev)
    probs_d = probs.to(dev).float()

    def get_batch(B):
        which = torch.multinomial(probs_d, B, replacement=True, generator=gen)
        u = torch.rand(B, device=dev, generator=gen, dtype=torch.float64)
        starts = (offs[which] + torch.floor(u * (lens[which] - T - 1))).long()
        x = gstream[starts[:, None] + ar[None, :]]
        return x[:, :-1], x[:, 1:]

    decay, no_decay = [], []
    for n_, p in model.named_parameters():
        (no_decay if p.ndim < 2 else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")

    def fwd_loss(m, x, y):
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = m(input_ids=x, use_cache=False).logits
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1), reduction="none")

    cmodel = model
    if not args.no_compile and dev.type == "cuda":
        try:
            cmodel = torch.compile(model)
        except Exception as e:  # pragma: no cover
            log("torch.compile failed, eager:", e)
    torch.backends.cuda.matmul.allow_tf32 = True
    total_steps = args.steps if args.steps else (30 if args.smoke else 10**9)
    lr_at = lambda s, tot: args.lr * (s + 1) / args.warmup if s < args.warmup else \
        args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, (s - args.warmup) / max(1, tot - args.warmup)))))
    B = 8 if args.smoke else args.batch
    t_start = None
    step = 0
    hist = []
    tokens_seen = 0
    while step < total_steps:
        if step == 10:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t_start = time.time()
        if step == 50 and not args.steps and not args.smoke:
            torch.cuda.synchronize()
            rate = 40 / (time.time() - t_start)
            left = args.train_seconds - (time.time() - t_start)
            if args.budget_seconds:
                left = T0 + args.budget_seconds - args.post_reserve - time.time()
            total_steps = 50 + int(left * rate)
            log(f"speed {rate:.2f} steps/s ({rate * B * T / 1e6:.2f} M tok/s): total steps {total_steps}")
            metrics["steps_per_s"] = rate
        lr = lr_at(step, total_steps if total_steps < 10**9 else 10**6)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = get_batch(B)
        opt.zero_grad(set_to_none=True)
        try:
            loss = fwd_loss(cmodel, x, y).mean()
            loss.backward()
        except Exception as e:
            if cmodel is model or step > 0:
                raise
            log("compiled step failed, eager:", repr(e)[:500])
            cmodel = model
            opt.zero_grad(set_to_none=True)
            loss = fwd_loss(cmodel, x, y).mean()
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens_seen += B * T
        if step % 100 == 0 or step == total_steps - 1:
            lv = loss.item()
            hist.append((step, lv))
            log(f"step {step}/{total_steps} loss {lv:.4f} lr {lr:.2e} tokens {tokens_seen / 1e6:.0f}M")
        step += 1
    if dev.type == "cuda":
        torch.cuda.synchronize()
    train_time = time.time() - (t_start or time.time())
    metrics.update(steps=step, tokens_trained=tokens_seen, train_seconds=train_time, loss_history=hist)
    log(f"trained {step} steps, {tokens_seen / 1e6:.0f} M tokens in {train_time:.0f}s")

    # ---- export HF folder (fp16 safetensors; the tied lm_head is not stored)
    from safetensors.torch import save_file
    sd = {k: v.detach().to(torch.float16).contiguous().cpu() for k, v in model.state_dict().items()
          if k != "lm_head.weight"}
    save_file(sd, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    del sd
    cfg.torch_dtype = "float16"
    try:
        cfg.dtype = "float16"
    except Exception:
        pass
    cfg.use_cache = True
    cfg.save_pretrained(args.out)
    tcfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
            "add_bos_token": True, "add_eos_token": False, "clean_up_tokenization_spaces": False,
            "model_max_length": args.ctx}
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": EOT, "eos_token_id": EOT, "pad_token_id": EOT, "do_sample": False}, f, indent=2)
    # The tokenizer adds <|endoftext|> in front (as training saw every document).
    from tokenizers import processors
    tok_pp = Tokenizer.from_file(os.path.join(args.out, "tokenizer.json"))
    tok_pp.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A", pair="<|endoftext|> $A <|endoftext|> $B",
                                                          special_tokens=[("<|endoftext|>", EOT)])
    tok_pp.save(os.path.join(args.out, "tokenizer.json"))
    log("exported", args.out)
    with open(os.path.join(args.work, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)

    def eval_and_samples():
        # ---- validation: loss per token and bits per byte, per kind
        model.eval()
        val = {}
        tb = torch.from_numpy(tok_bytes).to(dev)
        with torch.no_grad():
            for kind, arr in val_streams.items():
                n_win = (arr.size - 1) // T
                if n_win <= 0:
                    continue
                a = torch.from_numpy(arr[:n_win * T + 1].astype(np.int64)).to(dev)
                nll, ntok, nbytes = 0.0, 0, 0
                for i in range(0, n_win, 64):
                    idx = torch.arange(i, min(i + 64, n_win), device=dev)
                    rows = a[idx[:, None] * T + ar[None, :]]
                    x, y = rows[:, :-1], rows[:, 1:]
                    l = fwd_loss(model, x, y)
                    nll += l.double().sum().item()
                    ntok += y.numel()
                    nbytes += tb[y].sum().item()
                val[kind] = {"loss": nll / ntok, "bpb": nll / math.log(2) / max(nbytes, 1), "tokens": ntok,
                             "bytes_per_token": nbytes / ntok}
                log(f"val[{kind}]: loss {val[kind]['loss']:.4f} nats/token, {val[kind]['bpb']:.4f} bits/byte")
        metrics["val"] = val

        # ---- samples (greedy, 16 tokens)
        prompts = ["def ", "import numpy as np\n\ndef softmax(x):\n    ", "class Stack:\n    def __init__(self):\n        ",
                   "for i in range(", "    return ", "The meeting will", "Please note that the", "We agreed to",
                   "This manual page documents", "If the file does not exist,",
                   "关于下个月的工作安排", "我们需要在周五之前", "请各位同事",
                   "func main() {\n\t", "fn main() {\n    let ", "const express = require("]
        samples = []
        with torch.no_grad():
            for p in prompts:
                x = torch.tensor([[EOT] + tok.encode(p).ids], device=dev)
                out = model.generate(x, max_new_tokens=16, do_sample=False, pad_token_id=EOT) if hasattr(model, "generate") else x
                samples.append({"prompt": p, "completion": tok.decode(out[0, x.size(1):].tolist(), skip_special_tokens=False)})
                log("sample", json.dumps(samples[-1]))
        metrics["samples_torch"] = samples

    try:
        eval_and_samples()
    except Exception as e:
        import traceback
        traceback.print_exc()
        log("eval/samples failed:", repr(e)[:300])

    metrics["device_total_seconds_train_py"] = time.time() - T0
    with open(os.path.join(args.work, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    log("done")


if __name__ == "__main__":
    main()
