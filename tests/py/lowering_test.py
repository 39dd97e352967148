"""Real lowering tests (no mocks): binding order at the delegate seam, in-place emission,
copy-back emission, the composable path, multi-method sharing and buffer initialisation."""

import operator
from unittest import mock

import torch
from absl.testing import absltest
from executorch.exir import to_edge_transform_and_lower
from executorch.exir._serialize._program import deserialize_pte_binary
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

import decoder_models as dm
import executorch_trt
import lowering_utils as lu
from executorch_trt import TensorRTPartitioner
from executorch_trt.engines.portable.shared_data import CONSTANT_KEY_PREFIX
from executorch_trt.format.portable_payload import read_portable_payload
from executorch_trt.graph.operator_support import schema_name


def _lower(ep, **kw):
    with torch.no_grad():
        return to_edge_transform_and_lower(ep, partitioner=[TensorRTPartitioner(**kw)])


class DelegateSeamTest(absltest.TestCase):
    """The blob's binding order equals the lowered delegate's argument order
    (docs/contract.md 3, "Order"), read from the real lowered program."""

    def setUp(self):
        self.edge = _lower(dm.export_reordered_kv())
        self.ep = self.edge.exported_program()
        (self.call,) = lu.delegate_calls(self.ep.graph_module)
        self.blob = lu.blob_of(self.ep.graph_module, self.call)

    def test_model_reorders_inputs(self):
        # Precondition: delegate argument order differs from the method's input order.
        delegate_args = [a.name for a in self.call.args[1:]]
        self.assertEqual(delegate_args, ["x", "b_k_cache", "pos"])
        self.assertNotEqual(
            [a for a in delegate_args if a in self.ep.graph_signature.user_inputs],
            list(self.ep.graph_signature.user_inputs),
        )

    def test_input_order_matches_delegate_arguments(self):
        delegate_args = [a.name for a in self.call.args[1:]]
        self.assertEqual([b.name for b in self.blob.metadata.inputs], delegate_args)
        for binding, arg in zip(self.blob.metadata.inputs, self.call.args[1:]):
            self.assertEqual(list(binding.shape), list(arg.meta["val"].shape), binding.name)

    def test_output_order_matches_delegate_outputs(self):
        sig = self.ep.graph_signature
        outputs = list(self.ep.graph.output_node().args[0])
        kinds = {s.arg.name: s.kind for s in sig.output_specs}
        getitems = {
            n.args[1]: n
            for n in self.ep.graph.nodes
            if n.op == "call_function" and n.target is operator.getitem and n.args[0] is self.call
        }
        meta_outputs = self.blob.metadata.outputs
        self.assertLen(getitems, len(meta_outputs))
        cache_in = [b.name for b in self.blob.metadata.inputs].index("b_k_cache")
        aliases = self.blob.metadata.aliased_output_to_input()
        for j, item in getitems.items():
            self.assertEqual(list(meta_outputs[j].shape), list(item.meta["val"].shape), j)
            self.assertIn(item, outputs)
            if kinds[item.name] == OutputKind.BUFFER_MUTATION:
                # The output that writes the cache back is the one the blob aliases to it.
                self.assertEqual(aliases, {j: cache_in})
            else:
                self.assertEqual(kinds[item.name], OutputKind.USER_OUTPUT)
                self.assertNotIn(j, aliases)
        self.assertEqual(len(aliases), 1)


