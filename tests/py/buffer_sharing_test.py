"""Sharing mutable buffers across methods (``executorch_trt.lowering.buffer_sharing``).

A buffer FQN mutated in one method and present in another is shared by ExecuTorch
(``share_mutable_buffers``). ``executorch_trt.export`` allows that only for one model's state:
the same tensor in every method (one module instance), or, with ``share_mutable_buffers=True``
given explicitly, equal shape, dtype and initial value. The runtime tests check what the rule
protects: A, B, A on a loaded program, where the second A call sees (or must not see) the row B
wrote.
"""

import copy

import torch
from absl.testing import absltest

import delegate_library
import executorch_trt
from executorch_trt import runtime
from executorch_trt.lowering.buffer_sharing import _storage_range, check_buffer_sharing


class RowWriter(torch.nn.Module):
    """The issue's model: ``forward(x[1, 1, 4], pos[1]) -> cache * 1`` after
    ``cache.index_copy_(1, pos, x)``; ``cache`` is ``[1, 4, 4]`` (zeros unless ``fill``)."""

    def __init__(self, shape=(1, 4, 4), dtype=torch.float32, fill=0.0):
        super().__init__()
        self.register_buffer("cache", torch.full(shape, fill, dtype=dtype))

    def forward(self, x, pos):
        self.cache.index_copy_(1, pos, x.to(self.cache.dtype))
        return self.cache * 1


class SliceRowWriter(RowWriter):
    """``RowWriter`` that writes by item assignment on a view (``index_put_`` on
    ``select(cache, 0, 0)``)."""

    def forward(self, x, pos):
        self.cache[0, pos] = x[0]
        return self.cache * 1


class CacheReader(torch.nn.Module):
    """Reads a buffer named ``cache`` without writing it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 4, 4))

    def forward(self, x, pos):
        return self.cache * 1 + x.sum()


class TableReader(torch.nn.Module):
    """Reads (never writes) a buffer named ``table`` whose value differs per instance."""

    def __init__(self, value):
        super().__init__()
        self.register_buffer("table", torch.full((1, 4), value))

    def forward(self, x):
        return x * self.table


class Wrapper(torch.nn.Module):
    """An export wrapper that holds ``model`` under attribute ``attr`` (so its buffers' FQNs
    are ``<attr>.<name>``) and calls it."""

    def __init__(self, model, attr):
        super().__init__()
        setattr(self, attr, model)
        self._attr = attr

    def forward(self, *args):
        return getattr(self, self._attr)(*args)


class CacheWrapperReader(Wrapper):
    """A wrapper that only reads its model's ``cache``."""

    def forward(self, x, pos):
        return getattr(self, self._attr).cache * 1 + x.sum()


class SplitKV(torch.nn.Module):
    """Buffers ``k`` and ``v`` are disjoint views of one storage (``big[0]``, ``big[1]``)."""

    def __init__(self):
        super().__init__()
        big = torch.zeros(2, 1, 4, 4)
        self.register_buffer("k", big[0])
        self.register_buffer("v", big[1])

    def forward(self, x, pos):
        self.k.index_copy_(1, pos, x)
        self.v.index_copy_(1, pos, 2 * x)
        return self.k + self.v


def _args(dtype=torch.float32):
    return torch.ones(1, 1, 4, dtype=dtype), torch.tensor([1])


def _export(module, args=None):
    with torch.no_grad():
        return torch.export.export(module, args or _args())


