"""`./bazelw run //:export_llm -- --model-dir DIR --max-seq-len N --output model.pte ...`:
executorch_trt.llm.cli (its docstring lists the flags and exit codes)."""

import sys

from executorch_trt.llm.cli import main

if __name__ == "__main__":
    sys.exit(main())
