"""Public API behaviour: options, errors, the custom op, the KV pass on both write forms, and
the binding-order assertion."""

import copy

import torch
from absl.testing import absltest
from executorch.exir import to_edge

import decoder_models as dm
import executorch_trt
import lowering_utils as lu
from executorch_trt import TensorRTPartitioner
from executorch_trt.backend.bindings import binding_contract
from executorch_trt.ops.kv_cache_update import kv_cache_update, kv_cache_update_out


class OptionsTest(absltest.TestCase):
    def test_unknown_options_type_error(self):
        ep = dm.export_reordered_kv()
        with self.assertRaisesRegex(TypeError, "unknown option.*bogus.*colour"):
            executorch_trt.export(ep, bogus=1, colour="red")
        with self.assertRaisesRegex(TypeError, "unknown option.*bogus"):
            executorch_trt.backend_config(bogus=True)

    def test_unknown_values_value_error(self):
        ep = dm.export_reordered_kv()
        with self.assertRaisesRegex(ValueError, "unknown engine 'cuda'"):
            executorch_trt.export(ep, engine="cuda")
        with self.assertRaisesRegex(ValueError, "unknown kv_cache mode 'sometimes'"):
            executorch_trt.export(ep, kv_cache="sometimes")
        with self.assertRaisesRegex(ValueError, "unknown kv_cache mode"):
            TensorRTPartitioner(kv_cache="x")

    def test_inconsistent_buffer_options(self):
        with self.assertRaisesRegex(ValueError, "needs emit_mutable_buffer_names"):
            executorch_trt.backend_config(
                alloc_mutable_buffers=False, emit_mutable_buffer_names=False
            )
        with self.assertRaisesRegex(ValueError, "needs alloc_mutable_buffers"):
            executorch_trt.backend_config(
                alloc_mutable_buffers=False,
                share_mutable_buffers=True,
                emit_mutable_buffer_names=True,
            )

    def test_buffer_names_are_emitted_by_default(self):
        self.assertTrue(executorch_trt.backend_config().emit_mutable_buffer_names)
        self.assertFalse(
            executorch_trt.backend_config(emit_mutable_buffer_names=False).emit_mutable_buffer_names
        )

    def test_backend_config_fields(self):
        cfg = executorch_trt.backend_config(emit_mutable_buffer_names=True)
        self.assertTrue(cfg.emit_mutable_buffer_names)
        self.assertTrue(cfg.memory_planning_pass.share_mutable_buffers)
        self.assertTrue(cfg.memory_planning_pass.alloc_mutable_buffers)
        cfg = executorch_trt.backend_config(
            alloc_mutable_buffers=False, emit_mutable_buffer_names=True
        )
        self.assertFalse(cfg.memory_planning_pass.share_mutable_buffers)

    def test_unplanned_buffers_export(self):
        et = executorch_trt.export(
            dm.export_reordered_kv(), alloc_mutable_buffers=False, emit_mutable_buffer_names=True
        )
        plan = lu.execution_plan(et)
        (cache,) = lu.tensor_values_of_shape(plan, [1, 6, 4])
        info = plan.values[cache].val
        self.assertIsNone(info.allocation_info)
        self.assertEqual(info.extra_tensor_info.fully_qualified_name, "k_cache")

    def test_public_names(self):
        for name in ("export", "backend_config", "TensorRTPartitioner", "TensorRTBackend"):
            self.assertTrue(hasattr(executorch_trt, name), name)
        self.assertEqual(executorch_trt.runtime.LIBRARY_ENV, "EXECUTORCH_TRT_LIBRARY")

    def test_tensorrt_engine_unavailable(self):
        with self.assertRaisesRegex(RuntimeError, "TensorRT.*not available.*engine='portable'"):
            executorch_trt.export(dm.export_reordered_kv(), engine="tensorrt")


