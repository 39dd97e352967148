"""``executorch_trt.export`` is ExecuTorch's composable path with the delegate's pieces.

For each kind of model the other tests export (a decoder's prefill/decode/read-back methods,
a dynamic-length prefill, a transformers Llama as one dynamic ``forward``, cross-attention
caches under ``torch.cond``, grouped-query attention, sibling conds, non-KV state with a buffer
assigned another buffer), the program from::

    to_edge_transform_and_lower(programs, transform_passes=executorch_trt.transform_passes(),
                                partitioner=[TensorRTPartitioner()],
                                compile_config=executorch_trt.edge_compile_config()
                                ).to_executorch(executorch_trt.backend_config())

is byte for byte the ``.pte`` ``executorch_trt.export(programs)`` writes, and runs like eager
PyTorch over several calls; with ExecuTorch's default ``compile_config`` it is the same
program too. Without ``transform_passes`` the composable path refuses what
would be wrong (a buffer assigned another buffer), and otherwise gives the same numbers with
the zero-valued caches serialised.
"""

import copy

import torch
from absl.testing import absltest, parameterized
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

import cross_attn_cache_test as cross_attn
import decoder_models as dm
import delegate_library
import executorch_trt
import gqa_attention_test as gqa
import hf_models as H
import sibling_conds_test as sibling
import write_forms_test as write_forms
from executorch_trt import runtime
from executorch_trt.lowering.partitioner import TensorRTPartitioner


def _export(module, *args, **kwargs):
    with torch.no_grad():
        return torch.export.export(module, args, **kwargs)


def _decoder(export_methods, prompt):
    decoder = dm.TinyDecoder()
    eager = {
        "prefill": dm.Step(decoder),
        "decode": dm.Step(decoder),
        "read_state": dm.ReadState(decoder),
    }
    calls = [
        ("prefill", (torch.tensor([list(range(1, prompt + 1))]), torch.arange(prompt))),
        ("decode", (torch.tensor([[9]]), torch.tensor([prompt]))),
        ("decode", (torch.tensor([[11]]), torch.tensor([prompt + 1]))),
        ("read_state", (torch.ones(1),)),
    ]
    return export_methods(decoder), calls, eager


def _llama_single_forward():
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    model = H.FAMILIES["llama"].model()
    wrapper = TorchExportableModuleForDecoderOnlyLM(
        model, batch_size=1, max_cache_len=H.MAX_CACHE_LEN
    )
    length = torch.export.Dim("T", min=1, max=H.MAX_CACHE_LEN - 1)
    with torch.no_grad():
        ep = wrapper.export(
            input_ids=torch.ones(1, H.PROMPT_LEN, dtype=torch.long),
            cache_position=torch.arange(H.PROMPT_LEN),
            dynamic_shapes={"input_ids": {1: length}, "cache_position": {0: length}},
            strict=True,
        )
    steps = H.DecoderOnlyEager(model)
    calls = [
        ("forward", (torch.tensor([[5, 6, 7]]), torch.arange(3))),
        ("forward", (torch.tensor([[8]]), torch.tensor([3]))),
        ("forward", (torch.tensor([[9]]), torch.tensor([4]))),
    ]
    return ep, calls, {"forward": lambda ids, pos: steps.step("forward", ids, pos)}


def _cross_attn():
    # Eager cannot run executorch::alias (it returns its input); the test's reference can.
    model, xs = cross_attn.TwoLayers(), cross_attn._inputs()
    want = iter(cross_attn.reference(model, xs))
    return (
        _export(model, xs[0]),
        [("forward", (x,)) for x in xs],
        {"forward": lambda x: tuple(next(want))},
    )


def _single(module, calls):
    return _export(module, *calls[0][1]), calls, {"forward": copy.deepcopy(module)}


#: name -> () -> (programs, [(method, args)] calls in order, {method: eager callable}); the
#: eager callables of one model share its state, as the program's methods do.
MODELS = {
    "decoder_prefill_decode": lambda: _decoder(lambda d: dm.export_methods(d, 4), 4),
    "dynamic_prefill": lambda: _decoder(dm.export_dynamic_prefill, 5),
    "llama_single_forward": _llama_single_forward,
    "cross_attn_cond": lambda: _cross_attn(),
    "gqa_attention": lambda: _single(
        gqa.CachedAttention(8),
        [
            ("forward", (torch.full((1, 1, 4 * gqa.HEAD_DIM), 0.1 * (k + 1)), torch.tensor([k])))
            for k in range(3)
        ],
    ),
    "sibling_conds": lambda: _single(
        sibling.InsideTheDelegate(),
        [("forward", sibling._inputs(t)) for t in sibling.PREDICATES.values()],
    ),
    "buffer_assigned_a_buffer": lambda: _single(
        write_forms.Reset(), [("forward", (torch.full((4,), float(k)),)) for k in range(3)]
    ),
}


