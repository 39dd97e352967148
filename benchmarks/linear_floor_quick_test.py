"""`//benchmarks:linear_floor` on the tiny model: what the floor program holds (every linear of
the model, each weight once, all of them in XNNPACK), the output's fields and the roofline's
arithmetic, never the timings; with several tokens (a prompt) the output layer on the last
token only and the FLOP count; bad flags exit 2."""

import json
import os
import tempfile

import torch
from absl.testing import absltest

from benchmarks import command_line_testing, linear_floor, roofline
from benchmarks.generate_config import TINY


class LinearFloorQuickTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as directory:
            path = os.path.join(directory, "floor.json")
            cls.exit_code = linear_floor.main(
                ["--model", "tiny", "--steps", "3", "--bandwidth-mib", "8", "--json", path]
            )
            with open(path) as f:
                cls.result = json.load(f)
            cls.prompt_exit_code = linear_floor.main(
                [
                    "--model",
                    "tiny",
                    "--tokens",
                    "4",
                    "--steps",
                    "2",
                    "--bandwidth-mib",
                    "8",
                    "--json",
                    path,
                ]
            )
            with open(path) as f:
                cls.prompt = json.load(f)

    def test_exits_0_with_every_linear_in_xnnpack(self):
        self.assertEqual(self.exit_code, 0)
        self.assertEqual(self.result["undelegated_linears"], 0)
        self.assertGreaterEqual(self.result["xnnpack_delegates"], 1)

    def test_holds_each_linear_weight_of_the_model(self):
        model = TINY.build(max_seq_len=64)
        dims = TINY.dims
        # q, k, v, o, gate, up, down per layer, then the output layer.
        self.assertEqual(self.result["linears"], 7 * dims.num_hidden_layers + 1)
        linear_bytes = sum(
            m.weight.numel() * 4 for m in model.modules() if isinstance(m, torch.nn.Linear)
        )
        self.assertEqual(self.result["weight_bytes"], linear_bytes)
        # None of them left out of the program as dead code.
        self.assertGreaterEqual(self.result["program_bytes"], linear_bytes)
        self.assertEqual(
            self.result["roofline_weight_bytes"], roofline.weight_bytes_per_token(model)
        )
        # The roofline's bytes are the linears' plus the norms' weights and one embedding row.
        self.assertGreater(self.result["roofline_weight_bytes"], self.result["weight_bytes"])

    def test_counts_linears_left_outside_xnnpack(self):
        from executorch.exir import to_edge

        module = linear_floor.DecoderLinears(TINY.build(max_seq_len=64))
        x = torch.zeros(1, 1, TINY.dims.hidden_size)
        edge = to_edge(torch.export.export(module, (x,))).exported_program()
        self.assertEqual(
            linear_floor.undelegated_linears(edge.graph_module),
            7 * TINY.dims.num_hidden_layers + 1,
        )

    def test_roofline_arithmetic(self):
        r = self.result
        self.assertEqual(r["model"], "tiny")
        self.assertGreater(r["floor_ms_median"], 0)
        self.assertLessEqual(r["floor_ms_p10"], r["floor_ms_median"])
        self.assertAlmostEqual(
            r["roofline_ms"], r["roofline_weight_bytes"] / r["bandwidth_bytes_per_s"] * 1e3
        )
        self.assertAlmostEqual(
            r["floor_roofline_fraction"], r["roofline_ms"] / r["floor_ms_median"]
        )

    def test_prompt_of_several_tokens(self):
        p = self.prompt
        self.assertEqual(self.prompt_exit_code, 0)
        self.assertEqual((p["tokens"], p["undelegated_linears"]), (4, 0))
        model = TINY.build(max_seq_len=64)
        layer_weights = sum(
            m.weight.numel() for m in model.model.layers.modules() if isinstance(m, torch.nn.Linear)
        )
        # Every layer's linears on 4 tokens, the output layer on the last one.
        self.assertEqual(p["flops"], 2 * layer_weights * 4 + 2 * model.lm_head.weight.numel())
        self.assertEqual(self.result["flops"], 2 * layer_weights + 2 * model.lm_head.weight.numel())
        self.assertAlmostEqual(p["floor_gflop_s"], p["flops"] / p["floor_ms_median"] / 1e6)
        self.assertAlmostEqual(p["eager_gflop_s"], p["flops"] / p["eager_ms_median"] / 1e6)
        self.assertLessEqual(p["eager_ms_p10"], p["eager_ms_median"])

    def test_prompt_computes_the_last_tokens_logits_only(self):
        module = linear_floor.DecoderLinears(TINY.build(max_seq_len=64)).eval()
        x = torch.randn(1, 4, TINY.dims.hidden_size, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            logits, *kv = module(x)
            last, *_ = module(x[:, -1:])
        self.assertEqual(tuple(logits.shape), (1, 1, TINY.dims.vocab_size))
        # Tokens do not mix in the linears alone: the last token's logits are its own.
        torch.testing.assert_close(logits, last)
        self.assertEqual(tuple(kv[0].shape[:2]), (1, 4))

    def test_bad_flags_exit_2(self):
        command_line_testing.assert_each_exits_2(
            self,
            linear_floor.main,
            [
                (["--model", "nope"], "--model"),
                (["--steps", "0"], "--steps"),
                (["--tokens", "0"], "--tokens"),
                (["--threads", "x"], "--threads"),
                (["--bandwidth-mib", "-1"], "--bandwidth-mib"),
            ],
        )


if __name__ == "__main__":
    absltest.main()