class ArgumentErrorsTest(absltest.TestCase):
    """Wrong arguments fail with TypeError/ValueError naming what was given and what is
    expected, not with an AttributeError from deep inside the lowering."""

    def test_module_instead_of_exported_program(self):
        with self.assertRaisesRegex(
            TypeError,
            r"got torch\.nn\.modules\.module\.Module; expected a "
            r"torch\.export\.ExportedProgram or a dict of method name -> "
            r"ExportedProgram.*torch\.export\.export\(module, example_inputs\)",
        ):
            executorch_trt.export(torch.nn.Module())

    def test_list_and_none(self):
        ep = dm.export_reordered_kv()
        with self.assertRaisesRegex(TypeError, r"got list; expected .*pass a dict"):
            executorch_trt.export([ep])
        with self.assertRaisesRegex(
            TypeError, r"got None; expected a torch\.export\.ExportedProgram"
        ):
            executorch_trt.export(None)

    def test_bad_dict_entries(self):
        ep = dm.export_reordered_kv()
        with self.assertRaisesRegex(ValueError, "empty dict, so there are no methods"):
            executorch_trt.export({})
        with self.assertRaisesRegex(
            TypeError, "method 'decode' is a .*Linear, not an ExportedProgram.*torch.export.export"
        ):
            executorch_trt.export({"forward": ep, "decode": torch.nn.Linear(2, 2)})
        with self.assertRaisesRegex(TypeError, "method names must be non-empty str, got int 0"):
            executorch_trt.export({0: ep})

    def test_boolean_options_accept_only_bools(self):
        ep = dm.export_reordered_kv()
        for name in (
            "inplace",
            "alloc_mutable_buffers",
            "emit_mutable_buffer_names",
            "require_inplace",
            "portable_xnnpack",
        ):
            for value in ("no", 0, 1, None):
                with self.subTest(option=name, value=value):
                    with self.assertRaisesRegex(
                        TypeError,
                        f"option {name} must be True or False, got "
                        f"{type(value).__name__} {value!r}",
                    ):
                        executorch_trt.export(ep, **{name: value})
                    with self.assertRaisesRegex(TypeError, f"option {name} must be True or False"):
                        executorch_trt.backend_config(**{name: value})
        for name in ("share_mutable_buffers", "init_mutable_buffers"):
            with self.assertRaisesRegex(
                TypeError, f"{name} must be True, False or None, got str 'yes'"
            ):
                executorch_trt.export(ep, **{name: "yes"})
        with self.assertRaisesRegex(TypeError, "freeze_buffers must be True or False"):
            TensorRTPartitioner(freeze_buffers="no")
        with self.assertRaisesRegex(TypeError, "option portable_xnnpack must be True or False"):
            TensorRTPartitioner(portable_xnnpack="no")
        # Real bools and None (where allowed) are still accepted.
        executorch_trt.backend_config(
            inplace=False, share_mutable_buffers=None, init_mutable_buffers=None
        )

    def test_string_options_accept_only_str(self):
        ep = dm.export_reordered_kv()
        with self.assertRaisesRegex(TypeError, "option engine must be a str, got NoneType None"):
            executorch_trt.export(ep, engine=None)
        with self.assertRaisesRegex(TypeError, r"option kv_cache must be a str, got list"):
            executorch_trt.export(ep, kv_cache=["inplace"])
        with self.assertRaisesRegex(TypeError, "option engine must be a str"):
            TensorRTPartitioner(engine=1)

    def test_dynamic_shapes_message_says_what_to_do(self):
        class Affine(torch.nn.Module):
            def forward(self, x):
                return x * 2 + 1

        ep = torch.export.export(
            Affine(), (torch.randn(4, 8),), dynamic_shapes={"x": {0: torch.export.Dim("batch")}}
        )
        with self.assertRaisesRegex(
            ValueError,
            r"method 'forward': input 'x' dimension 0 .* "
            r"without a finite upper bound.*Dim with a finite "
            r"max \(e\.g\. Dim\('T', min=1, max=128\)\)",
        ):
            executorch_trt.export(ep)

    def test_transposed_example_input_message_says_what_to_do(self):
        class Affine(torch.nn.Module):
            def forward(self, x):
                return x * 2 + 1

        ep = torch.export.export(Affine(), (torch.randn(3, 4).t(),))
        with self.assertRaisesRegex(
            ValueError,
            r"binding 'x' is not contiguous \(strides \[1, 4\].*"
            r"an example input by passing x\.contiguous\(\) to torch\.export\.export",
        ):
            executorch_trt.export(ep)


class RuntimeLoadArgumentsTest(absltest.TestCase):
    """``runtime.load`` checks its argument before it needs the delegate library."""

    def test_missing_path(self):
        import pathlib

        for path in ("nope.pte", pathlib.Path("/nonexistent/dir/model.pte")):
            with (
                self.subTest(path=path),
                self.assertRaisesRegex(FileNotFoundError, f"no such .pte file: '{path}'"),
            ):
                executorch_trt.runtime.load(path)

    def test_directory_and_wrong_type(self):
        with self.assertRaisesRegex(IsADirectoryError, "expected a .pte file, got a directory"):
            executorch_trt.runtime.load(self.create_tempdir().full_path)
        with self.assertRaisesRegex(
            TypeError, "expected a path .*, the bytes of a .pte or a binary file object, got int"
        ):
            executorch_trt.runtime.load(3)