class SharingRuleTest(absltest.TestCase):
    def test_two_modules_with_the_same_buffer_name_raise(self):
        # The example: two different modules, zero [1, 4, 4] caches, index_copy_.
        programs = {"a": _export(RowWriter()), "b": _export(RowWriter())}
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'cache' would be shared by methods 'a' \(which writes it\) and 'b' "
            r"\(which writes it\).*same shape \[1, 4, 4\], dtype torch\.float32 and initial "
            r"value but are different tensors \(exported from different module instances\)"
            r".*export both methods from one module instance.*share_mutable_buffers=True.*"
            r"rename the buffer in one of the modules.*separate programs",
        ):
            executorch_trt.export(programs)

    def test_every_lowering_path_raises(self):
        # One partitioner per method, or to_edge + to_backend: no partitioner sees both
        # methods, so the check runs again when the program is emitted.
        from executorch.exir import to_edge, to_edge_transform_and_lower

        from executorch_trt.lowering.partitioner import TensorRTPartitioner

        lowerings = {
            "one partitioner per method": lambda programs: to_edge_transform_and_lower(
                programs, partitioner={m: [TensorRTPartitioner()] for m in programs}
            ),
            "to_edge + to_backend": lambda programs: to_edge(programs).to_backend(
                TensorRTPartitioner()
            ),
        }
        for name, lower in lowerings.items():
            with self.subTest(path=name):
                edge = lower({"a": _export(RowWriter()), "b": _export(RowWriter())})
                with self.assertRaisesRegex(
                    ValueError,
                    r"buffer 'cache' would be shared by "
                    r"methods 'a' .* and 'b'",
                ):
                    edge.to_executorch(executorch_trt.backend_config())
        # One instance: shared as it should be.
        module = RowWriter()
        edge = lowerings["one partitioner per method"]({"a": _export(module), "b": _export(module)})
        edge.to_executorch(executorch_trt.backend_config())

    def test_shapes_differ_raise_even_when_sharing_is_explicit(self):
        programs = {"a": _export(RowWriter()), "c": _export(RowWriter(shape=(1, 8, 4)))}
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'cache'.*'a'.*'c'.*differ \(shapes "
            r"\[1, 4, 4\] vs \[1, 8, 4\]\).*rename",
        ) as cm:
            executorch_trt.export(programs, share_mutable_buffers=True)
        self.assertNotIn(
            "share_mutable_buffers=True",
            str(cm.exception),
            "sharing differently shaped buffers must not be offered",
        )

    def test_dtypes_differ_raise(self):
        programs = {
            "a": _export(RowWriter()),
            "h": _export(RowWriter(dtype=torch.float16), _args(torch.float16)),
        }
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'cache'.*'a'.*'h'.*dtypes "
            r"torch\.float32 vs torch\.float16",
        ):
            executorch_trt.export(programs, share_mutable_buffers=True)

    def test_initial_values_differ_raise_even_when_sharing_is_explicit(self):
        programs = {"a": _export(RowWriter()), "d": _export(RowWriter(fill=1.0))}
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'cache'.*'a'.*'d'.*initial values "
            r"differ at index \[0, 0, 0\]: 0\.0 vs 1\.0",
        ):
            executorch_trt.export(programs, share_mutable_buffers=True)

    def test_reader_from_another_module_raises(self):
        programs = {"write": _export(RowWriter()), "read": _export(CacheReader())}
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'cache' would be shared by methods "
            r"'write' \(which writes it\) and 'read' \(which "
            r"reads it\)",
        ):
            executorch_trt.export(programs)

    def test_write_through_a_view_counts(self):
        # torch.export leaves graph_signature.buffers_to_mutate empty here (index_put_ on a
        # select view of the buffer): the write must still be found.
        programs = {"a": _export(SliceRowWriter()), "b": _export(SliceRowWriter())}
        self.assertEqual(dict(programs["a"].graph_signature.buffers_to_mutate), {})
        with self.assertRaisesRegex(ValueError, r"buffer 'cache'.*'a'.*'b'"):
            check_buffer_sharing(programs)

    def test_buffers_no_method_writes_are_not_shared_state(self):
        programs = {
            "one": _export(TableReader(1.0), (torch.ones(1, 4),)),
            "two": _export(TableReader(2.0), (torch.ones(1, 4),)),
        }
        self.assertEqual(check_buffer_sharing(programs), [])
        executorch_trt.export(programs)

    def test_same_module_instance_is_shared(self):
        model = RowWriter()
        programs = {"prefill": _export(model), "decode": _export(model)}
        (shared,) = check_buffer_sharing(programs)
        self.assertEqual(
            (shared.fqn, shared.methods, shared.writers),
            ("cache", ("prefill", "decode"), ("prefill", "decode")),
        )

    def test_deep_copied_module_is_another_instance(self):
        model = RowWriter()
        programs = {"a": _export(model), "b": _export(copy.deepcopy(model))}
        with self.assertRaisesRegex(ValueError, "different module instances"):
            check_buffer_sharing(programs)
        self.assertLen(check_buffer_sharing(programs, share_by_name=True), 1)

    def test_a_sparse_buffer_with_several_methods_is_refused(self):
        # A sparse tensor has no storage to compare (untyped_storage() raises), so one held
        # under two names could not be found: refused, not let through.
        class SparseReader(torch.nn.Module):
            def __init__(self, table):
                super().__init__()
                self.register_buffer("table", table)

            def forward(self, x, pos):
                return x + self.table.to_dense()

        table = torch.ones(1, 1, 4).to_sparse()
        programs = {"a": _export(SparseReader(table)), "b": _export(RowWriter())}
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'table' of method 'a' is a torch\.sparse_coo tensor; with several "
            r"methods every buffer must be dense.*tensor\.to_dense\(\)",
        ):
            check_buffer_sharing(programs)
        self.assertEqual(check_buffer_sharing({"a": programs["a"]}), [])

    def test_one_model_under_two_wrapper_attribute_names_raises(self):
        # Prefill's wrapper holds the model as self.model, decode's as self.m: one cache tensor
        # under FQNs 'model.cache' and 'm.cache', which ExecuTorch would keep as two buffers.
        model = RowWriter()
        programs = {
            "prefill": _export(Wrapper(model, "model")),
            "decode": _export(Wrapper(model, "m")),
        }
        pattern = (
            r"methods 'prefill' and 'decode' hold the same tensor under different names: "
            r"buffer 'model\.cache' in 'prefill' \(which writes it\) and 'm\.cache' in "
            r"'decode' \(which writes it\).*by name only.*two separate buffers.*same "
            r"attribute name for the model \(e\.g\. both `self\.model`\).*'model' and "
            r"'m'"
        )
        with self.assertRaisesRegex(ValueError, pattern):
            check_buffer_sharing(programs)
        for explicit in (None, True):  # sharing by name cannot join two names
            with self.assertRaisesRegex(ValueError, pattern):
                executorch_trt.export(programs, share_mutable_buffers=explicit)

    def test_one_model_under_two_names_read_by_one_method_raises(self):
        model = RowWriter()
        programs = {
            "write": _export(Wrapper(model, "model")),
            "read": _export(CacheWrapperReader(model, "reader")),
        }
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'model\.cache' in 'write' \(which "
            r"writes it\) and 'reader\.cache' in "
            r"'read' \(which reads it\)",
        ):
            check_buffer_sharing(programs)

    def test_one_model_under_two_names_never_written_is_constant(self):
        model = TableReader(3.0)
        programs = {
            "one": _export(Wrapper(model, "model"), (torch.ones(1, 4),)),
            "two": _export(Wrapper(model, "m"), (torch.ones(1, 4),)),
        }
        self.assertEqual(check_buffer_sharing(programs), [])

    def test_disjoint_views_of_one_storage_are_separate_buffers(self):
        # k and v share a storage but not memory: different names are right for them.
        model = SplitKV()
        args = (torch.ones(1, 1, 4), torch.tensor([1]))
        programs = {"prefill": _export(model, args), "decode": _export(model, args)}
        self.assertEqual([s.fqn for s in check_buffer_sharing(programs)], ["k", "v"])

    def test_not_checked_when_buffers_are_not_shared(self):
        programs = {"a": _export(RowWriter()), "c": _export(RowWriter(shape=(1, 8, 4)))}
        executorch_trt.export(programs, share_mutable_buffers=False)


