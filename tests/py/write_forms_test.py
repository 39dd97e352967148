"""Every supported KV-cache write form updates the cache in place, with PyTorch's semantics.

For each form (and several cache dtypes) a small model writes one projected row into a
``[1, 2, 8, 4]`` cache buffer and returns the whole cache. Checked on real programs:

* the plan: one TensorRTBackend delegate whose blob aliases the write's output to the cache
  input (kind ``kv_cache_update``), the DelegateCall passes the cache's value id as that input
  and output, and no ExecuTorch copy kernel writes the cache (no write-back);
* running it: after every step the returned cache equals eager PyTorch's buffer, and the
  delegate copied 0 bytes; positions include negative ones, where ``index_put`` wraps and
  ``index_copy_`` fails exactly when eager raises.

Forms that cannot be in place are exported with a ``NotInPlaceWarning`` naming the buffer and
why (``require_inplace=True`` raises instead), and still compute what eager does.
"""

import warnings

import torch
from absl.testing import absltest, parameterized
from executorch.exir import to_edge, to_edge_transform_and_lower

import decoder_models as dm
import delegate_library
import executorch_trt
import lowering_utils as lu
from executorch_trt import runtime
from executorch_trt.backend.diagnostics import NotInPlaceError, NotInPlaceWarning

H, S, D = 2, 8, 4
CACHE_SHAPE = [1, H, S, D]


def _write(form, cache, v, pos):
    """Writes ``v`` ([1, H, 1, D] float32) at ``pos`` ([1] int64) in ``form``."""
    if form == "index_copy":
        cache.index_copy_(2, pos, v.to(cache.dtype))
    elif form == "index_put":  # cache[:, :, pos] = v
        cache[:, :, pos] = v.to(cache.dtype)
    elif form == "index_put_broadcast":  # value [1, D] broadcast over heads
        cache[:, :, pos] = v[0, :1, 0].to(cache.dtype)
    elif form == "index_put_explicit":  # aten.index_put_ with leading None
        torch.ops.aten.index_put_(cache, [None, None, pos], v.to(cache.dtype))
    elif form == "index_put_int32":  # an int32 index tensor
        cache[:, :, pos.to(torch.int32)] = v.to(cache.dtype)
    elif form == "index_put_2d_index":  # a [1, 1] index: rows replace dim 2
        cache[:, :, pos.view(1, 1)] = v.view(1, H, 1, 1, D).to(cache.dtype)
    elif form == "index_copy_0d":  # a 0-d index tensor
        cache.index_copy_(2, pos[0], v.to(cache.dtype))
    elif form == "index_fill":  # wraps negative indices like index_put
        cache.index_fill_(2, pos, 2.5)
    elif form == "slice":  # static slice; casts like copy_
        cache[:, :, 3:4] = v * 3
    elif form == "slice_negative":
        cache[:, :, -2:] = v.expand(1, H, 2, D) * 3
    elif form == "narrow_copy":
        cache.narrow(2, 5, 1).copy_(v * 3)
    elif form == "select":  # static int index
        cache[:, :, 6] = v[:, :, 0] * 3
    elif form == "select_negative":
        cache[:, :, -1] = v[:, :, 0] * 3
    else:
        raise KeyError(form)


class CacheWriter(torch.nn.Module):
    """``forward(x[1, 1, D] f32, pos[1] i64) -> cache.float()`` after one write in ``form``."""

    def __init__(self, form, dtype=torch.float32):
        super().__init__()
        torch.manual_seed(0)
        self.form = form
        self.proj = torch.nn.Linear(D, H * D)
        self.register_buffer("cache", torch.zeros(CACHE_SHAPE, dtype=dtype))

    def forward(self, x, pos):
        v = self.proj(x).view(1, 1, H, D).transpose(1, 2)
        _write(self.form, self.cache, v, pos)
        return self.cache.to(torch.float32) + 0


def _export(model, **options):
    with torch.no_grad():
        ep = torch.export.export(model, (torch.randn(1, 1, D), torch.tensor([3])))
        return executorch_trt.export(ep, emit_mutable_buffer_names=True, **options)


