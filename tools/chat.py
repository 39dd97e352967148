"""`./bazelw run //:chat -- --model model.pte --tokenizer tokenizer.json [--prompt TEXT] ...`:
executorch_trt.llm.chat (its docstring lists the flags and exit codes)."""

import sys

from executorch_trt.llm.chat import main

if __name__ == "__main__":
    sys.exit(main())