class InplaceEmissionTest(absltest.TestCase):
    """Default export: the DelegateCall passes the cache's value id as input and output; no
    write-back copy_; no extra cache-sized tensor."""

    CACHE_SHAPE = (1, 6, 4)

    def _plan(self, et):
        return lu.execution_plan(et, "forward")

    def _cache_value(self, plan):
        ids = lu.tensor_values_of_shape(plan, self.CACHE_SHAPE)
        return ids

    def test_inplace(self):
        et = executorch_trt.export(dm.export_reordered_kv())
        plan = self._plan(et)
        cache_ids = self._cache_value(plan)
        self.assertLen(cache_ids, 1, "exactly one cache-sized tensor (the buffer itself)")
        (args,) = lu.delegate_call_args(plan)
        n_in = 3
        self.assertEqual(args[1], cache_ids[0])  # input 1 = b_k_cache
        self.assertEqual(args[n_in + 0], cache_ids[0])  # output 0 = the cache update
        self.assertEmpty(lu.kernel_calls(plan, "aten::copy_"))
        self.assertNotIn("aten::copy_", [op.name for op in plan.operators])

    def _assert_write_back(self, et):
        plan = self._plan(et)
        cache_ids = self._cache_value(plan)
        self.assertLen(cache_ids, 2, "buffer + the delegate's separate output")
        (args,) = lu.delegate_call_args(plan)
        buffer_id, out_id = args[1], args[3]
        self.assertNotEqual(buffer_id, out_id)
        copies = lu.kernel_calls(plan, "aten::copy_")
        self.assertLen(copies, 1)
        self.assertEqual(copies[0].args[:2], [buffer_id, out_id])

    def test_copy_back_mode(self):
        et = executorch_trt.export(dm.export_reordered_kv(), kv_cache="copy_back")
        self._assert_write_back(et)
        (call,) = lu.delegate_calls(et.exported_program().graph_module)
        self.assertEqual(
            lu.blob_of(et.exported_program().graph_module, call).metadata.aliased_io, ()
        )

    def test_finalised_without_our_config(self):
        with torch.no_grad():
            et = _lower(dm.export_reordered_kv()).to_executorch()
        self._assert_write_back(et)

    def test_composable_path_with_backend_config(self):
        with torch.no_grad():
            et = _lower(dm.export_reordered_kv()).to_executorch(executorch_trt.backend_config())
        plan = self._plan(et)
        self.assertLen(self._cache_value(plan), 1)
        self.assertEmpty(lu.kernel_calls(plan, "aten::copy_"))

    def test_no_planned_space_without_a_tensor(self):
        for kv_cache in ("inplace", "copy_back"):
            plan = self._plan(executorch_trt.export(dm.export_reordered_kv(), kv_cache=kv_cache))
            self.assertLessEqual(
                plan.non_const_buffer_sizes[1], lu.arena_tensor_bytes(plan, 1), kv_cache
            )

    def test_smaller_arena_than_copy_back(self):
        # The planner reuses freed space, so the saving is not exactly the cache size.
        inplace = self._plan(executorch_trt.export(dm.export_reordered_kv()))
        copy_back = self._plan(
            executorch_trt.export(dm.export_reordered_kv(), kv_cache="copy_back")
        )
        self.assertLess(inplace.non_const_buffer_sizes[1], copy_back.non_const_buffer_sizes[1])
        self.assertEqual(inplace.non_const_buffer_sizes[2], copy_back.non_const_buffer_sizes[2])