def _cache_written_back(et, method="forward"):
    """Bytes per call that ExecuTorch copies back into the ``cache`` buffer
    (``executorch_trt.inspect``); 0 when the delegate updates it in place."""
    return executorch_trt.inspect(et).method(method).buffer("cache").bytes_copied_per_call


FORMS = [
    ("index_copy", torch.float32),
    ("index_put", torch.float32),
    ("index_put_broadcast", torch.float32),
    ("index_put_explicit", torch.float32),
    ("index_put_int32", torch.float32),
    ("index_put_2d_index", torch.float32),
    ("index_copy_0d", torch.float32),
    ("index_fill", torch.float32),
    ("slice", torch.float32),
    ("slice_negative", torch.float32),
    ("narrow_copy", torch.float32),
    ("select", torch.float32),
    ("select_negative", torch.float32),
    ("index_copy", torch.float16),
    ("index_put", torch.bfloat16),
    ("index_put", torch.int8),
    ("slice", torch.bfloat16),
    ("narrow_copy", torch.float16),
    ("select", torch.int8),
]
POSITIONS = [3, 0, -1, 7, -8, 2, 8, -9]


class InPlacePlanTest(parameterized.TestCase):
    @parameterized.named_parameters(
        (f"{form}_{str(dtype).split('.')[1]}", form, dtype) for form, dtype in FORMS
    )
    def test_plan_updates_cache_in_place(self, form, dtype):
        with warnings.catch_warnings():
            warnings.simplefilter("error", NotInPlaceWarning)
            et = _export(CacheWriter(form, dtype), require_inplace=True)
        gm = et.exported_program().graph_module
        (call,) = lu.delegate_calls(gm)
        meta = lu.blob_of(gm, call).metadata
        (alias,) = meta.aliased_io
        self.assertEqual((alias.input, alias.kind), ("b_cache", "kv_cache_update"))
        plan = lu.execution_plan(et)
        (args,) = lu.delegate_call_args(plan)
        names = [b.name for b in meta.inputs] + [b.name for b in meta.outputs]
        cache_in = args[names.index(alias.input)]
        self.assertEqual(
            args[names.index(alias.output)],
            cache_in,
            "the delegate's output must be the cache's own value",
        )
        self.assertEqual(plan.values[cache_in].val.extra_tensor_info.fully_qualified_name, "cache")
        self.assertEqual(_cache_written_back(et), 0)
        self.assertIn(
            "executorch_trt::kv_cache_update.out", lu.nested_operator_names(lu.blob_of(gm, call))
        )


@delegate_library.needs_library
class InPlaceNumericsTest(parameterized.TestCase):
    def _run_against_eager(self, model, et):
        """Runs both for every position; returns the positions at which both raised."""
        method = runtime.load(et.buffer).load_method("forward")
        eager = type(model)(model.form, model.cache.dtype)
        eager.load_state_dict(model.state_dict())
        torch.manual_seed(1)
        raised = []
        for step, p in enumerate(POSITIONS):
            x, pos = torch.randn(1, 1, D), torch.tensor([p])
            try:
                with torch.no_grad():
                    want = eager(x, pos)
            except (IndexError, RuntimeError):
                with self.assertRaises(RuntimeError, msg=f"step {step}: eager raised"):
                    method.execute([x, pos])
                raised.append(p)
                continue
            before = runtime.bytes_copied()
            (got,) = method.execute([x, pos])
            self.assertEqual(runtime.bytes_copied(), before, f"step {step}: delegate copied")
            torch.testing.assert_close(
                got, want, atol=1e-5, rtol=1e-5, msg=f"step {step} (pos {p})"
            )
            torch.testing.assert_close(got, eager.cache.to(torch.float32), atol=1e-5, rtol=1e-5)
        return raised

    @parameterized.named_parameters(
        (f"{form}_{str(dtype).split('.')[1]}", form, dtype) for form, dtype in FORMS
    )
    def test_matches_eager_every_step(self, form, dtype):
        model = CacheWriter(form, dtype)
        raised = self._run_against_eager(model, _export(model, require_inplace=True))
        if form.startswith("index_copy"):
            self.assertEqual(raised, [-1, -8, 8, -9], "index_copy_ rejects negative indices")
        elif form.startswith(("index_put", "index_fill")):
            self.assertEqual(raised, [8, -9], f"{form} wraps [-8, 0) and rejects the rest")
        else:
            self.assertEqual(raised, [], "static forms ignore pos")


