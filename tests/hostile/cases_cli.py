# Hostile command lines of issue 11 that concern arguments, JSON, traces and
# limits (tests/hostile/hostile.py runs them; cases_files.py has the
# file-output and model-opening ones). Every trace is an inline file; the
# default model ({model}, needs=["model"]) is the only model used.
#
# Most trace cases use `replay --fast` with no -m: traces are checked as a
# whole before the model is loaded, so they need no model at all.
import hashlib
import os

Z = "0" * 64  # a well-formed final_sha256 (the rebuilt text's is checked last)
HEAD = '{"trace":"t","final_sha256":"%s"}\n' % Z
INS = '{"t_ms":5,"op":"insert","pos":0,"text":"hello"}\n'


def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


def good_trace(name="t"):
    return '{"trace":"%s","final_sha256":"%s"}\n' % (name, sha("hello")) + INS


def replay(trace_body, name="t.jsonl", extra=()):
    return dict(args=["replay", "--fast", *extra, "{tmp}/" + name], files={name: trace_body})


IDS_1024 = ",".join(["1"] * 1024)
IDS_2000 = ",".join(["1"] * 2000)
IDS_5000 = ",".join(["1"] * 5000)
IDS_20000 = ",".join(str(i % 8000) for i in range(20000))  # ~96 KB: under Linux's 128 KB per argument


def stderr_has(pattern):
    import re

    def check(tmp, proc):
        err = proc.stderr.decode("utf-8", "replace")
        return None if re.search(pattern, err, re.S | re.I) else f"stderr lacks /{pattern}/: {err[:300]!r}"
    return check


def bad_name_trace(tmp):
    # A file name that is not UTF-8 names the trace when the header has no "trace".
    (tmp / os.fsdecode(b"\xff.jsonl")).write_bytes(('{"final_sha256":"%s"}\n' % sha("hello") + INS).encode())


DEFAULT_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "laya-default-q8_0.gguf")


def model_with_bad_name(tmp):
    # The model path goes into --json results: bytes that are not UTF-8 made nlohmann throw (abort).
    os.symlink(os.path.abspath(DEFAULT_MODEL), tmp / os.fsdecode(b"m\xff.gguf"))


def json_written(tmp, proc):
    import json
    try:
        json.loads((tmp / "o.json").read_text("utf-8"))
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        return f"o.json is not a JSON document: {e}"
    return None


def model_with_quote(tmp):
    os.symlink(os.path.abspath(DEFAULT_MODEL), tmp / 'q"\\.gguf')


def stdout_is_json(tmp, proc):
    import json
    try:
        json.loads(proc.stdout.decode("utf-8"))
    except Exception as e:  # noqa: BLE001
        return f"stdout is not one JSON object: {e}: {proc.stdout[:200]!r}"
    return None


def fifo_trace(tmp):
    os.mkfifo(tmp / "fifo.jsonl")


