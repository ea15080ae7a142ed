# Examples of the format (tests/hostile/hostile.py): the first cases of issue 11.
import os

CASES = [
    Case("detokenize-id-past-int64", "crash", ["detokenize", "-m", "{model}", "--ids", "99999999999999999999"],
         expect_msg=r"--ids.*99999999999999999999", needs=["model"]),
    Case("fifo-as-model", "hang", ["info", "-m", "{tmp}/fifo.gguf"],
         setup=lambda tmp: os.mkfifo(tmp / "fifo.gguf"), expect_msg=r"fifo\.gguf.*(not a regular file|fifo)", timeout=10),
]
