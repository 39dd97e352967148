"""Reading emitted programs (``.pte``) without running them: ``inspect_program.inspect`` reports
per method its delegates, operators outside delegates and how each mutable buffer is updated.
Reads through ExecuTorch's own schema (``pte_file``, ``plan``); depends on ``format`` only."""

from executorch_trt.inspection.inspect_program import inspect
from executorch_trt.inspection.pte_file import ProgramReadError
from executorch_trt.inspection.report import ProgramReport

__all__ = ["inspect", "ProgramReadError", "ProgramReport"]