_UNSHARED_READER = (
    r"method 'read' reads buffer 'model\.cache', which method 'write' updates, but the methods "
    r"do not share mutable buffers \({}\): 'read' would read the buffer's exported value on "
    r"every call, never the update, and binding the buffer would not reach it\. Export with "
    r"share_mutable_buffers and alloc_mutable_buffers left at their defaults .* or export "
    r"'read' as a separate program"
)


def _writer_and_reader():
    """Two methods of one model: ``write`` updates ``model.cache``, ``read`` only reads it."""
    model = RowWriter()
    return {
        "write": _export(Wrapper(model, "model")),
        "read": _export(CacheWrapperReader(model, "model")),
    }


class UnsharedReaderTest(absltest.TestCase):
    """Unshared, a buffer that one method writes is a constant of a method that only reads it:
    refused on the paths that see every method; shared (the default), the reader sees the
    write."""

    def test_share_mutable_buffers_false_raises(self):
        with self.assertRaisesRegex(
            ValueError, _UNSHARED_READER.format("share_mutable_buffers=False")
        ):
            executorch_trt.export(_writer_and_reader(), share_mutable_buffers=False)

    def test_caller_allocated_buffers_raise(self):
        with self.assertRaisesRegex(
            ValueError, _UNSHARED_READER.format(r"alloc_mutable_buffers=False: .*unplanned buffers")
        ):
            executorch_trt.export(_writer_and_reader(), alloc_mutable_buffers=False)

    def test_composable_path_raises(self):
        from executorch.exir import to_edge_transform_and_lower

        with self.assertRaisesRegex(
            ValueError, _UNSHARED_READER.format("share_mutable_buffers=False")
        ):
            to_edge_transform_and_lower(
                _writer_and_reader(),
                partitioner=[executorch_trt.TensorRTPartitioner(method_names=["write", "read"])],
            ).to_executorch(executorch_trt.backend_config(share_mutable_buffers=False))

    def test_shared_by_default_the_reader_sees_the_write(self):
        delegate_library.require()
        program = runtime.load(executorch_trt.export(_writer_and_reader()).buffer)
        write, read = program.load_method("write"), program.load_method("read")
        write.execute([torch.full((1, 1, 4), 5.0), torch.tensor([2])])
        (out,) = read.execute([torch.zeros(1, 1, 4), torch.tensor([0])])
        want = torch.zeros(1, 4, 4)
        want[0, 2] = 5.0
        torch.testing.assert_close(out, want)