def _composable(programs, compile_config=None, **options):
    partitioner = TensorRTPartitioner(**options)
    edge = to_edge_transform_and_lower(
        programs,
        transform_passes=executorch_trt.transform_passes(**options),
        partitioner=[partitioner],
        compile_config=compile_config or executorch_trt.edge_compile_config(),
    )
    return edge.to_executorch(executorch_trt.backend_config(**options))


def _outputs(pte: bytes, calls):
    program = runtime.load(pte)
    methods = {}
    results = []
    for name, args in calls:
        method = methods.setdefault(name, program.load_method(name))
        results.append([t.clone() for t in method.execute(list(args))])
    return results


@delegate_library.needs_library
class ComposablePathTest(parameterized.TestCase):
    @parameterized.named_parameters((name, name) for name in MODELS)
    def test_same_program_as_export(self, name):
        programs, calls, eager = MODELS[name]()
        # Each path gets its own copy: the partitioner prepares the ATen programs in place.
        exported = executorch_trt.export(copy.deepcopy(programs)).buffer
        composable = _composable(copy.deepcopy(programs)).buffer
        self.assertEqual(len(exported), len(composable), name)
        self.assertTrue(exported == composable, f"{name}: the two .pte files differ")
        got = _outputs(composable, calls)
        for k, ((method, args), outs) in enumerate(zip(calls, got)):
            with torch.no_grad():
                want = eager[method](*args)
            want = list(want) if isinstance(want, (tuple, list)) else [want]
            self.assertEqual(len(outs), len(want), f"{name}: call {k} ({method})")
            for j, (g, w) in enumerate(zip(outs, want)):
                torch.testing.assert_close(
                    g, w, atol=1e-4, rtol=1e-4, msg=f"{name}: call {k} ({method}) output {j}"
                )

    @parameterized.named_parameters(
        (name, name) for name in ("decoder_prefill_decode", "dynamic_prefill", "cross_attn_cond")
    )
    def test_edge_compile_config_changes_no_byte(self, name):
        # edge_compile_config() only leaves out ExecuTorch's IR verifier: a user who lowers
        # with ExecuTorch's default EdgeCompileConfig gets the same program, only slower.
        programs, _, _ = MODELS[name]()
        ours = _composable(copy.deepcopy(programs)).buffer
        default = _composable(copy.deepcopy(programs), compile_config=EdgeCompileConfig()).buffer
        self.assertTrue(ours == default, f"{name}: the two .pte files differ")


@delegate_library.needs_library
class WithoutTransformPassesTest(absltest.TestCase):
    def test_a_buffer_assigned_a_buffer_is_refused(self):
        ep = _export(write_forms.Reset(), torch.ones(4))
        edge = to_edge_transform_and_lower(ep, partitioner=[TensorRTPartitioner()])
        with self.assertRaisesRegex(
            ValueError,
            r"buffers involved: .*'init'.*"
            r"transform_passes=executorch_trt\.transform_passes",
        ):
            edge.to_executorch(executorch_trt.backend_config())

    def test_zero_caches_are_serialised_but_numbers_are_the_same(self):
        programs, calls, _ = MODELS["gqa_attention"]()
        with_passes = _composable(copy.deepcopy(programs)).buffer
        edge = to_edge_transform_and_lower(
            copy.deepcopy(programs), partitioner=[TensorRTPartitioner()]
        )
        without = edge.to_executorch(executorch_trt.backend_config()).buffer
        # The emitter stores equal initial values once: at least one cache's bytes.
        cache_bytes = max(
            t.numel() * t.element_size() for fqn, t in programs.state_dict.items() if "cache" in fqn
        )
        self.assertGreaterEqual(len(without) - len(with_passes), cache_bytes)
        for a, b in zip(_outputs(with_passes, calls), _outputs(without, calls)):
            for x, y in zip(a, b):
                torch.testing.assert_close(x, y, atol=0, rtol=0)


if __name__ == "__main__":
    absltest.main()