#: Forms a prefill writes with a dynamic length: ``pos`` is ``[T]``, ``v`` ``[1, H, T, D]``.
PREFILL_FORMS = (
    "index_copy",
    "index_put",
    "index_put_explicit",
    "index_put_int32",
    "index_put_broadcast",
    "index_put_row",
    "index_put_scalar",
)


class PrefillWriter(torch.nn.Module):
    """``forward(x[1, T, D] f32, pos[T] i64) -> cache``: one write of T rows in ``form``."""

    def __init__(self, form):
        super().__init__()
        torch.manual_seed(0)
        self.form = form
        self.proj = torch.nn.Linear(D, H * D)
        self.register_buffer("cache", torch.zeros(CACHE_SHAPE))

    def forward(self, x, pos):
        v = self.proj(x).view(1, -1, H, D).transpose(1, 2)
        if self.form == "index_copy":
            self.cache.index_copy_(2, pos, v)
        elif self.form == "index_put":  # the hand-written decoder's form
            self.cache[:, :, pos] = v
        elif self.form == "index_put_explicit":
            torch.ops.aten.index_put_(self.cache, [None, None, pos], v)
        elif self.form == "index_put_int32":
            self.cache[:, :, pos.to(torch.int32)] = v
        elif self.form == "index_put_broadcast":  # [T, D], broadcast over batch and heads
            self.cache[:, :, pos] = v[0, 0]
        elif self.form == "index_put_row":  # [D], broadcast over T too
            self.cache[:, :, pos] = v[0, 0, 0]
        else:  # a Python scalar: every row written
            self.cache[:, :, pos] = 0.5
        return self.cache + 0


@delegate_library.needs_library
class DynamicLengthWritesTest(parameterized.TestCase):
    """A prefill with ``Dim("T")`` writes its T rows in place, for any T in the range."""

    @parameterized.parameters(*PREFILL_FORMS)
    def test_in_place_for_every_length(self, form):
        model = PrefillWriter(form).eval()
        t = torch.export.Dim("T", min=1, max=S)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("error", NotInPlaceWarning)
            ep = torch.export.export(
                model, (torch.randn(1, 3, D), torch.arange(3)), dynamic_shapes=({1: t}, {0: t})
            )
            et = executorch_trt.export(ep, require_inplace=True)
        self.assertEqual(_cache_written_back(et), 0)
        (call,) = lu.delegate_calls(et.exported_program().graph_module)
        (alias,) = lu.blob_of(et.exported_program().graph_module, call).metadata.aliased_io
        self.assertEqual((alias.input, alias.kind), ("b_cache", "kv_cache_update"))
        method = runtime.load(et.buffer).load_method("forward")
        eager = PrefillWriter(form).eval()
        torch.manual_seed(3)
        start = 0
        for step, rows in enumerate((3, 1, 2, 2)):  # a prompt, then shorter chunks
            x, pos = torch.randn(1, rows, D), torch.arange(start, start + rows)
            with torch.no_grad():
                want = eager(x, pos)
            before = runtime.bytes_copied()
            (got,) = method.execute([x, pos])
            self.assertEqual(runtime.bytes_copied(), before, f"step {step}: delegate copied")
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=f"step {step}")
            start += rows


class Accumulate(dm.CacheModule):
    """``index_put_(..., accumulate=True)``: an add into the cache, not a write."""

    SHAPE = CACHE_SHAPE

    def forward(self, x, pos):
        torch.ops.aten.index_put_(
            self.cache, [None, None, pos], x.view(1, 1, 1, D).expand(1, H, 1, D), True
        )
        return self.cache + 0


class ReadBeforeWrite(dm.CacheModule):
    """The old cache is read by an op that does not feed the write: the write cannot be in
    place (it could land before the read)."""

    SHAPE = CACHE_SHAPE

    def forward(self, x, pos):
        old = self.cache.sum(2)
        self.cache.index_copy_(2, pos, x.view(1, 1, 1, D).expand(1, H, 1, D).contiguous())
        return old, self.cache + 0