class KVCacheUpdateOpTest(absltest.TestCase):
    def test_index_copy_semantics(self):
        cache = torch.arange(24, dtype=torch.float32).view(2, 3, 4)
        value = -torch.ones(2, 2, 4)
        idx = torch.tensor([2, 0])
        out = kv_cache_update(cache, value, idx, 1)
        torch.testing.assert_close(out, cache.index_copy(1, idx, value))
        self.assertEqual(cache[0, 0, 0].item(), 0.0, "functional: cache untouched")

    def test_out_variant_in_place(self):
        cache = torch.zeros(1, 4, 2)
        result = kv_cache_update_out(cache, torch.ones(1, 1, 2), torch.tensor([3]), 1, out=cache)
        self.assertIs(result, cache)
        self.assertEqual(cache.sum().item(), 2.0)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "indices must be 1-D int64"):
            kv_cache_update(
                torch.zeros(4, 2), torch.zeros(1, 2), torch.tensor([1], dtype=torch.int32), 0
            )
        with self.assertRaisesRegex(ValueError, "len\\(indices\\)=2"):
            kv_cache_update(torch.zeros(4, 2), torch.zeros(1, 2), torch.tensor([1, 2]), 0)
        with self.assertRaisesRegex(ValueError, "does not match cache size"):
            kv_cache_update(torch.zeros(4, 2), torch.zeros(1, 3), torch.tensor([1]), 0)


class _DecomposingPartitioner(TensorRTPartitioner):
    """Lets edge lowering decompose index_copy into index_put."""

    def ops_to_not_decompose(self, ep):
        return ([], None)


class KVPassTest(absltest.TestCase):
    def test_index_put_form_is_aliased_too(self):
        gm, call = lu.lower_single_delegate(dm.export_reordered_kv(), _DecomposingPartitioner())
        lowered = lu.lowered_module(gm, call)
        self.assertIn("index_put", str(lowered.original_module.graph))
        blob = lu.blob_of(gm, call)
        self.assertLen(blob.metadata.aliased_io, 1)
        self.assertIn("executorch_trt::kv_cache_update.out", lu.nested_operator_names(blob))

    def test_cache_with_other_reader_not_aliased(self):
        class ReadsOldCache(dm.CacheModule):
            SHAPE = (4, 2)

            def forward(self, idx, v):
                old = self.cache.sum()
                self.cache.index_copy_(0, idx, v)
                return self.cache.sum() - old

        ep = torch.export.export(ReadsOldCache(), (torch.tensor([1]), torch.ones(1, 2)))
        gm, call = lu.lower_single_delegate(ep)
        self.assertEqual(lu.blob_of(gm, call).metadata.aliased_io, ())


class SharedInputTest(absltest.TestCase):
    def test_cache_read_outside_partition_not_aliased(self):
        gm, call = lu.lower_single_delegate(dm.export_cache_read_outside())
        specs = {s.key: bytes(s.value) for s in lu.lowered_module(gm, call).compile_specs}
        self.assertEqual(specs["shared_inputs"], b'["b_cache"]')
        self.assertEqual(lu.blob_of(gm, call).metadata.aliased_io, ())


class BindingOrderAssertionTest(absltest.TestCase):
    def test_mutation_output_raises(self):
        # A program whose buffer mutation is an output of the partition itself: its outputs
        # would be reordered by arrange_graph_outputs, so preprocess refuses it.
        with torch.no_grad():
            ep = to_edge(dm.export_reordered_kv()).exported_program()
        with self.assertRaisesRegex(ValueError, "partition has mutation outputs"):
            binding_contract(ep)

    def test_signature_graph_disagreement_raises(self):
        class TwoInputs(torch.nn.Module):
            def forward(self, a, b):
                return a * 2 + b

        with torch.no_grad():
            ep = to_edge(
                torch.export.export(TwoInputs(), (torch.ones(2), torch.ones(2)))
            ).exported_program()
        self.assertEqual([b.name for b in binding_contract(ep).inputs], ["a", "b"])
        bad = copy.deepcopy(ep)
        specs = bad.graph_signature.input_specs
        users = [i for i, s in enumerate(specs) if s.kind.name == "USER_INPUT"]
        a, b = users
        specs[a], specs[b] = specs[b], specs[a]
        with self.assertRaisesRegex(ValueError, "delegate input order mismatch"):
            binding_contract(bad)


if __name__ == "__main__":
    absltest.main()