class DecoderLoweringTest(absltest.TestCase):
    """The Llama-shaped decoder: fully delegated, KV caches in place, ordinary-op state copied
    back, state shared across methods and initialised."""

    @classmethod
    def setUpClass(cls):
        cls.decoder = dm.TinyDecoder()
        cls.et = executorch_trt.export(dm.export_methods(cls.decoder))

    def test_everything_delegated(self):
        for method in ("prefill", "decode", "read_state"):
            plan = lu.execution_plan(self.et, method)
            self.assertLen(lu.delegate_call_args(plan), 1, method)
            self.assertLessEqual({op.name for op in plan.operators}, {"aten::copy_"}, method)

    def test_kv_caches_in_place_other_state_copied_back(self):
        for method in ("prefill", "decode"):
            ep = self.et.exported_program(method)
            (call,) = lu.delegate_calls(ep.graph_module)
            meta = lu.blob_of(ep.graph_module, call).metadata
            aliased_inputs = sorted(a.input for a in meta.aliased_io)
            self.assertEqual(
                aliased_inputs,
                sorted(f"b_m_layers_{i}_{kv}_cache" for i in range(2) for kv in "kv"),
            )
            self.assertTrue(
                all(
                    a.kind == "kv_cache_update" and a.ownership == "caller" for a in meta.aliased_io
                )
            )
            plan = lu.execution_plan(self.et, method)
            copies = lu.kernel_calls(plan, "aten::copy_")
            self.assertLen(copies, 2, "steps and state are written back by ExecuTorch")

    def test_nested_program_uses_kv_cache_update(self):
        ep = self.et.exported_program("decode")
        (call,) = lu.delegate_calls(ep.graph_module)
        ops = lu.nested_operator_names(lu.blob_of(ep.graph_module, call))
        self.assertEqual(ops.count("executorch_trt::kv_cache_update.out"), 1)
        self.assertNotIn("aten::index_put.out", ops)

    def test_nested_operators_exist_in_runtime(self):
        from executorch.extension.pybindings import portable_lib

        available = set(portable_lib._get_operator_names())
        for method in ("prefill", "decode", "read_state"):
            ep = self.et.exported_program(method)
            (call,) = lu.delegate_calls(ep.graph_module)
            ops = lu.nested_operator_names(lu.blob_of(ep.graph_module, call))
            # The delegate library's own kernels (core/kernels) are not in portable_lib.
            missing = (
                set(ops)
                - available
                - {"executorch_trt::kv_cache_update.out", "executorch_trt::gqa_attention.out"}
            )
            self.assertEmpty(missing, method)

    def test_weights_stored_once_per_program(self):
        # The nested programs' weights live in the outer program's named data, one
        # entry per distinct weight however many methods use it (prefill and decode both do):
        # XNNPACK's (the linears, keyed by the SHA-256 of their bytes) and the nested
        # programs' own constants (embedding, norms: external constants keyed by content). No
        # nested program keeps named data of its own, nor constant data beyond lifted scalars
        # (ExecuTorch keeps those in the program: external_constants_pass skips them).
        for method in ("prefill", "decode", "read_state"):
            ep = self.et.exported_program(method)
            for call in lu.delegate_calls(ep.graph_module):
                nested = deserialize_pte_binary(
                    read_portable_payload(lu.blob_of(ep.graph_module, call).payload).program
                )
                self.assertIsNone(nested.named_data, method)
                self.assertEmpty(
                    [b for b in nested.program.constant_buffer if len(b.storage) > 16], method
                )
        named = deserialize_pte_binary(self.et.buffer).named_data
        buffers = {k: bytes(named.buffers[e.buffer_index]) for k, e in named.pte_data.items()}
        xnnpack = {k: b for k, b in buffers.items() if not k.startswith(CONSTANT_KEY_PREFIX)}
        constants = {k: b for k, b in buffers.items() if k.startswith(CONSTANT_KEY_PREFIX)}
        linears = [m.weight for m in self.decoder.modules() if isinstance(m, torch.nn.Linear)]
        self.assertLen(linears, 2 * 7 + 1)
        self.assertEqual(
            sorted(xnnpack.values()), sorted(w.detach().numpy().tobytes() for w in linears)
        )
        others = [p for p in self.decoder.parameters() if not any(p is w for w in linears)]
        self.assertNotEmpty(others)  # the embedding and the norms
        for p in others:
            self.assertEqual(list(constants.values()).count(p.detach().numpy().tobytes()), 1)
        self.assertLen(set(constants.values()), len(constants))  # no content twice

    def test_zero_caches_add_no_bytes(self):
        # An all-zero initial value (the KV caches) is not serialised, so capacity
        # costs no program bytes: 32x the positions (+124 KiB of cache) adds < 4 KiB. The
        # non-zero state (steps = 7, state = 0.25) is still serialised: the runtime tests read
        # it back from a fresh load.
        sizes = {}
        for max_seq in (16, 512):
            sizes[max_seq] = len(
                executorch_trt.export(dm.export_methods(dm.TinyDecoder(max_seq=max_seq))).buffer
            )
        cache_bytes = 2 * 2 * (2 * 8 * 4) * (512 - 16)  # layers x (k, v) x heads*dim*4 B x rows
        self.assertGreater(cache_bytes, 100_000)
        self.assertLess(abs(sizes[512] - sizes[16]), 4096, sizes)

    def test_attention_runs_on_the_gqa_kernel(self):
        # SDPA is kept whole and runs as gqa_attention over the caches themselves: no
        # repeat_kv expand_copy is left. Decode's (one query row) and, since its exported layout
        # is pinned (passes.sdpa_layout), prefill's (several rows) too.
        for method in ("prefill", "decode"):
            ep = self.et.exported_program(method)
            (call,) = lu.delegate_calls(ep.graph_module)
            ops = lu.nested_operator_names(lu.blob_of(ep.graph_module, call))
            self.assertIn("executorch_trt::gqa_attention.out", ops, method)
            self.assertNotIn("aten::expand_copy.out", ops, method)

    def test_linear_kept_whole(self):
        # to_edge would decompose every nn.Linear into permute_copy(weight) + mm (a
        # transpose of every weight on every call); the partitioner keeps aten.linear.
        ep = self.et.exported_program("decode")
        (call,) = lu.delegate_calls(ep.graph_module)
        partition = lu.lowered_module(ep.graph_module, call).original_module
        ops = [schema_name(n) for n in partition.graph.nodes if n.op == "call_function"]
        self.assertEqual(ops.count("aten::linear"), 2 * 7 + 1)  # 7 per block + the head
        self.assertNotIn("aten::mm", ops)

    def test_nested_program_runs_on_xnnpack_but_writes_state_itself(self):
        # The portable engine nests XNNPACK delegates (default); the KV writes stay
        # on the delegate's own kv_cache_update.out, outside XNNPACK (so still in place).
        for method in ("prefill", "decode"):
            ep = self.et.exported_program(method)
            (call,) = lu.delegate_calls(ep.graph_module)
            blob = lu.blob_of(ep.graph_module, call)
            self.assertNotEmpty(lu.nested_delegate_ids(blob), method)
            self.assertEqual(set(lu.nested_delegate_ids(blob)), {"XnnpackBackend"}, method)
            ops = lu.nested_operator_names(blob)
            self.assertEqual(ops.count("executorch_trt::kv_cache_update.out"), 1, method)
            self.assertNotIn("aten::linear.out", ops, method)  # every linear is in XNNPACK
            specs = {
                s.key: bytes(s.value)
                for s in lu.lowered_module(ep.graph_module, call).compile_specs
            }
            self.assertEqual(specs["portable_xnnpack"], b"true")

    def test_portable_xnnpack_off(self):
        et = executorch_trt.export(dm.export_methods(dm.TinyDecoder()), portable_xnnpack=False)
        ep = et.exported_program("decode")
        (call,) = lu.delegate_calls(ep.graph_module)
        blob = lu.blob_of(ep.graph_module, call)
        self.assertEqual(lu.nested_delegate_ids(blob), [])
        self.assertIn("aten::linear.out", lu.nested_operator_names(blob))

    def test_mutable_buffers_shared_and_initialised(self):
        locations = {}
        for method in ("prefill", "decode", "read_state"):
            plan = lu.execution_plan(self.et, method)
            cache_ids = lu.tensor_values_of_shape(plan, list(self.decoder.layers[0].k_cache.shape))
            for i in cache_ids:
                t = plan.values[i].val
                if t.allocation_info is not None and t.allocation_info.memory_id == 2:
                    locations.setdefault(method, []).append(t.allocation_info.memory_offset_low)
                    # All zeros: not serialised, the zero-filled arena is its value.
                    self.assertEqual(t.data_buffer_idx, 0, "zero cache not serialised")
            # The non-zero state (state = 0.25, [1, dim] float32) is serialised.
            (state_id,) = [
                i
                for i in lu.tensor_values_of_shape(plan, [1, 32])
                if plan.values[i].val.allocation_info is not None
                and plan.values[i].val.allocation_info.memory_id == 2
            ]
            self.assertGreater(plan.values[state_id].val.data_buffer_idx, 0, method)
        self.assertLen(locations, 3)
        self.assertEqual(sorted(locations["prefill"]), sorted(locations["decode"]))
        self.assertEqual(sorted(locations["prefill"]), sorted(locations["read_state"]))
        self.assertLen(locations["decode"], 4)

    def test_no_planned_space_without_a_tensor(self):
        # An aliased output's stale spec on the output node once reserved a cache-sized slot
        # in arena 1 that no emitted tensor used (16 MiB of dead memory per method at 4096
        # positions in the benchmark's model).
        for method in ("prefill", "decode", "read_state"):
            plan = lu.execution_plan(self.et, method)
            self.assertLessEqual(
                plan.non_const_buffer_sizes[1], lu.arena_tensor_bytes(plan, 1), method
            )

    def test_no_buffer_frozen_into_delegate(self):
        for method in ("prefill", "decode", "read_state"):
            ep = self.et.exported_program(method)
            (call,) = lu.delegate_calls(ep.graph_module)
            names = [b.name for b in lu.blob_of(ep.graph_module, call).metadata.inputs]
            for fqn in ("m_steps", "m_state", "m_layers_0_k_cache", "m_layers_1_v_cache"):
                self.assertIn(f"b_{fqn}", names, method)


