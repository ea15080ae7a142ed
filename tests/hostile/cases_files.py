# Issue 11, scope 5 "files are never lost", and the hangs on FIFOs / devices /
# folders given as a model or a trace (format: tests/hostile/hostile.py).
#
# Every output goes through core/atomic_file.h: a temporary file beside the
# destination, fsynced and renamed; an existing file is replaced only with
# --force (mkmodel) or when it is an earlier output of the same kind (.npy for
# logits -o, the command's own JSON for --json); an output that is an input is
# refused before any work; a failed write is a non-zero exit naming the path.
import hashlib
import json
import os
import shutil

TRACE = "{fixtures}/traces/zh_meeting_memo.jsonl"


def npy_one():
    """A .npy file holding float32 [1.0] (an earlier `logits -o` output)."""
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }"
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\x00\x00\x80\x3f"


NPY = npy_one()


def tiny_trace(text="hi"):
    """A valid two-event trace: bench-typing and replay finish on it in well under a second."""
    head = {"trace": "tiny", "final_sha256": hashlib.sha256(text.encode()).hexdigest()}
    events = [{"t_ms": 10 * i, "op": "insert", "pos": i, "text": ch} for i, ch in enumerate(text)]
    return "\n".join(json.dumps(x) for x in [head] + events) + "\n"


def copy_fixture_trace(name="t.jsonl"):
    def setup(tmp, ctx):  # the runner's --fixtures
        shutil.copyfile(ctx.fixtures / "traces" / "zh_meeting_memo.jsonl", tmp / name)
    return setup


def copy_model(name="m.gguf"):
    def setup(tmp, ctx):  # the runner's --model
        shutil.copyfile(ctx.model, tmp / name)
    return setup


def only_files(*names):
    """check: the folder holds exactly these names (no temporary file left behind)."""
    def check(tmp, proc):
        got = sorted(os.listdir(tmp))
        return None if got == sorted(names) else f"files left in the folder: {got}, expected {sorted(names)}"
    return check


def starts_with(name, prefix):
    def check(tmp, proc):
        with open(tmp / name, "rb") as f:
            head = f.read(len(prefix))
        return None if head == prefix else f"{name} starts with {head!r}, expected {prefix!r}"
    return check


def mkfifo(name):
    return lambda tmp: os.mkfifo(tmp / name)


OWN_BENCH_JSON = json.dumps({"model": "old.gguf", "max_tokens": 8, "n_ctx": 1024, "traces": {}})
OWN_REPLAY_JSON = json.dumps({"model": "old.gguf", "max_tokens": 8, "paced": False, "traces": {}})
# Valid JSON lines but no header: refused by the trace check, whatever the JSON parser's message style.
BAD_TRACE = '{"t_ms": 0, "op": "insert", "pos": 0, "text": "x"}\n'
MK = ["mkmodel", "--preset", "test-tiny", "-q"]

