"""Graph passes of the delegate: ``KVCacheUpdatePass`` (inside a partition, at preprocess) and
``InplaceMemoryPlanningPass`` (top-level program, at ``to_executorch``)."""

from executorch_trt.passes.inplace_memory_planning import InplaceMemoryPlanningPass
from executorch_trt.passes.kv_cache_update_pass import KVCacheUpdatePass, kv_write_args

__all__ = ["InplaceMemoryPlanningPass", "KVCacheUpdatePass", "kv_write_args"]
