"""``analyse_partition``: one partition's binding contract and in-place alias decision.

``TensorRTBackend.preprocess`` builds the blob from it; ``InplaceMemoryPlanningPass`` runs it on
a copy of a lowered module's original partition to explain a write-back (``diagnostics``), so
both see the same decision.
"""

from __future__ import annotations

from torch.export import ExportedProgram

from executorch_trt.backend.aliases import AliasDecision, decide_aliases
from executorch_trt.backend.bindings import BindingContract, binding_contract
from executorch_trt.options import CompileOptions
from executorch_trt.passes.pipeline import canonicalise_partition


def analyse_partition(
    edge_program: ExportedProgram, options: CompileOptions
) -> tuple[BindingContract, AliasDecision]:
    """Canonicalises the buffer writes of partition ``edge_program`` *in place* (its graph
    is rewritten: ``pipeline.canonicalise_partition``) and returns its binding contract and
    alias decision. Raises ``ValueError`` as ``binding_contract`` and ``decide_aliases`` do."""
    canonicalise_partition(edge_program)
    contract = binding_contract(edge_program, options.symbol_ranges)
    return contract, decide_aliases(contract, options)