class MultiOutputOps(torch.nn.Module):
    """LayerNorm (``native_layer_norm``: 3 outputs), ``chunk`` (``split_with_sizes_copy``) and
    ``unbind``: each multi-output op is followed by ``getitem`` nodes."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.norm = torch.nn.LayerNorm(8)
        self.proj = torch.nn.Linear(8, 8)
        self.register_buffer("cache", torch.zeros(4, 8))

    def forward(self, x, pos):
        a, b = self.proj(self.norm(x)).chunk(2, dim=-1)
        first, second = torch.cat([a, b], -1).view(2, 1, 8).unbind(0)
        self.cache.index_copy_(0, pos, first + second)
        return self.norm(self.cache)


class Counter(torch.nn.Module):
    """``forward(x[n, 4]) -> x * steps`` with ``steps`` ``[n, 1]`` int64 state, ``+= 1`` per
    call."""

    def __init__(self, shape=(1,)):
        super().__init__()
        self.register_buffer("steps", torch.zeros((*shape, 1), dtype=torch.int64))

    def forward(self, x):
        self.steps.add_(1)
        return x * self.steps


class PartitionerTest(absltest.TestCase):
    def test_multi_output_ops_stay_in_one_partition(self):
        with torch.no_grad():
            ep = torch.export.export(MultiOutputOps(), (torch.randn(2, 8), torch.tensor([1])))
        gm = _lower(ep).exported_program().graph_module
        self.assertLen(lu.delegate_calls(gm), 1)
        self.assertEqual(
            [
                n.target
                for n in gm.graph.nodes
                if n.op == "call_function"
                and n.target is not operator.getitem
                and "delegate" not in str(n.target)
            ],
            [],
            "nothing left outside the delegate",
        )

    def test_mutated_buffers_untagged_weights_tagged(self):
        with torch.no_grad():
            from executorch.exir import to_edge

            edge = to_edge(dm.export_methods(dm.TinyDecoder())["decode"])
        ep = edge.exported_program()
        result = TensorRTPartitioner().partition(ep)
        self.assertLen(result.partition_tags, 1)
        sig = ep.graph_signature
        mutated = set(sig.buffers_to_mutate.values())
        self.assertLen(mutated, 6)
        for node in ep.graph.nodes:
            if node.op != "placeholder":
                continue
            if sig.inputs_to_buffers.get(node.name) in mutated:
                self.assertNotIn("delegation_tag", node.meta, node.name)
            if node.name in sig.inputs_to_parameters:
                self.assertIn("delegation_tag", node.meta, node.name)

    def test_keeps_kv_write_ops(self):
        ops, _ = TensorRTPartitioner().ops_to_not_decompose(dm.export_reordered_kv())
        self.assertIn(torch.ops.aten.index_copy.default, ops)
        self.assertIn(torch.ops.aten.select_scatter.default, ops)

    def test_no_filter_when_every_kept_node_stays_whole(self):
        # A filter sends ExecuTorch through its EDGE_DO_NOT_DECOMP path: two more re-traces
        # of the whole program per method.
        ep = dm.export_methods(dm.TinyDecoder())["decode"]
        ops, keep = TensorRTPartitioner().ops_to_not_decompose(ep)
        self.assertIn(torch.ops.aten.linear.default, ops)
        self.assertIn(torch.ops.aten.scaled_dot_product_attention.default, ops)
        self.assertIsNone(keep)
        with mock.patch.object(
            ExportedProgram,
            "run_decompositions",
            autospec=True,
            side_effect=ExportedProgram.run_decompositions,
        ) as decompose:
            _lower(ep)
        # Functionalisation, then the decompositions with the kept ops left out: no more.
        self.assertEqual(decompose.call_count, 2)

    def test_a_branch_linear_gets_the_filter(self):
        with torch.no_grad():
            ep = torch.export.export(BranchLinear(), (torch.randn(2, 4),))
        ops, keep = TensorRTPartitioner().ops_to_not_decompose(ep)
        self.assertIn(torch.ops.aten.linear.default, ops)
        self.assertIsNotNone(keep)
        top = [n for n in ep.graph.nodes if n.target is torch.ops.aten.linear.default]
        (branch,) = [
            n
            for n in ep.graph_module.true_graph_0.graph.nodes
            if n.target is torch.ops.aten.linear.default
        ]
        self.assertTrue(keep(top[0]))
        self.assertFalse(keep(branch))


class BranchLinear(torch.nn.Module):
    """A linear at the top level and one in a ``torch.cond`` branch."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.a(x)
        return torch.cond(y.sum() > 0, lambda v: self.b(v), lambda v: v * 2, (y,))