class FrozenReaderTest(absltest.TestCase):
    """``TensorRTPartitioner(freeze_buffers=True)`` sees one method at a time: a buffer that
    one method only reads but another writes, frozen into the reader's delegate, is refused
    when the program is emitted, on both composable paths; a buffer no method writes may be
    frozen."""

    _FROZEN = (
        r"buffer 'model\.cache', which method 'write' updates, was frozen into method 'read''s "
        r"delegate \(TensorRTPartitioner\(freeze_buffers=True\)\): 'read' would read the "
        r"buffer's exported value on every call, never the update.*Leave freeze_buffers=False"
    )

    def _partitioner(self):
        return executorch_trt.TensorRTPartitioner(
            freeze_buffers=True, method_names=["write", "read"]
        )

    def test_to_edge_transform_and_lower_raises(self):
        from executorch.exir import to_edge_transform_and_lower

        edge = to_edge_transform_and_lower(_writer_and_reader(), partitioner=[self._partitioner()])
        with self.assertRaisesRegex(ValueError, self._FROZEN):
            edge.to_executorch(executorch_trt.backend_config())

    def test_to_edge_and_to_backend_raises(self):
        from executorch.exir import to_edge

        edge = to_edge(_writer_and_reader()).to_backend(self._partitioner())
        with self.assertRaisesRegex(ValueError, self._FROZEN):
            edge.to_executorch(executorch_trt.backend_config())

    def test_a_buffer_no_method_writes_is_frozen(self):
        from executorch.exir import to_edge_transform_and_lower

        delegate_library.require()
        programs = {"a": _export(TableReader(2.0), (torch.ones(1, 4),))}
        programs["b"] = _export(TableReader(2.0), (torch.ones(1, 4),))
        edge = to_edge_transform_and_lower(programs, partitioner=[self._partitioner()])
        for name in programs:
            self.assertEqual(edge.exported_program(name).graph_signature.inputs_to_buffers, {})
        program = runtime.load(edge.to_executorch(executorch_trt.backend_config()).buffer)
        for name in programs:
            (out,) = program.load_method(name).execute([torch.ones(1, 4)])
            torch.testing.assert_close(out, torch.full((1, 4), 2.0))


class TransformersWrapperSharingTest(absltest.TestCase):
    """transformers' static-cache export wrapper keeps its caches as non-persistent buffers
    (``ep.constants``): exporting twice from one wrapper shares them; two wrappers of one
    model hold two sets of caches."""

    @classmethod
    def setUpClass(cls):
        import transformers
        from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

        torch.manual_seed(0)
        config = transformers.LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32,
        )
        model = transformers.LlamaForCausalLM(config).eval()
        model.generation_config.use_cache = True
        model.generation_config.cache_implementation = "static"

        def wrapper():
            return TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=16)

        one = wrapper()
        with torch.no_grad():
            cls.prefill = one.export(
                input_ids=torch.zeros(1, 3, dtype=torch.long), cache_position=torch.arange(3)
            )
            cls.decode = one.export(
                input_ids=torch.zeros(1, 1, dtype=torch.long), cache_position=torch.tensor([3])
            )
            cls.other_decode = wrapper().export(
                input_ids=torch.zeros(1, 1, dtype=torch.long), cache_position=torch.tensor([3])
            )

    def test_one_wrapper_exported_twice_shares_its_caches(self):
        self.assertIn("key_cache_0", self.decode.constants)
        shared = check_buffer_sharing({"prefill": self.prefill, "decode": self.decode})
        self.assertContainsSubset({"key_cache_0", "value_cache_0"}, {s.fqn for s in shared})

    def test_two_wrappers_are_two_instances(self):
        with self.assertRaisesRegex(
            ValueError,
            r"buffer '\w+' would be shared by methods "
            r"'prefill'.*'decode'.*different module "
            r"instances",
        ):
            check_buffer_sharing({"prefill": self.prefill, "decode": self.other_decode})


