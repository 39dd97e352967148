"""The nested program's data, moved to the outer program's named data store.

A nested ``.pte`` built per method would carry its own copy of every weight it uses. Two
kinds of data live in it:

* what its XNNPACK delegates stored in the nested program's named data (the weights XNNPACK
  packs, keyed by the SHA-256 of their bytes);
* the constants that stay on ExecuTorch's kernels (an embedding table, norm weights, a
  weight of an op XNNPACK does not take). ``to_executorch(ExecutorchBackendConfig(
  external_constants=True))`` emits these as *external* tensors (``TensorDataLocation.
  EXTERNAL``) that the nested method looks up by name in the ``NamedDataMap`` it is loaded
  with (``Method::parse_external_constants``).

``split_nested_program`` moves both into one ``NamedDataStoreOutput`` for the outer program
(``PreprocessResult.data_store_output``), where ExecuTorch stores each key once per program,
whichever methods and partitions add it. A constant's key is derived from its layout and bytes
(``constant_key``), not from its module path: two methods of one program may hold different
tensors under the same path, and the same tensor under different paths.

The outer program's named data has no tensor layouts when it is stored in the ``.pte``
(ExecuTorch 1.5.1's ``PteDataMap::get_tensor_layout`` returns ``NotImplemented``), and the
nested method needs one per external constant. So the payload descriptor lists each constant's
layout (``ConstantLayout``; ``docs/formats/portable_payload.md``, version 3) and the engine answers
the nested method's layout queries from it, checking that each buffer has exactly the layout's byte
size (``core/engine/portable/constant_layouts_data_map.h``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import cast

from executorch.exir import ExecutorchBackendConfig, ExecutorchProgramManager
from executorch.exir._serialize._named_data_store import NamedDataStore, NamedDataStoreOutput
from executorch.exir._serialize._serialize import (
    _extract_external_tensor_layouts,
    serialize_for_executorch,
)
from executorch.exir.schema import Tensor, TensorDataLocation
from executorch.exir.tensor_layout import TensorLayout

from executorch_trt.format.portable_payload import ConstantLayout

#: Prefix of every constant key this engine writes (XNNPACK's keys are bare SHA-256 digests).
CONSTANT_KEY_PREFIX = "executorch_trt.constant."


def _layout_of(layout: TensorLayout) -> ConstantLayout:
    return ConstantLayout(
        int(layout.scalar_type),
        tuple(int(s) for s in layout.sizes),
        tuple(int(d) for d in layout.dim_order),
    )


def constant_key(layout: ConstantLayout, data: bytes) -> str:
    """The named-data key of a constant: ``CONSTANT_KEY_PREFIX`` + the SHA-256 of its layout
    (as JSON) and its bytes. Equal keys mean equal tensors, so sharing one entry is safe."""
    digest = hashlib.sha256(json.dumps(layout.to_json(), sort_keys=True).encode("utf-8"))
    digest.update(data)
    return CONSTANT_KEY_PREFIX + digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class NestedProgramParts:
    """A nested program split for the outer program.

    * ``pte``: the nested ``.pte``, with no named data and no constant of its own beyond
      lifted scalars (ExecuTorch keeps those in the program).
    * ``named_data``: everything moved out, for the outer named data store (``None`` if
      nothing was). With ``external_tag`` all of it is external data under that tag (the
      outer program's ``<tag>.ptd``), else ``.pte`` data.
    * ``constants``: the layout of each external constant the nested method loads, by key.
    """

    pte: bytes
    named_data: NamedDataStoreOutput | None
    constants: dict[str, ConstantLayout]


def split_nested_program(
    et: ExecutorchProgramManager, config: ExecutorchBackendConfig, external_tag: str | None
) -> NestedProgramParts:
    """Splits ``et`` (an ``ExecutorchProgramManager`` made with ``config``, whose
    ``external_constants`` is true) into ``NestedProgramParts`` (module docstring).

    Renames each external constant from its module path to ``constant_key`` in the emitted
    program and re-serialises it as ``to_executorch`` does, without named data or external
    constants. Uses ``et``'s private emitter state (ExecuTorch 1.5.1's ``_emitter_output``,
    ``_named_data``, ``_data_serializer``): a change there fails the export loudly (the
    structural tests in ``tests/py/named_data_test.py``). Raises ``ValueError`` if an external
    constant has no layout in the program (an ExecuTorch emitter it was not written for).
    """
    emitted = et._emitter_output
    store = NamedDataStore()
    nested = et._named_data
    if nested is not None:
        for key, entry in nested.pte_data.items():
            store.add_named_data(
                key,
                nested.buffers[entry.buffer_index],
                alignment=entry.alignment,
                external_tag=external_tag,
            )
    layouts = _extract_external_tensor_layouts(emitted.program)
    key_of_name: dict[str, str] = {}
    constants: dict[str, ConstantLayout] = {}
    # The emitter sets the map for every program it emits (typed Optional before it runs).
    external = cast(dict[str, dict[str, int]], emitted.external_constant_map)
    for fqn_to_index in external.values():
        for fqn, index in fqn_to_index.items():
            if fqn not in layouts:
                raise ValueError(
                    f"portable engine: external constant '{fqn}' has no tensor "
                    "in the nested program; this ExecuTorch emitter is not "
                    "supported"
                )
            layout = _layout_of(layouts[fqn])
            data = bytes(emitted.external_constant_buffer[index])
            key = constant_key(layout, data)
            key_of_name[fqn] = key
            if key not in constants:
                constants[key] = layout
                store.add_named_data(
                    key,
                    data,
                    alignment=config.constant_tensor_alignment,
                    external_tag=external_tag,
                    tensor_layout=layouts[fqn],
                )
    for plan in emitted.program.execution_plan:
        for value in plan.values:
            info = value.val.extra_tensor_info if isinstance(value.val, Tensor) else None
            if info is None or info.location is not TensorDataLocation.EXTERNAL:
                continue
            name = info.fully_qualified_name
            if name in key_of_name:
                info.fully_qualified_name = key_of_name[name]
            elif name not in constants:  # not renamed already through a shared info object
                raise ValueError(
                    f"portable engine: external tensor '{name}' is not among "
                    "the emitted external constants"
                )
    stripped = dataclasses.replace(emitted, external_constant_buffer=[], external_constant_map={})
    pte, _ = serialize_for_executorch(stripped, config, et._data_serializer, None)
    output = store.get_named_data_store_output()
    moved = output if output.pte_data or output.external_data else None
    return NestedProgramParts(pte=bytes(pte), named_data=moved, constants=constants)