CASES = [
    # ---- lost: existing outputs, outputs that are inputs, failed writes ----------------------------
    Case("mkmodel-o-existing", "lost", MK + ["-o", "{tmp}/victim.gguf"], files={"victim.gguf": "precious"},
         victims=["{tmp}/victim.gguf"], expect_msg=r"victim\.gguf.*exists.*--force"),
    Case("mkmodel-o-existing-force", "lost", MK + ["-o", "{tmp}/old.gguf", "--force"], files={"old.gguf": "old"},
         expect_rc=0, check=starts_with("old.gguf", b"GGUF")),
    Case("mkmodel-ulimit-f", "lost", MK + ["-o", "{tmp}/victim.gguf", "--force"], files={"victim.gguf": "precious"},
         fsize_limit=4096, victims=["{tmp}/victim.gguf"], expect_msg=r"victim\.gguf.*(ulimit -f|too large)",
         check=only_files("victim.gguf")),
    Case("mkmodel-o-dev-full", "lost", MK + ["-o", "/dev/full"], expect_msg=r"/dev/full.*(disk is full|space)"),
    Case("mkmodel-o-missing-folder", "lost", MK + ["-o", "{tmp}/no/such/m.gguf"],
         expect_msg=r"m\.gguf.*folder.*does not exist", check=only_files()),
    Case("mkmodel-o-is-tokenizer", "lost", MK + ["--tokenizer", "{tmp}/tokenizer.json", "-o", "{tmp}/tokenizer.json",
                                                  "--force"],
         files={"tokenizer.json": '{"model": {}}'}, victims=["{tmp}/tokenizer.json"], expect_msg=r"tokenizer\.json.*input"),
    Case("mkmodel-o-fifo-no-reader", "hang", MK + ["-o", "{tmp}/out.fifo"], setup=mkfifo("out.fifo"),
         expect_msg=r"out\.fifo.*no process reads", timeout=10),
    Case("logits-o-is-model", "lost", ["logits", "-m", "{tmp}/m.gguf", "--tokens", "1,2", "-o", "{tmp}/m.gguf"],
         setup=copy_model(), victims=["{tmp}/m.gguf"], needs=["model"], expect_msg=r"m\.gguf.*input"),
    Case("logits-o-in-model-folder", "lost", ["logits", "-m", "{tmp}/hf", "--tokens", "1", "-o", "{tmp}/hf/old.npy"],
         files={"hf/config.json": "{}", "hf/old.npy": NPY}, victims=["{tmp}/hf/old.npy", "{tmp}/hf/config.json"],
         expect_msg=r"old\.npy.*input folder"),
    Case("logits-o-existing-not-npy", "lost", ["logits", "-m", "{model}", "--tokens", "1,2", "-o", "{tmp}/notes.txt"],
         files={"notes.txt": "my notes"}, victims=["{tmp}/notes.txt"], needs=["model"],
         expect_msg=r"notes\.txt.*exists.*\.npy"),
    Case("logits-o-existing-npy-replaced", "lost", ["logits", "-m", "{model}", "--tokens", "1,2", "-o", "{tmp}/old.npy"],
         files={"old.npy": NPY}, expect_rc=0, needs=["model"], check=starts_with("old.npy", b"\x93NUMPY")),
    Case("logits-o-ulimit-f", "lost", ["logits", "-m", "{model}", "--tokens", "1,2", "-o", "{tmp}/old.npy"],
         files={"old.npy": NPY}, fsize_limit=1024, victims=["{tmp}/old.npy"], needs=["model"],
         expect_msg=r"old\.npy.*(ulimit -f|too large)", check=only_files("old.npy")),
    Case("logits-o-folder", "lost", ["logits", "-m", "{model}", "--tokens", "1", "-o", "{tmp}"], needs=["model"],
         expect_msg=r"is a folder"),
    Case("bench-typing-json-is-trace", "lost", ["bench-typing", "{tmp}/t.jsonl", "--json", "{tmp}/t.jsonl"],
         setup=copy_fixture_trace(), victims=["{tmp}/t.jsonl"], needs=["fixtures"], expect_msg=r"t\.jsonl.*input"),
    Case("replay-json-is-trace", "lost", ["replay", "{tmp}/t.jsonl", "--json", "{tmp}/t.jsonl"],
         setup=copy_fixture_trace(), victims=["{tmp}/t.jsonl"], needs=["fixtures"], expect_msg=r"t\.jsonl.*input"),
    Case("bench-typing-json-is-model", "lost", ["bench-typing", TRACE, "-m", "{tmp}/m.gguf", "--json", "{tmp}/m.gguf"],
         setup=copy_model(), victims=["{tmp}/m.gguf"], needs=["fixtures", "model"], expect_msg=r"m\.gguf.*input"),
    Case("bench-typing-json-existing-other", "lost", ["bench-typing", "{tmp}/tiny.jsonl", "--json", "{tmp}/notes.json"],
         files={"tiny.jsonl": tiny_trace(), "notes.json": '{"mine": 1}'}, victims=["{tmp}/notes.json"], needs=["model"],
         expect_msg=r"notes\.json.*exists.*JSON result"),
    Case("bench-typing-json-own-replaced", "lost", ["bench-typing", "{tmp}/tiny.jsonl", "--json", "{tmp}/out.json"],
         files={"tiny.jsonl": tiny_trace(), "out.json": OWN_BENCH_JSON}, expect_rc=0, needs=["model"],
         check=starts_with("out.json", b"{\n")),
    Case("replay-json-own-replaced", "lost", ["replay", "--fast", "{tmp}/tiny.jsonl", "--json", "{tmp}/out.json"],
         files={"tiny.jsonl": tiny_trace(), "out.json": OWN_REPLAY_JSON}, expect_rc=0, needs=["model"],
         check=starts_with("out.json", b"{\n")),
    Case("replay-json-bench-typing-result", "lost", ["replay", "--fast", "{tmp}/tiny.jsonl", "--json", "{tmp}/b.json"],
         files={"tiny.jsonl": tiny_trace(), "b.json": OWN_BENCH_JSON}, victims=["{tmp}/b.json"], needs=["model"],
         expect_msg=r"b\.json.*exists"),
    Case("bench-typing-json-missing-folder", "lost", ["bench-typing", "{tmp}/tiny.jsonl", "--json", "{tmp}/no/out.json"],
         files={"tiny.jsonl": tiny_trace()}, needs=["model"], expect_msg=r"out\.json.*folder.*does not exist"),
    Case("replay-json-missing-folder", "lost", ["replay", "--fast", "{tmp}/tiny.jsonl", "--json", "{tmp}/no/out.json"],
         files={"tiny.jsonl": tiny_trace()}, needs=["model"], expect_msg=r"out\.json.*folder.*does not exist"),
    Case("bench-typing-json-dev-full", "lost", ["bench-typing", "{tmp}/tiny.jsonl", "--json", "/dev/full"],
         files={"tiny.jsonl": tiny_trace()}, needs=["model"], expect_msg=r"/dev/full.*(disk is full|space)"),
    Case("replay-json-dev-full", "lost", ["replay", "--fast", "{tmp}/tiny.jsonl", "--json", "/dev/full"],
         files={"tiny.jsonl": tiny_trace()}, needs=["model"], expect_msg=r"/dev/full.*(disk is full|space)"),
    Case("bench-typing-json-ulimit-f", "lost", ["bench-typing", "{tmp}/tiny.jsonl", "--json", "{tmp}/out.json"],
         files={"tiny.jsonl": tiny_trace(), "out.json": OWN_BENCH_JSON}, fsize_limit=64, victims=["{tmp}/out.json"],
         needs=["model"], expect_msg=r"out\.json.*(ulimit -f|too large)", check=only_files("tiny.jsonl", "out.json")),
    # All traces are checked before any work (the choice made in cmd_bench_typing.cpp / cmd_replay.cpp): a bad
    # trace after a good one is an error naming it, before the model is loaded, and nothing is written.
    Case("bench-typing-good-then-bad-trace", "lost",
         ["bench-typing", "{tmp}/good.jsonl", "{tmp}/bad.jsonl", "--json", "{tmp}/out.json"],
         files={"good.jsonl": tiny_trace(), "bad.jsonl": BAD_TRACE}, victims=["{tmp}/good.jsonl"],
         expect_msg=r"bad\.jsonl", check=only_files("good.jsonl", "bad.jsonl")),
    Case("replay-good-then-bad-trace", "lost",
         ["replay", "--fast", "{tmp}/good.jsonl", "{tmp}/bad.jsonl", "--json", "{tmp}/out.json"],
         files={"good.jsonl": tiny_trace(), "bad.jsonl": BAD_TRACE}, victims=["{tmp}/good.jsonl"],
         expect_msg=r"bad\.jsonl", check=only_files("good.jsonl", "bad.jsonl")),
    Case("bench-steps-out-is-model", "lost", ["bench", "-m", "{tmp}/m.gguf", "-p", "0", "-n", "1", "--steps-out",
                                              "{tmp}/m.gguf"],
         setup=copy_model(), victims=["{tmp}/m.gguf"], needs=["model"], expect_msg=r"m\.gguf.*input"),
    Case("bench-steps-out-dev-full", "lost", ["bench", "-m", "{model}", "-p", "0", "-n", "2", "--warmup", "0",
                                              "--steps-out", "/dev/full"],
         needs=["model"], expect_msg=r"/dev/full.*(disk is full|space)"),

    # ---- hang: FIFOs, devices and folders as a model, a trace or a tokenizer -------------------------
    Case("fifo-as-model", "hang", ["info", "-m", "{tmp}/fifo.gguf"],
         setup=mkfifo("fifo.gguf"), expect_msg=r"fifo\.gguf.*(not a regular file|fifo)", timeout=10),
    Case("fifo-as-model-logits", "hang", ["logits", "-m", "{tmp}/fifo.gguf", "--tokens", "1", "-o", "{tmp}/x.npy"],
         setup=mkfifo("fifo.gguf"), expect_msg=r"fifo\.gguf.*not a regular file", timeout=10),
    Case("dev-zero-as-model", "hang", ["complete", "-m", "/dev/zero", "-p", "hi"],
         expect_msg=r"/dev/zero.*not a regular file", timeout=10),
    Case("folder-as-model", "hang", ["info", "-m", "{tmp}/empty"], setup=lambda tmp: (tmp / "empty").mkdir(),
         expect_msg=r"empty: a folder without config\.json", timeout=10),
    Case("fifo-as-shard", "hang", ["info", "-m", "{tmp}/hf"],
         files={"hf/config.json": json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
                                              "num_attention_heads": 2, "intermediate_size": 128, "vocab_size": 256,
                                              "rms_norm_eps": 1e-5, "max_position_embeddings": 128})},
         setup=mkfifo("hf/model.safetensors"), timeout=10),
    Case("bench-typing-dev-zero", "hang", ["bench-typing", "/dev/zero"],
         expect_msg=r"/dev/zero.*not a regular file", timeout=10),
    Case("replay-dev-zero", "hang", ["replay", "/dev/zero"], expect_msg=r"/dev/zero.*not a regular file", timeout=10),
    Case("fifo-as-trace", "hang", ["bench-typing", "{tmp}/t.jsonl"], setup=mkfifo("t.jsonl"),
         expect_msg=r"t\.jsonl.*not a regular file", timeout=10),
    Case("folder-as-trace", "hang", ["replay", "{tmp}"], expect_msg=r"not a regular file.*folder", timeout=10),
    Case("fifo-as-tokenizer", "hang", ["tokenize", "--tokenizer", "{tmp}/tokenizer.json", "hello"],
         setup=mkfifo("tokenizer.json"), expect_msg=r"tokenizer\.json.*not a regular file", timeout=10),
    Case("fifo-as-gguf-tokenize", "hang", ["tokenize", "-m", "{tmp}/f.gguf", "hello"], setup=mkfifo("f.gguf"),
         expect_msg=r"f\.gguf.*not a regular file", timeout=10),
    Case("dev-zero-as-detokenize-model", "hang", ["detokenize", "-m", "/dev/zero", "--ids", "1"],
         expect_msg=r"/dev/zero.*not a regular file", timeout=10),
    Case("fifo-as-mkmodel-tokenizer", "hang", MK + ["--tokenizer", "{tmp}/tokenizer.json", "-o", "{tmp}/m.gguf"],
         setup=mkfifo("tokenizer.json"), expect_msg=r"tokenizer\.json.*not a regular file", timeout=10,
         check=only_files("tokenizer.json")),
]
