"""Graph passes of the delegate.

Inside a partition, at ``preprocess``: ``functional_copy_pass.FunctionalCopyPass`` then
``kv_cache_update_pass.KVCacheUpdatePass`` (buffer writes into ``kv_cache_update``), then
``noop_copies.DropNoOpCopiesPass`` (copies that change nothing). On the
top-level program, at ``to_executorch``: ``initialize_mutable_buffers`` and
``inplace_memory_planning.InplaceMemoryPlanningPass``. Import them from their modules (this
package imports nothing, so the backend and the planner can import each other's modules)."""
