"""Quiet by default (``executorch_trt/quiet.py``): a user's script prints only its own output.

A fresh process runs the README's example (import, ``executorch_trt.export``, save, run with
``executorch_trt.runtime`` over three calls) and the same program on ``executorch.runtime``,
checking its numbers against eager silently: stdout and stderr are empty. With
``EXECUTORCH_TRT_VERBOSE=1`` the lines quieting hides are back (torchao's failed ``.so`` loads,
torch's ``LeafSpec`` deprecation, ExecuTorch's buffer initial-state warning, ExecuTorch's info
lines). The product's own ``NotInPlaceWarning`` still shows by default, alone. Engine: portable.

ExecuTorch's "Mutation on a buffer ... meaningless initial state" warning is dropped only for
buffers whose initial state is defined (``lowering/emitter_fixes.py``): a plain ExecuTorch program
of the same model, whose buffer is left uninitialised, still warns.
"""

import os
import re
import textwrap
import warnings
from unittest import mock

import torch
from absl.testing import absltest
from executorch.exir import to_edge

import delegate_library
import executorch_trt

TIMEOUT_S = 300

# The README's example (README.md, "Example"); its print replaced by a silent check.
README_SCRIPT = textwrap.dedent("""\
    import torch
    import executorch_trt
    from executorch_trt import runtime

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)
            self.register_buffer("cache", torch.zeros(1, 16, 8))

        def forward(self, x, pos):                      # x [1, 1, 8] float32, pos [1] int64
            self.cache.index_copy_(1, pos, self.proj(x))
            return self.cache.sum(1)

    model = Tiny().eval()
    x, pos = torch.randn(1, 1, 8), torch.tensor([0])
    with torch.no_grad():                               # export for inference
        ep = torch.export.export(model, (x, pos))
        program = executorch_trt.export(ep)
    with open("tiny.pte", "wb") as f:
        f.write(program.buffer)

    method = runtime.load("tiny.pte").load_method("forward")
    for step in range(3):
        (out,) = method.execute([x, torch.tensor([step])])   # the cache persists across calls

    from executorch.runtime import Runtime
    stock = Runtime.get().load_program("tiny.pte").load_method("forward")
    for step in range(3):
        (stock_out,) = stock.execute([x, torch.tensor([step])])
    with torch.no_grad():
        for step in range(3):
            want = model(x, torch.tensor([step]))
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(stock_out, want)
    """)

# A cache update that cannot be in place (an accumulate): export warns NotInPlaceWarning.
NOT_IN_PLACE_SCRIPT = textwrap.dedent("""\
    import torch
    import executorch_trt

    class Accumulate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(1, 2, 8, 4))

        def forward(self, x, pos):
            torch.ops.aten.index_put_(self.cache, [None, None, pos],
                                      x.view(1, 1, 1, 4).expand(1, 2, 1, 4), True)
            return self.cache + 0

    with torch.no_grad():
        executorch_trt.export(torch.export.export(
            Accumulate(), (torch.randn(1, 1, 4), torch.tensor([1]))))
    """)

# What quieting hides (and verbose mode shows), one pattern per cause.
NOISE = {
    "torchao's failed .so loads": r"Failed to load .*torchao/_C",
    "torch's LeafSpec deprecation": r"isinstance\(treespec, LeafSpec\)` is deprecated",
    "ExecuTorch's buffer initial-state warning": r"Mutation on a buffer in the model",
    "ExecuTorch's info lines": r"(?m)^I \d\d:\d\d:\d\d\.\d{6} executorch:",
}


# export_llm on a tiny transformers Llama: torch.export warns about transformers' own
# output-capturing context variable unless quieted.
EXPORT_LLM_SCRIPT = textwrap.dedent("""\
    import torch
    import transformers
    from executorch_trt import llm

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)).eval()
    llm.export_llm(model, max_seq_len=8, max_context_len=32, output="tiny.pte")
""")


@delegate_library.needs_library
class QuietTest(absltest.TestCase):
    def _run(self, script, **env_changes):
        env = delegate_library.subprocess_env()
        env.pop("EXECUTORCH_TRT_VERBOSE", None)
        env.update(env_changes)
        proc = delegate_library.run_script(
            script, self.create_tempdir().full_path, "user_script.py", env, TIMEOUT_S
        )
        self.assertEqual(proc.returncode, 0, f"the script failed:\n{proc.stderr[-4000:]}")
        return proc

    def test_readme_example_prints_nothing(self):
        proc = self._run(README_SCRIPT)
        self.assertEqual(proc.stdout + proc.stderr, "")

    def test_export_llm_prints_nothing(self):
        proc = self._run(EXPORT_LLM_SCRIPT, HF_HUB_OFFLINE="1")
        self.assertEqual(proc.stdout + proc.stderr, "")

    def test_verbose_mode_shows_everything(self):
        proc = self._run(README_SCRIPT, EXECUTORCH_TRT_VERBOSE="1")
        for cause, pattern in NOISE.items():
            self.assertRegex(proc.stderr, pattern, f"verbose mode does not show {cause}")
        # Gone at the cause, not hidden: the binding no longer registers a second PAL.
        self.assertNotIn("register_pal", proc.stderr)

    def test_not_in_place_warning_still_shows_alone(self):
        proc = self._run(NOT_IN_PLACE_SCRIPT)
        self.assertEqual(proc.stdout, "")
        for cause, pattern in NOISE.items():
            self.assertIsNone(re.search(pattern, proc.stderr), f"{cause} shown:\n{proc.stderr}")
        # Python's two lines for one warning: "file:line: category: message", then the source.
        lines = proc.stderr.splitlines()
        self.assertLen(lines, 2, proc.stderr)
        self.assertRegex(
            lines[0],
            r": NotInPlaceWarning: executorch_trt: method 'forward': "
            r"buffer 'cache' is not updated in place; .*\(256 bytes\): "
            r"index_put with accumulate=True",
        )


class Counter(torch.nn.Module):
    """``count`` [1] float32 starts at 1 (not zeros: its value is serialised, et_init_buffer)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.ones(1))

    def forward(self, x):  # x [1] float32
        self.count.copy_(self.count + x)
        return self.count + 0


INITIAL_STATE_WARNING = r"Mutation on a buffer in the model is detected"


class InitialStateWarningTest(absltest.TestCase):
    def _warnings(self, lower):
        with (
            mock.patch.dict(os.environ, {}, clear=False) as env,
            warnings.catch_warnings(record=True) as caught,
        ):
            env.pop("EXECUTORCH_TRT_VERBOSE", None)
            warnings.simplefilter("always")
            with torch.no_grad():
                lower(torch.export.export(Counter(), (torch.ones(1),)))
        return [str(w.message) for w in caught if re.match(INITIAL_STATE_WARNING, str(w.message))]

    def test_dropped_for_a_buffer_the_product_initialises(self):
        self.assertEqual(self._warnings(executorch_trt.export), [])

    def test_kept_for_a_buffer_left_uninitialised(self):
        self.assertLen(self._warnings(lambda ep: to_edge(ep).to_executorch()), 1)


if __name__ == "__main__":
    absltest.main()