def _run(program_bytes, calls):
    """Loads ``program_bytes`` and runs ``[(method, x, pos), ...]``; returns the outputs."""
    program = runtime.load(program_bytes)
    methods = {}
    outputs = []
    for name, x, pos in calls:
        method = methods.setdefault(name, program.load_method(name))
        (out,) = method.execute([x, torch.tensor([pos])])
        outputs.append(out.clone())
    return outputs


_A_B_A = [
    ("a", torch.full((1, 1, 4), 1.0), 0),
    ("b", torch.full((1, 1, 4), 2.0), 1),
    ("a", torch.full((1, 1, 4), 3.0), 2),
]


@delegate_library.needs_library
class SharingRuntimeTest(absltest.TestCase):
    """A, B, A on a loaded program: the third call shows whether A sees B's row."""

    def _assert_rows(self, cache, rows):
        want = torch.zeros(1, 4, 4)
        for row, value in rows.items():
            want[0, row] = value
        torch.testing.assert_close(cache, want)

    def test_explicit_opt_in_shares_by_name(self):
        programs = {"a": _export(RowWriter()), "b": _export(RowWriter())}
        program = executorch_trt.export(programs, share_mutable_buffers=True).buffer
        first, second, third = _run(program, _A_B_A)
        self._assert_rows(first, {0: 1.0})
        self._assert_rows(second, {0: 1.0, 1: 2.0})
        self._assert_rows(third, {0: 1.0, 1: 2.0, 2: 3.0})  # A sees the row B wrote

    def test_one_module_instance_shares_by_default(self):
        model = RowWriter()
        program = executorch_trt.export({"a": _export(model), "b": _export(model)}).buffer
        third = _run(program, _A_B_A)[2]
        self._assert_rows(third, {0: 1.0, 1: 2.0, 2: 3.0})

    def test_wrappers_with_the_same_attribute_name_share(self):
        # The fix the different-names error gives: both wrappers hold the model as self.model.
        model = RowWriter()
        programs = {"a": _export(Wrapper(model, "model")), "b": _export(Wrapper(model, "model"))}
        third = _run(executorch_trt.export(programs).buffer, _A_B_A)[2]
        self._assert_rows(third, {0: 1.0, 1: 2.0, 2: 3.0})

    def test_separate_programs_keep_the_modules_apart(self):
        # The fix the error suggests for different models: one program each.
        a = executorch_trt.export(_export(RowWriter())).buffer
        b = executorch_trt.export(_export(RowWriter())).buffer
        program_a = runtime.load(a).load_method("forward")
        program_b = runtime.load(b).load_method("forward")
        program_a.execute([torch.full((1, 1, 4), 1.0), torch.tensor([0])])
        program_b.execute([torch.full((1, 1, 4), 2.0), torch.tensor([1])])
        (third,) = program_a.execute([torch.full((1, 1, 4), 3.0), torch.tensor([2])])
        self._assert_rows(third, {0: 1.0, 2: 3.0})

    def test_unshared_read_only_buffers_keep_their_own_values(self):
        programs = {
            "one": _export(TableReader(1.0), (torch.ones(1, 4),)),
            "two": _export(TableReader(2.0), (torch.ones(1, 4),)),
        }
        program = runtime.load(executorch_trt.export(programs).buffer)
        (one,) = program.load_method("one").execute([torch.ones(1, 4)])
        (two,) = program.load_method("two").execute([torch.ones(1, 4)])
        torch.testing.assert_close(one, torch.full((1, 4), 1.0))
        torch.testing.assert_close(two, torch.full((1, 4), 2.0))


class StorageRangeTest(absltest.TestCase):
    """The bytes a buffer covers, which decide whether two buffers are one tensor."""

    def test_a_strided_view_covers_its_first_to_last_element(self):
        base = torch.arange(6.0).view(2, 3)
        view = base[:, 1]  # elements 1 and 4 of the storage
        key, start, end = _storage_range(view)
        self.assertEqual((start, end), (4, 20))
        self.assertEqual(_storage_range(base[1]), (key, 12, 24))  # same storage, same key
        clone_key, *clone_bytes = _storage_range(view.clone())
        self.assertNotEqual(clone_key, key)
        self.assertEqual(clone_bytes, [0, 8])

    def test_tensors_without_comparable_storage_have_no_range(self):
        # Empty and meta tensors hold no bytes. None means "not the same tensor as anything".
        for t in (torch.zeros(0), torch.zeros(2, device="meta")):
            with self.subTest(layout=str(t.layout), device=str(t.device), numel=t.numel()):
                self.assertIsNone(_storage_range(t))


if __name__ == "__main__":
    absltest.main()