class ReadFeedsWrite(dm.CacheModule):
    """The old cache feeds the value being written: it is read before the write on every
    engine, so the write is in place."""

    SHAPE = CACHE_SHAPE

    def initial(self):
        return torch.ones(self.SHAPE)

    def forward(self, x, pos):
        v = self.cache[:, :, 0:1] * 2 + x.view(1, 1, 1, D)
        self.cache[:, :, pos] = v
        return self.cache + 0


class RotateFromItself(dm.CacheModule):
    """The cache rotated by one position from its own memory (the value written is the
    cache): in place, the rows written first would be read back."""

    SHAPE = CACHE_SHAPE

    def initial(self):
        return torch.arange(float(H * S * D)).view(self.SHAPE)

    def forward(self, x, pos):
        perm = torch.tensor([*range(1, S), 0])
        self.cache.copy_(self.cache.index_copy(2, perm, self.cache))
        return self.cache + x.sum()


class IndexPutFromItself(RotateFromItself):
    """The same rotation as ``index_put`` of the cache into itself."""

    def forward(self, x, pos):
        perm = torch.tensor([*range(1, S), 0])
        self.cache.copy_(torch.ops.aten.index_put(self.cache, [None, None, perm], self.cache))
        return self.cache + x.sum()


class ReadOnlyTable(torch.nn.Module):
    """A functional ``index_copy`` of a buffer that is never mutated: the buffer must stay as
    it is (the result is a new tensor, as in eager)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(S * D, dtype=torch.float32).view(S, D))

    def forward(self, x, pos):
        return self.table.index_copy(0, pos, x.view(1, D))


@delegate_library.needs_library
class NotInPlaceTest(parameterized.TestCase):
    def _check_numerics(self, model, et, steps=4):
        method = runtime.load(et.buffer).load_method("forward")
        eager = type(model)()
        eager.load_state_dict(model.state_dict())
        torch.manual_seed(2)
        for step in range(steps):
            x, pos = torch.randn(1, 1, D), torch.tensor([step % S])
            with torch.no_grad():
                want = eager(x, pos)
            got = method.execute([x, pos])
            want = want if isinstance(want, tuple) else (want,)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, msg=f"step {step}")

    @parameterized.named_parameters(
        ("accumulate", Accumulate, "accumulate=True"),
        ("read_before_write", ReadBeforeWrite, r"also read by aten::sum"),
        ("rotate_from_itself", RotateFromItself, r"reads the buffer's own memory"),
        ("index_put_from_itself", IndexPutFromItself, r"reads the buffer's own memory"),
    )
    def test_warns_with_reason_and_stays_correct(self, cls, reason):
        with self.assertWarnsRegex(
            NotInPlaceWarning, rf"method 'forward': buffer 'cache' .* \(256 bytes\).*{reason}"
        ):
            et = _export(cls())
        self.assertEqual(_cache_written_back(et), 256)
        with self.assertRaisesRegex(NotInPlaceError, rf"buffer 'cache'.*{reason}"):
            _export(cls(), require_inplace=True)
        self._check_numerics(cls(), et)

    def test_read_that_feeds_the_write_is_in_place(self):
        et = _export(ReadFeedsWrite(), require_inplace=True)
        self.assertEqual(_cache_written_back(et), 0)
        self._check_numerics(ReadFeedsWrite(), et)

    def test_functional_update_of_read_only_buffer_leaves_it_alone(self):
        et = _export(ReadOnlyTable())
        gm = et.exported_program().graph_module
        for call in lu.delegate_calls(gm):
            self.assertEqual(lu.blob_of(gm, call).metadata.aliased_io, ())
        self._check_numerics(ReadOnlyTable(), et, steps=3)

    def test_copy_back_is_requested_not_warned(self):
        with warnings.catch_warnings():
            warnings.simplefilter("error", NotInPlaceWarning)
            et = _export(CacheWriter("index_put"), kv_cache="copy_back")
        self.assertEqual(_cache_written_back(et), 256)
        with self.assertRaisesRegex(
            ValueError, "require_inplace=True contradicts kv_cache='copy_back'"
        ):
            _export(CacheWriter("index_put"), kv_cache="copy_back", require_inplace=True)


class Overwrites(torch.nn.Module):
    """State that is only written, never read: ``buf.copy_(x * 2)`` and an HF-style step
    counter ``counter.copy_(pos[0])``. ``ReadBack`` reads both in a second method."""

    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(4))
        self.register_buffer("counter", torch.zeros((), dtype=torch.int64))

    def forward(self, x, pos):
        self.buf.copy_(x * 2)
        self.counter.copy_(pos[0])
        return x + 1


class Write(torch.nn.Module):
    """``Overwrites`` as ``self.m`` (the same buffer FQNs as ``ReadBack``)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x, pos):
        return self.m(x, pos)