class BackendConfigTest(absltest.TestCase):
    def test_one_config_finalises_several_programs(self):
        config = executorch_trt.backend_config()
        for _ in range(2):
            et = _lower(dm.export_reordered_kv()).to_executorch(config)
            plan = lu.execution_plan(et, "forward")
            self.assertEmpty(lu.kernel_calls(plan, "aten::copy_"))
            self.assertLen(plan.non_const_buffer_sizes, 3)

    def test_same_buffer_name_with_different_shapes_is_rejected(self):
        def methods():
            with torch.no_grad():
                return {
                    "a": torch.export.export(Counter((1,)), (torch.ones(1, 4),)),
                    "b": torch.export.export(Counter((2,)), (torch.ones(2, 4),)),
                }

        # The partitioner sees both methods and refuses before lowering.
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'steps' would be shared by methods "
            r"'a' .* and 'b' .*shapes \[1, 1\] vs \[2, 1\]",
        ):
            to_edge_transform_and_lower(
                methods(), partitioner=[TensorRTPartitioner(method_names=["a", "b"])]
            )
        # One partitioner per method: the planner refuses.
        programs = methods()
        edge = to_edge_transform_and_lower(
            programs, partitioner={m: [TensorRTPartitioner()] for m in programs}
        )
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'steps' appears in several methods "
            r"with different shapes/dtypes \(\[1, 1\] torch.int64, "
            r"\[2, 1\] torch.int64\)",
        ):
            edge.to_executorch(executorch_trt.backend_config())


if __name__ == "__main__":
    absltest.main()
