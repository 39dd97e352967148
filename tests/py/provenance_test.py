"""Node provenance cut down to its greatest ancestor (``graph.provenance``): debug handles are
unchanged; the partitioned program and the nested program's lowering start from chains one
level deep."""

from unittest import mock

import torch
from absl.testing import absltest
from executorch.exir import to_edge
from executorch.exir.debug_handle_utils import get_greatest_ancestor_node_identifier

import decoder_models as dm
import executorch_trt
from executorch_trt import TensorRTPartitioner
from executorch_trt.engines.portable import builder
from executorch_trt.graph.provenance import shorten_provenance


def _depth(node: torch.fx.Node) -> int:
    depth, chain = 0, node.meta.get("from_node") or []
    while chain:
        depth, chain = depth + 1, chain[-1].from_node
    return depth


def _traced(nodes) -> list[torch.fx.Node]:
    return [n for n in nodes if n.op not in ("placeholder", "output") and n.meta.get("from_node")]


class ShortenProvenanceTest(absltest.TestCase):
    def test_keeps_the_greatest_ancestor_only(self):
        gm = to_edge(dm.export_reordered_kv()).exported_program().graph_module
        nodes = _traced(gm.graph.nodes)
        self.assertNotEmpty(nodes)
        # Precondition: to_edge's re-traces left chains several levels deep.
        self.assertGreater(max(_depth(n) for n in nodes), 1)
        before = {n.name: get_greatest_ancestor_node_identifier(n) for n in nodes}
        shorten_provenance(gm)
        for node in nodes:
            self.assertEqual(get_greatest_ancestor_node_identifier(node), before[node.name])
            self.assertLen(node.meta["from_node"], 1, node.name)
            self.assertEqual(_depth(node), 1, node.name)


class PartitionTest(absltest.TestCase):
    def test_the_partitioned_program_is_one_level_deep(self):
        ep = to_edge(dm.export_methods(dm.TinyDecoder())["decode"]).exported_program()
        # Precondition: to_edge's re-traces left chains several levels deep.
        self.assertGreater(max(_depth(n) for n in _traced(ep.graph.nodes)), 1)
        TensorRTPartitioner().partition(ep)
        self.assertEqual({_depth(n) for n in _traced(ep.graph.nodes)}, {1})


class NestedLoweringTest(absltest.TestCase):
    def test_the_nested_program_starts_one_level_deep(self):
        depths: list[int] = []
        original = builder.EdgeProgramManager

        def recording(programs, *args, **kwargs):
            for ep in programs.values():
                depths.extend(_depth(n) for n in _traced(ep.graph.nodes))
            return original(programs, *args, **kwargs)

        with mock.patch.object(builder, "EdgeProgramManager", side_effect=recording):
            executorch_trt.export(dm.export_methods(dm.TinyDecoder())["decode"])
        self.assertNotEmpty(depths)
        self.assertEqual(set(depths), {1})


if __name__ == "__main__":
    absltest.main()
