"""Node provenance (``node.meta["from_node"]``) cut down to what ExecuTorch reads from it.

torch.fx records, on every node a pass creates, a ``NodeSource`` chain back to the node it came
from, and each new ``NodeSource`` deep-copies the whole chain of its source. Every re-trace
(each ExecuTorch or XNNPACK pass) adds a level, so by the nested program's XNNPACK passes a
chain is dozens of levels deep and copying it dominated the lowering (a quarter of a 135M
decoder's export).

ExecuTorch reads only a chain's greatest ancestor: the debug handle of a node is that of the
first node with the same ancestor (``exir.debug_handle_utils.get_greatest_ancestor_node_
identifier``, which follows ``from_node[-1]`` to the root). ``shorten_provenance`` keeps exactly
that root, so debug handles, and the program, are unchanged.
"""

from __future__ import annotations

import torch
from executorch.exir.graph_module import get_control_flow_submodules
from torch.fx.traceback import NodeSource

FROM_NODE = "from_node"


def _root(chain: list[NodeSource]) -> NodeSource:
    source = chain[-1]
    while source.from_node:
        source = source.from_node[-1]
    return source


def shorten_provenance(graph_module: torch.fx.GraphModule) -> None:
    """Replaces every node's provenance chain by its greatest ancestor alone (module
    docstring), control-flow branches included. Nodes without provenance are left as they
    are."""
    for node in graph_module.graph.nodes:
        chain = node.meta.get(FROM_NODE)
        if chain:
            node.meta[FROM_NODE] = [_root(chain)]
    for _, submodule, _ in get_control_flow_submodules(graph_module):
        shorten_provenance(submodule)