class ReadBack(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, scale):
        return self.m.buf * scale, self.m.counter * 1


class ZeroThenWrite(dm.CacheModule):
    """``cache.zero_()`` then one row: the new cache does not depend on the old one."""

    def initial(self):
        return torch.ones(self.SHAPE)

    def forward(self, x, pos):
        self.cache.zero_()
        self.cache.index_copy_(0, pos, x)
        return self.cache + 0


class Reset(torch.nn.Module):
    """``state.copy_(init)``: a buffer assigned another buffer as it is (ExecuTorch 1.5.1
    drops that write), and a shift register ``a.copy_(b); b.copy_(x)``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.full((4,), 5.0))
        self.register_buffer("init", torch.ones(4))
        self.register_buffer("a", torch.zeros(4))
        self.register_buffer("b", torch.ones(4))

    def forward(self, x):
        out = self.state + x + self.a * 10
        self.state.copy_(self.init)
        self.a.copy_(self.b)
        self.b.copy_(x)
        return out


class LayerSlab(dm.CacheModule):
    """A write into a view of the cache (one layer of a stacked cache)."""

    SHAPE = (2, 8, 4)

    def forward(self, x, pos):
        self.cache[1].index_copy_(0, pos, x)
        return self.cache + 0


class ReturnsCopies(dm.CacheModule):
    """The cache updated by an op XNNPACK runs, then returned as a copy and a copy of that
    copy. XNNPACK's preprocess removes copies from its subgraphs, which would leave one
    returning a value twice."""

    def forward(self, x, pos):
        self.cache.add_(x * pos)
        out = self.cache.clone()
        return out, out.clone()


class FilledFromASum(torch.nn.Module):
    """A 0-d buffer overwritten with ``fill_`` of a value XNNPACK does not compute (a full sum),
    then read by an op it runs: the overwrite is a copy XNNPACK would remove from its subgraph,
    leaving it to return its own input."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(()))

    def forward(self, x):
        self.total.fill_(x.sum())
        return self.total * 2


class ScalarStep(torch.nn.Module):
    """A 0-d ``dtype`` buffer updated in place with a Python scalar (``count.add_(step)``),
    then computed with (``* 2``, ``// 3``) and returned: ``to_edge`` alone computes all of it
    in int64 or float32 (the scalar becomes a 0-d tensor of that dtype), where eager keeps the
    buffer's dtype (wrapping, rounding)."""

    def __init__(self, dtype, step, start=0):
        super().__init__()
        self.register_buffer("count", torch.full((), start, dtype=dtype))
        self.step = step

    def forward(self, x):
        updated = self.count.add_(self.step)
        return x * updated.to(x.dtype), updated * 2, updated // 3


class ConvertedOverwrites(torch.nn.Module):
    """Buffers overwritten with ``copy_`` and read by nothing else: ``converted`` copies a value
    that ``copy_`` casts (float32 into float16) and broadcasts ([4] into [3, 4]); ``matched``
    copies values already of each buffer's dtype and shape."""

    def __init__(self, form="converted"):
        super().__init__()
        self.form = form
        self.register_buffer("low", torch.zeros(4, dtype=torch.float16))
        self.register_buffer("rows", torch.zeros(3, 4))

    def forward(self, x):
        # Two values: two buffers copied from one fail in torch.export's verifier (ExecuTorch
        # alone too).
        v, w = x * 2, x * 3
        if self.form == "converted":
            self.low.copy_(v)
            self.rows.copy_(w)
        else:
            self.low.copy_(v.to(torch.float16))
            self.rows.copy_(w.expand(3, 4))
        return x + 1