CASES = [
    # ---- crashes (issue examples) -------------------------------------------------
    Case("detokenize-id-past-int64", "crash", ["detokenize", "-m", "{model}", "--ids", "99999999999999999999"],
         expect_rc=2, expect_msg=r"--ids: '99999999999999999999' is out of range \[0, 2147483647\]", needs=["model"]),
    Case("trace-n-string", "crash", **replay(HEAD + INS + '{"t_ms":6,"op":"delete","pos":2,"n":"3"}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:3: field "n" is string, expected an integer'),
    Case("trace-n-null", "crash", **replay(HEAD + INS + '{"t_ms":6,"op":"delete","pos":2,"n":null}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:3: field "n" is null, expected an integer'),
    Case("threads-100000", "crash", ["complete", "-m", "{model}", "-p", "hi", "-t", "100000"],
         expect_rc=2, expect_msg=r"laya complete: error: --threads: '100000' is out of range \[0, \d+\]", needs=["model"]),
    Case("mkmodel-threads-100000", "crash", ["mkmodel", "--preset", "tiny", "-t", "100000", "-o", "{tmp}/m.gguf"],
         expect_rc=2, expect_msg=r"--threads: '100000' is out of range"),
    Case("replay-json-model-path-not-utf8", "crash",
         ["replay", "--fast", "-t", "1", "--max-tokens", "2", "-m", "{tmp}/m\udcff.gguf", "{tmp}/t.jsonl", "--json", "{tmp}/o.json"],
         files={"t.jsonl": good_trace()}, setup=model_with_bad_name, expect_rc=0, check=json_written, needs=["model"],
         timeout=60),
    Case("bench-typing-json-model-path-not-utf8", "crash",
         ["bench-typing", "-t", "1", "--max-tokens", "2", "-m", "{tmp}/m\udcff.gguf", "{tmp}/t.jsonl", "--json", "{tmp}/o.json"],
         files={"t.jsonl": good_trace()}, setup=model_with_bad_name, expect_rc=0, check=json_written, needs=["model"],
         timeout=60),
    Case("bench-json-model-path-with-quote", "silent",
         ["bench", "-t", "1", "-m", '{tmp}/q"\\.gguf', "-p", "8", "-n", "2", "--warmup", "0", "--json", "--no-mlock"],
         setup=model_with_quote, expect_rc=0, check=stdout_is_json, needs=["model"], timeout=60),
    Case("bench-typing-prompt-invalid-utf8", "crash", ["bench-typing", "-m", "{model}", "-t", "1", "-p", "ab\udcff"],
         expect_rc=2, expect_msg=r"not valid UTF-8", needs=["model"]),
    # ---- hangs (issue examples) ---------------------------------------------------
    Case("threads-1000", "hang", ["complete", "-m", "{model}", "-p", "hi", "-t", "1000"],
         expect_rc=2, expect_msg=r"--threads: '1000' is out of range", needs=["model"], timeout=15),
    Case("bench-prompt-100000", "hang", ["bench", "-m", "{model}", "-p", "100000"],
         expect_rc=2, expect_msg=r"-p 100000 needs 100000 positions, past the trained context of .*\(1024 tokens\)",
         needs=["model"], timeout=15),
    Case("bench-depth-100000", "hang", ["bench", "-m", "{model}", "-d", "100000"],
         expect_rc=2, expect_msg=r"-d 100000 \+ --warmup 8 \+ -n 128 needs 100136 positions.*1024 tokens",
         needs=["model"], timeout=15),
    Case("bench-typing-dev-zero", "hang", ["bench-typing", "/dev/zero"],
         expect_rc=2, expect_msg=r"/dev/zero: not a regular file", timeout=15),
    Case("replay-dev-zero", "hang", ["replay", "--fast", "/dev/zero"],
         expect_rc=2, expect_msg=r"/dev/zero: not a regular file", timeout=15),
    Case("replay-fifo-trace", "hang", ["replay", "--fast", "{tmp}/fifo.jsonl"], setup=fifo_trace,
         expect_rc=2, expect_msg=r"fifo\.jsonl: not a regular file", timeout=15),
    Case("trace-t-ms-1e15", "hang", **replay(HEAD + '{"t_ms":1e15,"op":"insert","pos":0,"text":"a"}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:2: field "t_ms" is 1000000000000000, expected a number in \[0, 604800000\]'),
    # ---- silent nonsense (issue examples) -------------------------------------------
    Case("complete-n-past-context", "silent", ["complete", "-m", "{model}", "-t", "2", "--tokens", IDS_1024,
                                               "-n", "1048576"],
         expect_rc=0, expect_msg=r"warning: generation stopped at the context of 1024 tokens \(1024 prompt \+ 1 generated; -n 1048576",
         needs=["model"], timeout=60),
    Case("logits-5000-ids", "silent", ["logits", "-m", "{model}", "--tokens", IDS_5000, "-o", "{tmp}/o.npy"],
         expect_rc=2, expect_msg=r"--tokens \(5000 ids\) needs 5000 positions, past the trained context of .*\(1024 tokens\)",
         needs=["model"], check=lambda tmp, p: "o.npy was written" if (tmp / "o.npy").exists() else None),
    Case("detokenize-empty-item", "silent", ["detokenize", "-m", "{model}", "--ids", "1,,2"],
         expect_rc=2, expect_msg=r"--ids: empty item at position 2 in '1,,2'", needs=["model"]),
    Case("trace-empty-file", "silent", **replay(""), expect_rc=1, expect_msg=r"t\.jsonl: empty trace \(no header line\)"),
    Case("trace-only-header", "silent", **replay(HEAD), expect_rc=1,
         expect_msg=r"t\.jsonl:1: the trace has a header but no events"),
    Case("trace-directory", "silent", ["replay", "--fast", "{tmp}/dir.jsonl"],
         setup=lambda tmp: (tmp / "dir.jsonl").mkdir(), expect_rc=2, expect_msg=r"dir\.jsonl: not a regular file"),
    Case("trace-t-ms-decreasing", "silent", **replay(HEAD + INS + '{"t_ms":4,"op":"move","pos":1}\n'),
         expect_rc=1, expect_msg=r"t\.jsonl:3: t_ms 4 is before the previous event's 5"),
    Case("trace-t-ms-string", "silent", **replay(HEAD + '{"t_ms":"5","op":"insert","pos":0,"text":"a"}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:2: field "t_ms" is string, expected a number'),
    Case("trace-delete-without-n", "silent", **replay(HEAD + INS + '{"t_ms":6,"op":"delete","pos":2}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:3: missing field "n"'),
    Case("trace-n-int64-max", "silent", **replay(HEAD + INS + '{"t_ms":6,"op":"delete","pos":2,"n":9223372036854775807}\n'),
         expect_rc=1, expect_msg=r"t\.jsonl:3: delete of 9223372036854775807 at 2 is past the end of the document \(5 code points\)"),
    Case("trace-final-sha256-wrong", "silent", **replay(HEAD + INS), expect_rc=1,
         expect_msg=r"t\.jsonl: the rebuilt document's sha256 is 2cf24dba.*, the header's final_sha256 0000"),
    Case("bench-typing-final-sha256-wrong", "silent", ["bench-typing", "{tmp}/t.jsonl"], files={"t.jsonl": HEAD + INS},
         expect_rc=1, expect_msg=r"t\.jsonl: the rebuilt document's sha256 is"),
    # ---- messages (issue examples) ------------------------------------------------
    Case("trace-json-type-error-names-file-line", "message",
         **replay(HEAD + INS + '{"t_ms":6,"op":"move","pos":[1]}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:3: field "pos" is array, expected an integer'),
    Case("trace-pos-uint64-max-shown-as-itself", "message",
         **replay(HEAD + INS + '{"t_ms":6,"op":"move","pos":18446744073709551615}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:3: field "pos" is 18446744073709551615'),
    # ---- limits (scope 3) -------------------------------------------------------------
    Case("bench-prompt-depth-gen-past-context", "limit", ["bench", "-m", "{model}", "-p", "0", "-d", "1000", "-n", "100"],
         expect_rc=2, expect_msg=r"-d 1000 \+ --warmup 8 \+ -n 100 needs 1108 positions", needs=["model"]),
    Case("bench-same-position-past-context", "limit", ["bench", "-m", "{model}", "-p", "0", "-d", "1024", "--same-position"],
         expect_rc=2, expect_msg=r"-d 1024 \(--same-position\) needs 1025 positions", needs=["model"]),
    Case("complete-prompt-past-context", "limit", ["complete", "-m", "{model}", "--ids", "--tokens", IDS_2000, "-n", "1"],
         expect_rc=2, expect_msg=r"the prompt \(2000 tokens\) needs 2000 positions, past the trained context", needs=["model"]),
    Case("bench-typing-max-ctx-past-trained", "limit", ["bench-typing", "-m", "{model}", "-t", "1", "--max-ctx", "100000",
                                                        "-p", "def f(x):"],
         expect_rc=0, expect_msg=r"warning: --max-ctx 100000 is past the trained context of .*\(1024 tokens\): using 1024",
         needs=["model"], timeout=60),
    Case("info-ctx-past-trained", "limit", ["info", "-m", "{model}", "-c", "100000"],
         expect_rc=0, expect_msg=r"warning: -c 100000 is past the trained context", needs=["model"]),
    Case("info-ctx-past-engine-bound", "limit", ["info", "-m", "{model}", "-c", "99999999"],
         expect_rc=2, expect_msg=r"--ctx: '99999999' is out of range \[1, 16777216\]", needs=["model"]),
    # ---- added: numbers ---------------------------------------------------------------
    Case("threads-negative", "message", ["complete", "-m", "{model}", "-p", "hi", "-t", "-1"],
         expect_rc=2, expect_msg=r"--threads: '-1' is out of range", needs=["model"]),
    Case("threads-hex", "silent", ["complete", "-m", "{model}", "-p", "hi", "-t", "0x10"],
         expect_rc=2, expect_msg=r"--threads: '0x10' is not an integer", needs=["model"]),
    # CLI11 alone reads "08" as a bad octal number and "010" as 8: the one parser reads decimal
    # (the run then fails on the trace, after the option was taken).
    Case("decimal-leading-zero", "silent", ["replay", "--fast", "--max-tokens", "08", "{tmp}/t.jsonl"],
         files={"t.jsonl": HEAD}, expect_rc=1, expect_msg=r"t\.jsonl:1: the trace has a header but no events"),
    Case("threads-whitespace", "silent", ["complete", "-m", "{model}", "-p", "hi", "-t", " 2"],
         expect_rc=2, expect_msg=r"--threads: ' 2' is not an integer", needs=["model"]),
    Case("threads-exponent", "silent", ["bench", "-m", "{model}", "-t", "1e3"],
         expect_rc=2, expect_msg=r"--threads: '1e3' is not an integer", needs=["model"]),
    Case("n-predict-negative", "silent", ["complete", "-m", "{model}", "-p", "hi", "-n", "-5"],
         expect_rc=2, expect_msg=r"--n-predict: '-5' is out of range \[0, 1048576\]", needs=["model"]),
    Case("temp-nan", "silent", ["complete", "-m", "{model}", "-p", "hi", "--temp", "nan"],
         expect_rc=2, expect_msg=r"--temp: 'nan' is not a finite number", needs=["model"]),
    Case("temp-inf", "silent", ["complete", "-m", "{model}", "-p", "hi", "--temp", "inf"],
         expect_rc=2, expect_msg=r"--temp: 'inf' is not a finite number", needs=["model"]),
    Case("top-p-past-one", "silent", ["complete", "-m", "{model}", "-p", "hi", "--top-p", "1.5"],
         expect_rc=2, expect_msg=r"--top-p: '1\.5' is out of range \[0, 1\]", needs=["model"]),
    Case("seed-negative", "silent", ["complete", "-m", "{model}", "-p", "hi", "--seed", "-1"],
         expect_rc=2, expect_msg=r"--seed: '-1' is out of range", needs=["model"]),
    Case("kv-budget-nan", "silent", ["bench", "-m", "{model}", "--kv-budget", "nan"],
         expect_rc=2, expect_msg=r"--kv-budget: 'nan' is not a finite number", needs=["model"]),
    Case("bench-reps-zero", "silent", ["bench", "-m", "{model}", "-r", "0"],
         expect_rc=2, expect_msg=r"--reps: '0' is out of range \[1, 1000\]", needs=["model"]),
    Case("bench-batch-zero", "silent", ["bench", "-m", "{model}", "-b", "0"],
         expect_rc=2, expect_msg=r"--batch: '0' is out of range \[1, 65536\]", needs=["model"]),
    Case("mkmodel-seed-fraction", "silent", ["mkmodel", "--preset", "tiny", "--seed", "1.5", "-o", "{tmp}/m.gguf"],
         expect_rc=2, expect_msg=r"--seed: '1\.5' is not an integer"),
    Case("replay-max-tokens-zero", "silent", ["replay", "--fast", "--max-tokens", "0", "{tmp}/t.jsonl"],
         files={"t.jsonl": good_trace()}, expect_rc=2, expect_msg=r"--max-tokens: '0' is out of range \[1, 64\]"),
    Case("info-ctx-zero", "silent", ["info", "-m", "{model}", "-c", "0"],
         expect_rc=2, expect_msg=r"--ctx: '0' is out of range", needs=["model"]),
    # ---- added: id lists ----------------------------------------------------------------
    Case("ids-empty-string", "silent", ["detokenize", "-m", "{model}", "--ids", ""],
         expect_rc=2, expect_msg=r"--ids: '' holds no ids", needs=["model"]),
    Case("ids-trailing-comma", "silent", ["logits", "-m", "{model}", "--tokens", "1,2,", "-o", "{tmp}/o.npy"],
         expect_rc=2, expect_msg=r"--tokens: empty item at position 3 in '1,2,'", needs=["model"]),
    Case("ids-space-separated", "silent", ["detokenize", "-m", "{model}", "--ids", "1 2"],
         expect_rc=2, expect_msg=r"--ids: '1 2' is not an integer", needs=["model"]),
    Case("ids-negative", "silent", ["detokenize", "-m", "{model}", "--ids", "5,-1"],
         expect_rc=2, expect_msg=r"--ids: item 2 of '5,-1': '-1' is out of range", needs=["model"]),
    Case("ids-unclosed-bracket", "silent", ["detokenize", "-m", "{model}", "--ids", "[1,2"],
         expect_rc=2, expect_msg=r"--ids: '\[1,2' starts with '\[' but does not end with '\]'", needs=["model"]),
    Case("ids-past-vocabulary", "silent", ["detokenize", "-m", "{model}", "--ids", "1,99999"],
         expect_rc=2, expect_msg=r"--ids: token 99999 \(item 2\) is out of range: the vocabulary has 12288 tokens", needs=["model"]),
    Case("complete-tokens-past-vocabulary", "silent", ["complete", "-m", "{model}", "--tokens", "1,99999", "-n", "1"],
         expect_rc=2, expect_msg=r"--tokens: item 2 of '1,99999': '99999' is out of range \[0, 12287\]", needs=["model"]),
    Case("ids-huge-list", "limit", ["detokenize", "-m", "{model}", "--ids", IDS_20000],
         expect_rc=0, needs=["model"], timeout=30),
    Case("ids-json-array", "silent", ["detokenize", "-m", "{model}", "--ids", "[1, 2, 3]"], expect_rc=0, needs=["model"]),
    # ---- added: the command line itself -------------------------------------------------
    Case("unknown-subcommand", "message", ["frobnicate"], expect_rc=2, expect_msg=r"laya: unknown command 'frobnicate'"),
    Case("no-subcommand", "message", [], expect_rc=2, expect_msg=r"usage: laya <command>"),
    Case("unknown-option", "message", ["complete", "-m", "{model}", "-p", "hi", "--frob", "3"],
         expect_rc=2, expect_msg=r"laya complete: error: .*--frob", needs=["model"]),
    Case("duplicated-option", "message", ["complete", "-m", "{model}", "-p", "hi", "-t", "1", "-t", "2"],
         expect_rc=2, expect_msg=r"laya complete: error: --threads", needs=["model"]),
    Case("option-without-value", "message", ["complete", "-m", "{model}", "-p", "hi", "-t"],
         expect_rc=2, expect_msg=r"laya complete: error: .*threads", needs=["model"]),
    Case("prompt-and-tokens", "message", ["complete", "-m", "{model}", "-p", "hi", "--tokens", "1"],
         expect_rc=2, expect_msg=r"laya complete: error: .*(--prompt|--tokens).*excludes", needs=["model"]),
    Case("model-empty-string", "message", ["complete", "-m", "", "-p", "hi"], expect_rc=2, expect_msg=r"no model: pass -m MODEL"),
    Case("prompt-invalid-utf8", "silent", ["complete", "-m", "{model}", "-p", "a\udcff\udcfe", "-n", "1"],
         expect_rc=2, expect_msg=r"--prompt: the text is not valid UTF-8 \(byte 1 of 3", needs=["model"]),
    Case("tokenize-invalid-utf8", "silent", ["tokenize", "-m", "{model}", "a\udcff"],
         expect_rc=2, expect_msg=r"TEXT: the text is not valid UTF-8 \(byte 1 of 2", needs=["model"]),
    Case("tokenize-no-text", "silent", ["tokenize", "-m", "{model}"],
         expect_rc=2, expect_msg=r"no text: pass TEXT", needs=["model"]),
    Case("tokenize-batch-text-not-string", "message", ["tokenize", "-m", "{model}", "--batch"],
         stdin=b'{"text":"ok"}\n{"text":5}\n{"text":null}\n[1]\n{"text": \n',
         expect_rc=1, expect_msg=r"4 input line\(s\) had errors", needs=["model"],
         check=lambda tmp, p: None if all(s in p.stdout.decode() for s in (
             'stdin line 2: field \\"text\\" is integer, expected a string',
             'stdin line 3: field \\"text\\" is null, expected a string',
             "stdin line 4: expected a JSON object, got array", "stdin line 5: malformed JSON")) else p.stdout.decode()[:500]),
    # ---- added: traces ----------------------------------------------------------------
    Case("trace-unknown-op", "silent", **replay(HEAD + '{"t_ms":1,"op":"paste","pos":0,"text":"a"}\n'),
         expect_rc=1, expect_msg=r"t\.jsonl:2: unknown op 'paste' \(expected insert, delete, move or accept\)"),
    Case("trace-pos-negative", "silent", **replay(HEAD + INS + '{"t_ms":6,"op":"move","pos":-1}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:3: field "pos" is -1, expected an integer in \[0, 5\]'),
    Case("trace-pos-past-end", "silent", **replay(HEAD + INS + '{"t_ms":6,"op":"insert","pos":6,"text":"x"}\n'),
         expect_rc=1, expect_msg=r"t\.jsonl:3: pos 6 is past the end of the document \(5 code points\)"),
    Case("trace-delete-zero", "silent", **replay(HEAD + INS + '{"t_ms":6,"op":"delete","pos":1,"n":0}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:3: field "n" is 0, expected >= 1'),
    Case("trace-n-float", "silent", **replay(HEAD + INS + '{"t_ms":6,"op":"delete","pos":1,"n":1.0}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:3: field "n" is float, expected an integer'),
    Case("trace-t-ms-negative", "silent", **replay(HEAD + '{"t_ms":-5,"op":"insert","pos":0,"text":"a"}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:2: field "t_ms" is -5, expected a number in \[0, '),
    Case("trace-empty-insert", "silent", **replay(HEAD + '{"t_ms":1,"op":"insert","pos":0,"text":""}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:2: insert of an empty "text"'),
    Case("trace-text-not-string", "silent", **replay(HEAD + '{"t_ms":1,"op":"accept","pos":0,"text":{"a":1}}\n'),
         expect_rc=1, expect_msg=r't\.jsonl:2: field "text" is object, expected a string'),
    Case("trace-text-invalid-utf8", "silent", args=["replay", "--fast", "{tmp}/t.jsonl"],
         files={"t.jsonl": HEAD.encode() + b'{"t_ms":1,"op":"insert","pos":0,"text":"a\xff"}\n'},
         expect_rc=1, expect_msg=r"t\.jsonl:2: malformed JSON at byte .*UTF-8"),
    Case("trace-text-lone-surrogate", "silent", **replay(HEAD + '{"t_ms":1,"op":"insert","pos":0,"text":"\\ud800"}\n'),
         expect_rc=1, expect_msg=r"t\.jsonl:2: malformed JSON at byte .*surrogate"),
    Case("trace-line-not-object", "silent", **replay(HEAD + "[1,2]\n"),
         expect_rc=1, expect_msg=r"t\.jsonl:2: expected a JSON object, got array"),
    Case("trace-no-header", "silent", **replay(INS), expect_rc=1, expect_msg=r"t\.jsonl:1: expected the header line"),
    Case("trace-sha-not-hex", "silent", **replay('{"final_sha256":"00"}\n' + INS),
         expect_rc=1, expect_msg=r"t\.jsonl:1: \"final_sha256\" is '00', expected 64 hex digits"),
    Case("trace-header-events-mismatch", "silent", **replay('{"events":3,"final_sha256":"%s"}\n' % sha("hello") + INS),
         expect_rc=1, expect_msg=r't\.jsonl: the header says "events": 3, the file has 1 events'),
    Case("trace-header-chars-mismatch", "silent", **replay('{"chars":9,"final_sha256":"%s"}\n' % sha("hello") + INS),
         expect_rc=1, expect_msg=r"t\.jsonl: the rebuilt document has 5 code points, the header's \"chars\" 9"),
    Case("trace-name-not-utf8", "silent", ["replay", "--fast", "{tmp}/\udcff.jsonl"], setup=bad_name_trace,
         expect_rc=1, expect_msg=r"the trace name '\\xFF' \(the file name\) is not valid UTF-8"),
    Case("trace-twice", "silent", ["replay", "--fast", "{tmp}/a.jsonl", "{tmp}/a.jsonl"], files={"a.jsonl": good_trace()},
         expect_rc=2, expect_msg=r"a\.jsonl and .*a\.jsonl are both trace 't'"),
    Case("traces-same-name", "silent", ["bench-typing", "{tmp}/a.jsonl", "{tmp}/b.jsonl"],
         files={"a.jsonl": good_trace("x"), "b.jsonl": good_trace("x")},
         expect_rc=2, expect_msg=r"a\.jsonl and .*b\.jsonl are both trace 'x'"),
    Case("trace-bad-after-good", "silent", ["replay", "--fast", "{tmp}/a.jsonl", "{tmp}/b.jsonl"],
         files={"a.jsonl": good_trace("a"), "b.jsonl": HEAD + '{"t_ms":1,"op":"move"}\n'},
         expect_rc=1, expect_msg=r'b\.jsonl:2: missing field "pos"'),
]
