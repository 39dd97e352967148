"""The wire vocabulary: every name and number the exporter and the C++ runtime must agree on.

Each value here is written once on the Python side; everything else imports it. The C++
runtime states the same values in ``core/`` (cited next to each), and the format documents in
``docs/formats/delegate_blob.md`` are the contract both follow. An engine's *payload* format is
owned by its engine (``executorch_trt.format.portable_payload``), not by this module.
"""

from __future__ import annotations

import enum

import torch

#: The backend id: ``TensorRTBackend.__name__`` (ExecuTorch finds a Python backend by class
#: name), the ``DelegationSpec`` id the partitioner writes, and the name the C++ runtime
#: registers (``core/backend/tensorrt_backend.h``, ``executorch::runtime::register_backend``).
BACKEND_ID = "TensorRTBackend"

#: The external data file a program exported with ``external_weights=True`` keeps its named
#: data in: ``ExecutorchProgramManager.write_tensor_data_to_file(dir)`` writes ``dir/model.ptd``
#: (the runtimes take its path: ``runtime.load(pte, data=...)``, the runners' ``--data``).
EXTERNAL_WEIGHTS_TAG = "model"

#: Engine names: the metadata's ``"engine"`` (delegate_blob.md "Metadata"; C++ ``EngineKind``).
ENGINE_PORTABLE = "portable"
ENGINE_TENSORRT = "tensorrt"
ENGINES = (ENGINE_PORTABLE, ENGINE_TENSORRT)

#: Binding dtype names and the torch dtype each describes (delegate_blob.md "dtypes";
#: C++ ``core/blob/dtype_name.cpp``), in the order delegate_blob.md lists them.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}
_DTYPE_NAMES: dict[torch.dtype, str] = {dtype: name for name, dtype in DTYPES.items()}


def dtype_name(dtype: torch.dtype) -> str | None:
    """The wire name of ``dtype`` (``torch.float32`` -> ``"float32"``), or ``None`` when a
    blob cannot describe it (e.g. ``torch.complex64``)."""
    return _DTYPE_NAMES.get(dtype)


#: Largest static dimension a binding may have (C++ ``DelegateMetadata::Parse``: dimensions are
#: integers in ``[0, 2^31)``).
MAX_DIMENSION = (1 << 31) - 1
#: Most dimensions a binding may have (C++ ``kMaxBindingRank``; ExecuTorch's
#: ``kTensorDimensionLimit`` is 16).
MAX_RANK = 16

#: ``aliased_io`` kinds: who enforces the alias (delegate_blob.md "kind"; C++ ``AliasKind``).
ALIAS_KV_CACHE_UPDATE = "kv_cache_update"
ALIAS_USER = "user"
ALIAS_KINDS = (ALIAS_KV_CACHE_UPDATE, ALIAS_USER)
#: ``aliased_io`` ownerships: who owns the storage (delegate_blob.md "ownership"; C++
#: ``Ownership``).
OWNERSHIP_CALLER = "caller"
OWNERSHIPS = (OWNERSHIP_CALLER,)

#: Blob header constants (delegate_blob.md; C++ ``core/blob/blob_header.h``).
BLOB_MAGIC = b"ETRT"
BLOB_HEADER_SIZE = 64
#: The version a writer stamps on a delegate with static shapes only (readable by every
#: runtime), and the one it stamps when a binding has a dynamic dimension (``symbols``).
BLOB_FORMAT_VERSION = 1
BLOB_FORMAT_VERSION_DYNAMIC = 2
#: Every version this reader accepts (C++ ``kBlobFormatVersionMin``..``kBlobFormatVersion``).
BLOB_FORMAT_VERSIONS = (BLOB_FORMAT_VERSION, BLOB_FORMAT_VERSION_DYNAMIC)
BLOB_PAYLOAD_ALIGNMENT = 16
#: Byte offset of each header field (delegate_blob.md, the header table; C++ ``kBlobOffset*`` in
#: ``core/blob/blob_header.h``). Fields are little-endian; ``magic`` is 4 bytes, the next four
#: u32, the rest u64.
BLOB_HEADER_OFFSETS: dict[str, int] = {
    "magic": 0,
    "header_size": 4,
    "format_version": 8,
    "reserved": 12,
    "required_features": 16,
    "metadata_offset": 24,
    "metadata_size": 32,
    "payload_offset": 40,
    "payload_size": 48,
    "checksum": 56,
}
#: Byte offset of the header's ``checksum`` u64.
BLOB_CHECKSUM_OFFSET = BLOB_HEADER_OFFSETS["checksum"]


class Feature(enum.IntFlag):
    """``required_features`` bits (delegate_blob.md "Required features"; C++ ``kBlobFeature*``)."""

    ALIASED_IO = 1 << 0
    OWNERSHIP = 1 << 1
    CHECKSUM = 1 << 2


#: Every bit this version reads; a blob requiring any other bit is rejected.
KNOWN_FEATURES = Feature.ALIASED_IO | Feature.OWNERSHIP | Feature.CHECKSUM