class CopiedThenRead(torch.nn.Module):
    """A buffer overwritten with ``copy_`` (or ``buf[:] = ...``) from a value it converts
    (float32 into float16) or broadcasts (``[4]`` into ``[3, 4]``), then read in the same call:
    the read must see the converted value, as in eager."""

    def __init__(self, form):
        super().__init__()
        self.form = form
        self.register_buffer("low", torch.zeros(3, 4, dtype=torch.float16))

    def forward(self, x):
        if self.form == "copy_":
            self.low.copy_(x)
        elif self.form == "setitem":
            self.low[:] = x
        elif self.form == "broadcast":
            self.low.copy_(x[1].half())
        elif self.form == "broadcast_converted":
            self.low.copy_(x[1])
        return self.low.float() * 2


@delegate_library.needs_library
class StateWritesTest(absltest.TestCase):
    def _run(self, model, et, inputs):
        method = runtime.load(et.buffer).load_method("forward")
        for step, args in enumerate(inputs):
            with torch.no_grad():
                want = model(*args)
            got = method.execute(list(args))
            for g, w in zip(got, want if isinstance(want, tuple) else (want,)):
                torch.testing.assert_close(g, w, msg=f"step {step}")

    def test_overwrites_are_in_place(self):
        model = Overwrites()
        with torch.no_grad():
            x, pos = torch.ones(4), torch.tensor([3])
            et = executorch_trt.export(
                {
                    "forward": torch.export.export(Write(model), (x, pos)),
                    "read": torch.export.export(ReadBack(model), (torch.ones(1),)),
                },
                emit_mutable_buffer_names=True,
                require_inplace=True,
            )
        report = executorch_trt.inspect(et).method("forward")
        self.assertEqual(
            [(b.name, b.update) for b in report.state],
            [("m.buf", "in_place_delegate"), ("m.counter", "in_place_delegate")],
        )
        program = runtime.load(et.buffer)
        forward, read = program.load_method("forward"), program.load_method("read")
        for step in range(3):
            x, pos = torch.full((4,), float(step)), torch.tensor([step + 5])
            forward.execute([x, pos])
            buf, counter = read.execute([torch.ones(1)])
            torch.testing.assert_close(buf, x * 2, msg=f"step {step}")
            self.assertEqual(counter.item(), step + 5)

    def test_zero_then_write_is_in_place(self):
        et = executorch_trt.export(
            torch.export.export(ZeroThenWrite(), (torch.ones(1, 4), torch.tensor([2]))),
            require_inplace=True,
        )
        self._run(
            ZeroThenWrite(),
            et,
            [(torch.full((1, 4), float(i)), torch.tensor([i])) for i in range(3)],
        )

    def test_updated_cache_returned_as_copies(self):
        with torch.no_grad():
            ep = torch.export.export(ReturnsCopies(), (torch.ones(1, 4), torch.tensor([2])))
        et = executorch_trt.export(ep)
        self._run(
            ReturnsCopies(),
            et,
            [(torch.full((1, 4), float(i)), torch.tensor([i + 1])) for i in range(3)],
        )

    def test_buffer_filled_from_a_value_outside_xnnpack(self):
        with torch.no_grad():
            ep = torch.export.export(FilledFromASum(), (torch.ones(1, 4),))
        program = runtime.load(executorch_trt.export(ep).buffer)
        method, eager = program.load_method("forward"), FilledFromASum()
        for step in range(3):
            x = torch.arange(4.0).view(1, 4) * (step + 1)
            torch.testing.assert_close(method.execute([x])[0], eager(x))
            torch.testing.assert_close(program.buffer("total"), eager.total)

    def test_buffer_stepped_by_a_python_scalar_keeps_its_dtype(self):
        # uint8 wraps at the third call, int16's doubled value at the second; float16 adds 0.1
        # rounded to float16, as eager does.
        for dtype, step, start in (
            (torch.uint8, 100, 0),
            (torch.int16, 1, 16382),
            (torch.int32, 1, 0),
            (torch.bfloat16, 0.1, 0),
            (torch.float16, 0.1, 0),
        ):
            with self.subTest(dtype=dtype), torch.no_grad():
                ep = torch.export.export(ScalarStep(dtype, step, start), (torch.ones(2),))
                program = runtime.load(executorch_trt.export(ep).buffer)
                method, eager = program.load_method("forward"), ScalarStep(dtype, step, start)
                for call in range(4):
                    x = torch.full((2,), float(call + 1))
                    got, want = method.execute([x]), eager(x)
                    for g, w in zip(got, want):
                        self.assertEqual(g.dtype, w.dtype, f"call {call}")
                        torch.testing.assert_close(g, w, rtol=0, atol=0, msg=f"call {call}")
                    torch.testing.assert_close(program.buffer("count"), eager.count, rtol=0, atol=0)

    def _check_overwrites(self, form, **options):
        with torch.no_grad():
            ep = torch.export.export(ConvertedOverwrites(form), (torch.ones(4),))
        program = runtime.load(executorch_trt.export(ep, **options).buffer)
        method, eager = program.load_method("forward"), ConvertedOverwrites(form)
        for step in range(3):
            x = torch.arange(4.0) + step
            torch.testing.assert_close(method.execute([x])[0], eager(x))
            for name in ("low", "rows"):
                torch.testing.assert_close(program.buffer(name), getattr(eager, name))

    def test_overwrite_that_copy_converts_is_in_place(self):
        self._check_overwrites("converted", require_inplace=True)

    def test_copy_that_converts_is_read_converted(self):
        # 1.0001 and 3.0007 round in float16, 70000 overflows to inf.
        x = torch.tensor([[1.0001, 2.0, 3.0007, 70000.0]] * 3) * torch.tensor([[1.0], [2.0], [3.0]])
        for form in ("copy_", "setitem", "broadcast", "broadcast_converted"):
            with self.subTest(form=form), torch.no_grad():
                ep = torch.export.export(CopiedThenRead(form), (x,))
                et = executorch_trt.export(ep, require_inplace=True)
                program, eager = runtime.load(et.buffer), CopiedThenRead(form)
                method = program.load_method("forward")
                for step in range(2):
                    torch.testing.assert_close(method.execute([x + step])[0], eager(x + step))
                    torch.testing.assert_close(program.buffer("low"), eager.low)

    def test_to_backend_path_refuses_the_dropped_conversion(self):
        # to_edge decomposes before any partitioner hook runs, so the copy_'s conversion is
        # lost; the partitioner sees it in the buffer's new value and refuses.
        x = torch.tensor([[1.0001, 70000.0, 3.0007, 0.5]] * 3)
        for form, value in (("copy_", r"float32 \[3, 4\]"), ("broadcast", r"float16 \[4\]")):
            with self.subTest(form=form), torch.no_grad():
                edge = to_edge(torch.export.export(CopiedThenRead(form), (x,)))
                with self.assertRaisesRegex(
                    ValueError,
                    rf"buffer 'low' \(float16 \[3, 4\]\) would be updated with a {value} value, .*"
                    r"torch\.export's functionalisation dropped the dtype conversion or broadcast"
                    r".*Lower with to_edge_transform_and_lower",
                ):
                    edge.to_backend(executorch_trt.TensorRTPartitioner())

    def test_a_scalar_the_buffer_dtype_does_not_hold_is_refused(self):
        # Eager wraps 1000 into int8; ExecuTorch's scalar_tensor refuses it, so the update
        # stays widened to int64 and the partitioner says why and what to change.
        with torch.no_grad():
            ep = torch.export.export(ScalarStep(torch.int8, 1000), (torch.ones(2),))
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'count' \(int8 \[\]\) would be updated with a int64 \[\] value, .*"
            r"a scalar the buffer's dtype does not hold.*convert in the model",
        ):
            executorch_trt.export(ep)

    def test_to_backend_path_refuses_a_widened_scalar_update(self):
        # to_edge widens count.add_(1) to int64 before any partitioner hook runs; the
        # composable path's hook keeps it int16.
        model = ScalarStep(torch.int16, 1, 16382)
        with torch.no_grad():
            ep = torch.export.export(model, (torch.ones(2),))
        with self.assertRaisesRegex(
            ValueError,
            r"buffer 'count' \(int16 \[\]\) would be updated with a int64 \[\] value, .*"
            r"ExecuTorch's to_edge widened a 0-d buffer's arithmetic with a Python scalar.*"
            r"Lower with to_edge_transform_and_lower",
        ):
            to_edge(ep).to_backend(executorch_trt.TensorRTPartitioner())
        edge = to_edge_transform_and_lower(
            ep,
            partitioner=[executorch_trt.TensorRTPartitioner()],
            transform_passes=executorch_trt.transform_passes(),
        )
        program = runtime.load(edge.to_executorch(executorch_trt.backend_config()).buffer)
        method, eager = program.load_method("forward"), ScalarStep(torch.int16, 1, 16382)
        for _ in range(3):
            for got, want in zip(method.execute([torch.ones(2)]), eager(torch.ones(2))):
                torch.testing.assert_close(got, want, rtol=0, atol=0)
            torch.testing.assert_close(program.buffer("count"), eager.count)

    def test_composable_path_reads_the_converted_copy(self):
        x = torch.tensor([[1.0001, 70000.0, 3.0007, 0.5]] * 3)
        with torch.no_grad():
            edge = to_edge_transform_and_lower(
                torch.export.export(CopiedThenRead("copy_"), (x,)),
                partitioner=[executorch_trt.TensorRTPartitioner()],
                transform_passes=executorch_trt.transform_passes(),
            )
        et = edge.to_executorch(executorch_trt.backend_config())
        got = runtime.load(et.buffer).load_method("forward").execute([x])[0]
        torch.testing.assert_close(got, CopiedThenRead("copy_")(x))

    def test_overwrite_of_the_buffer_dtype_and_shape_is_in_place(self):
        self._check_overwrites("matched", require_inplace=True)

    def test_buffer_assigned_another_buffer_is_written(self):
        with self.assertWarnsRegex(
            NotInPlaceWarning,
            r"buffer 'state' .* assigned the value "
            r"of 'init'",
        ):
            et = executorch_trt.export(torch.export.export(Reset(), (torch.zeros(4),)))
        self._run(Reset(), et, [(torch.full((4,), float(i)),) for i in range(4)])

    def test_composable_path_refuses_the_dropped_write(self):
        with torch.no_grad():
            edge = to_edge_transform_and_lower(
                torch.export.export(Reset(), (torch.zeros(4),)),
                partitioner=[executorch_trt.TensorRTPartitioner()],
            )
        with self.assertRaisesRegex(
            ValueError,
            r"assigned another buffer as it is .*'init'.*"
            r"drops that write",
        ):
            edge.to_executorch(executorch_trt.backend_config())

    def test_write_into_a_view_warns_with_the_bytes_it_copies(self):
        with torch.no_grad():
            ep = torch.export.export(LayerSlab(), (torch.ones(1, 4), torch.tensor([2])))
        with self.assertWarnsRegex(
            NotInPlaceWarning,
            r"'b_cache' is updated in place, but each "
            r"call also copies 128 bytes",
        ):
            et = executorch_trt.export(ep)
        with self.assertRaisesRegex(NotInPlaceError, "copies 128 bytes of it inside"):
            executorch_trt.export(ep, require_inplace=True)
        self._run(
            LayerSlab(), et, [(torch.full((1, 4), float(i)), torch.tensor([i])) for i in range(3)]
        )

    def test_two_writes_to_one_cache_say_so(self):
        class TwoWrites(dm.CacheModule):
            def forward(self, x, pos):
                self.cache.index_copy_(0, pos, x)
                self.cache.index_copy_(0, pos + 1, x * 2)
                return self.cache + 0

        with torch.no_grad():
            ep = torch.export.export(TwoWrites(), (torch.ones(1, 4), torch.tensor([2])))
        with self.assertWarnsRegex(NotInPlaceWarning, "written more than once in this method"):
            et = executorch_trt.export(ep)
        self._run(
            TwoWrites(), et, [(torch.full((1, 4), float(i)), torch.tensor([i])) for i in range(3)]
        )

    def test_non_contiguous_cache_is_rejected_at_export(self):
        class ChannelsLast(CacheWriter):
            def __init__(self):
                super().__init__("index_put")
                self.cache = self.cache.to(memory_format=torch.channels_last)

        with torch.no_grad():
            ep = torch.export.export(ChannelsLast(), (torch.randn(1, 1, D), torch.tensor([3])))
        with self.assertRaisesRegex(ValueError, "binding 'b_cache' is not contiguous"):
            executorch_trt.export(ep)


if __name__ == "__main__":
    absltest.main()
