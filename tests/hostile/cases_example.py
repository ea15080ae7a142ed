# Examples of the format (tests/hostile/hostile.py). detokenize-id-past-int64 moved to cases_cli.py;
# fifo-as-model belongs with cases_files.py.
import os

CASES = [
    Case("fifo-as-model", "hang", ["info", "-m", "{tmp}/fifo.gguf"],
         setup=lambda tmp: os.mkfifo(tmp / "fifo.gguf"), expect_msg=r"fifo\.gguf.*(not a regular file|fifo)", timeout=10),
]
