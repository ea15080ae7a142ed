# Examples of the format (tests/hostile/hostile.py): the first cases of issue 11.

CASES = [
    Case("detokenize-id-past-int64", "crash", ["detokenize", "-m", "{model}", "--ids", "99999999999999999999"],
         expect_msg=r"--ids.*99999999999999999999", needs=["model"]),
]
