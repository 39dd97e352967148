"""Which inputs of an ``ExportedProgram`` its graph mutates (buffers, user inputs, parameters,
buffers inside ``torch.cond`` branches), and the writes the delegate refuses
(``check_supported_mutations``, ``buffers_written_in_cond_branches``).

``torch.export.export`` (torch 2.13) returns a *non-functional* graph: an in-place update such
as ``self.cache.index_copy_(1, pos, k)`` or ``self.cache[:, pos] = k`` stays an in-place node
(``index_copy_``, ``index_put_`` on a ``slice`` view, ``copy_``), and
``graph_signature.buffers_to_mutate`` / ``user_inputs_to_mutate`` stay empty until the program
is functionalised (``run_decompositions``, which ``to_edge`` runs). ``mutated_inputs`` reads
both: the signature (a functional program, e.g. an edge program) and the graph (each write
argument of an op schema, ``Tensor(a!)``, traced back through views and through the results of
other in-place ops to the placeholder it writes). That costs one pass over the nodes, with no
re-tracing; for a functional program it equals the signature.

A mutation an op hides from its schema (e.g. ``mutates_args=[]``) is not seen, exactly as
ExecuTorch does not see it (the tensor then is a constant, not state).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable

import torch
from torch.export import ExportedProgram

from executorch_trt.graph.nodes import layout_text, same_shape


@dataclasses.dataclass(frozen=True)
class MutatedInputs:
    """What a program writes.

    * ``buffers``: ``{buffer FQN: op that writes it}`` (op = schema name, e.g.
      ``"aten::index_copy_"``; for a functional program, the op computing the new value).
    * ``user_inputs``: ``{user input name: op that writes it}``, in the same form.
    * ``parameters``: ``{parameter FQN: op that writes it}``, in the same form.
    """

    buffers: dict[str, str]
    user_inputs: dict[str, str]
    parameters: dict[str, str] = dataclasses.field(default_factory=dict)


def _write_arguments(node: torch.fx.Node) -> Iterable[torch.fx.Node]:
    """The nodes passed to ``node`` as arguments its schema marks as written (``Tensor(a!)``)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return []
    written: list[torch.fx.Node] = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        if i < len(node.args) and not arg.kwarg_only:
            value = node.args[i]
        else:
            value = node.kwargs.get(arg.name)
        values = value if isinstance(value, (list, tuple)) else [value]
        written.extend(v for v in values if isinstance(v, torch.fx.Node))
    return written


def _aliased_argument(node: torch.fx.Node) -> torch.fx.Node | None:
    """For a node whose result aliases one of its arguments (a view such as ``slice``,
    ``select``, ``view``, ``transpose``; the result of an in-place op; ``getitem`` of a
    multi-output view op such as ``split``), that argument; else ``None``."""
    if node.op != "call_function":
        return None
    if node.target is operator.getitem:
        base = node.args[0]
        return base if isinstance(base, torch.fx.Node) and _aliased_argument(base) else None
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.returns or schema.returns[0].alias_info is None:
        return None
    # ``Tensor(a)`` returns name their alias set; ``Tensor(a)[]`` (split, unbind, chunk) shows
    # an empty set on the list, whose elements alias the argument marked ``Tensor(a -> *)``.
    alias_set = schema.returns[0].alias_info.before_set
    for i, arg in enumerate(schema.arguments):
        info = arg.alias_info
        if info is not None and (
            info.before_set & alias_set or (not alias_set and "*" in info.after_set)
        ):
            value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            return value if isinstance(value, torch.fx.Node) else None
    return None


def _base_placeholder(node: torch.fx.Node) -> torch.fx.Node | None:
    seen = set()
    current: torch.fx.Node | None = node
    while current is not None and current.op != "placeholder" and current not in seen:
        seen.add(current)
        current = _aliased_argument(current)
    return current if current is not None and current.op == "placeholder" else None


def _op_name(node: torch.fx.Node) -> str:
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return str(node.target)
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


def mutated_inputs(ep: ExportedProgram) -> MutatedInputs:
    """The buffers, user inputs and parameters that ``ep`` writes (see the module docstring for
    how).

    Reads ``ep.graph_signature`` (``buffers_to_mutate``, ``user_inputs_to_mutate``,
    ``parameters_to_mutate``) and every top-level ``call_function`` node whose schema writes an
    argument. Raises nothing.
    """
    sig = ep.graph_signature
    nodes = {n.name: n for n in ep.graph.nodes}

    def writer(output_name: str) -> str:
        node = nodes.get(output_name)
        return _op_name(node) if node is not None and node.op == "call_function" else "the graph"

    buffers = {fqn: writer(out) for out, fqn in sig.buffers_to_mutate.items()}
    user_inputs = {name: writer(out) for out, name in sig.user_inputs_to_mutate.items()}
    parameters = {fqn: writer(out) for out, fqn in sig.parameters_to_mutate.items()}
    user_names = set(sig.user_inputs)
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        for written in _write_arguments(node):
            base = _base_placeholder(written)
            if base is None:
                continue
            if base.name in sig.inputs_to_buffers:
                buffers.setdefault(sig.inputs_to_buffers[base.name], _op_name(node))
            elif base.name in user_names:
                user_inputs.setdefault(base.name, _op_name(node))
            elif base.name in sig.inputs_to_parameters:
                parameters.setdefault(sig.inputs_to_parameters[base.name], _op_name(node))
    return MutatedInputs(buffers=buffers, user_inputs=user_inputs, parameters=parameters)


def buffers_written_in_cond_branches(ep: ExportedProgram) -> dict[str, str]:
    """The buffers of ``ep`` that a ``torch.cond`` branch writes in place
    (``{FQN: "op in branch"}``), nested conds included. ``torch.export`` keeps such a write
    in place inside the branch; ``to_edge`` then fails (``aten.copy_.default is not
    functional``). A write an op hides from its schema (``executorch::update_cross_attn_cache``)
    is not seen. Raises nothing."""
    found: dict[str, str] = {}

    def scan(gm: torch.fx.GraphModule, fqn_of: dict[str, str], branch: str | None) -> None:
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            if branch is not None:
                for written in _write_arguments(node):
                    base = _base_placeholder(written)
                    if base is not None and base.name in fqn_of:
                        found.setdefault(fqn_of[base.name], f"{_op_name(node)} in {branch}")
            if node.target is not torch.ops.higher_order.cond:
                continue
            operands = node.args[3] if len(node.args) > 3 else ()
            for ref in node.args[1:3]:
                if not isinstance(ref, torch.fx.Node) or not isinstance(ref.target, str):
                    continue
                sub = getattr(gm, ref.target, None)
                if not isinstance(sub, torch.fx.GraphModule):
                    continue
                inner: dict[str, str] = {}
                params = [n for n in sub.graph.nodes if n.op == "placeholder"]
                for param, operand in zip(params, operands, strict=False):
                    base = (
                        _base_placeholder(operand) if isinstance(operand, torch.fx.Node) else None
                    )
                    if base is not None and base.name in fqn_of:
                        inner[param.name] = fqn_of[base.name]
                scan(sub, inner, str(ref.target))

    scan(ep.graph_module, dict(ep.graph_signature.inputs_to_buffers), None)
    return found


def _subjects(method: str | None, found: dict[str, str], item: str) -> tuple[str, str, str]:
    """``(where, listed, first)`` for an error about ``found`` (``{name: op}``): the method,
    every name formatted by ``item`` (``{name}``, ``{op}``) in name order, and the first name."""
    where = f"method {method!r}" if method else "the method"
    listed = ", ".join(item.format(name=repr(n), op=op) for n, op in sorted(found.items()))
    return where, listed, sorted(found)[0]


def cond_branch_write_error(found: dict[str, str], method: str | None = None) -> ValueError:
    """The ``ValueError`` for buffers that a ``torch.cond`` branch writes in place
    (``buffers_written_in_cond_branches``)."""
    where, listed, first = _subjects(method, found, "buffer {name} ({op})")
    return ValueError(
        f"executorch_trt: {where} updates {listed} inside a torch.cond branch. torch.export keeps "
        "such an update in place inside the branch and ExecuTorch's to_edge refuses it "
        "('aten.copy_.default is not functional'). Return the new value from both branches and "
        f"write it after the cond (new = torch.cond(pred, t, f, ops); self.{first}.copy_(new)); "
        "a cross-attention cache filled once is written with executorch::update_cross_attn_cache "
        "(docs/guide/cross_attention.md)."
    )


def mutated_user_input_error(inputs: dict[str, str], method: str | None = None) -> ValueError:
    """The ``ValueError`` for user inputs that a program mutates (``{input name: op}``).

    The rule (``docs/contract.md`` 1, "Ownership"): a cache passed as a method *input* and updated
    in the graph is rejected. ExecuTorch would return its new value as an extra first output and
    leave the caller's tensor unchanged, and the delegate does not update method inputs in place; a
    cache must be a buffer of the module, which the program owns (and which an application can still
    own the memory of, bound by name).
    """
    where, listed, first = _subjects(method, inputs, "input {name} (written by {op})")
    return ValueError(
        f"executorch_trt: {where} mutates {listed}. A tensor passed as a method input and "
        "updated in place (e.g. forward(cache, x, pos) with cache.index_copy_(...)) is not "
        "supported: ExecuTorch would return its new value as an extra output and leave the "
        "caller's tensor unchanged. Register the cache as a buffer of the module instead "
        f"(self.register_buffer({first!r}, torch.zeros(...)) and update self.{first}), so the "
        "program owns it and the delegate updates it in place across calls. To keep the memory "
        "in the application anyway, export with alloc_mutable_buffers=False and "
        "emit_mutable_buffer_names=True and bind the buffer by name "
        "(Method::get_attribute, see README 'Owning the cache memory yourself')."
    )


def mutated_parameter_error(parameters: dict[str, str], method: str | None = None) -> ValueError:
    """The ``ValueError`` for parameters that a program updates in place (``{FQN: op}``).

    The rule (``docs/contract.md`` 1, "Ownership"): state that persists across calls is a mutable
    buffer (``BUFFER_MUTATION``). A parameter is a constant of the program: ExecuTorch returns its
    new value as an extra output (``PARAMETER_MUTATION``) and the next call reads the exported
    value again, and the delegate cannot lower it at all.
    """
    where, listed, first = _subjects(method, parameters, "parameter {name} (written by {op})")
    attr = first.rsplit(".", 1)[-1]
    return ValueError(
        f"executorch_trt: {where} updates {listed} in place. A parameter is a constant of the "
        "program: its update would not persist to the next call. Keep state that a method "
        "updates in a buffer of the module instead: delete the nn.Parameter and "
        f"register_buffer({attr!r}, <its value>) on the module that owns {first!r}; the "
        "delegate then updates it in place across calls."
    )


def buffers_named_like_inputs(
    ep: ExportedProgram, mutated: MutatedInputs | None = None
) -> dict[str, str]:
    """The mutated buffers of ``ep`` whose fully qualified name is also the name of one of its
    user inputs (``{name: op that writes the buffer}``), e.g. ``self.x.add_(x)`` in
    ``forward(self, x)``.

    ExecuTorch 1.5.1's ``insert_write_back_for_buffers_pass`` (run by ``to_executorch``) looks
    up the tensor a ``BUFFER_MUTATION`` writes back to in one table keyed by buffer FQN *and*
    user-input name, so the input wins: the new value is copied into the input and the buffer
    never changes (plain ExecuTorch too). ``mutated``: ``mutated_inputs(ep)`` when the caller
    has it. Raises nothing."""
    user_names = set(ep.graph_signature.user_inputs)
    buffers = (mutated or mutated_inputs(ep)).buffers
    return {fqn: op for fqn, op in buffers.items() if fqn in user_names}


def buffer_named_like_input_error(names: dict[str, str], method: str | None = None) -> ValueError:
    """The ``ValueError`` for ``buffers_named_like_inputs``' result (``{name: op}``)."""
    where, listed, first = _subjects(method, names, "{name} (written by {op})")
    return ValueError(
        f"executorch_trt: {where} updates buffer {listed}, which has the name of one of the "
        "method's inputs. ExecuTorch 1.5.1 (to_executorch's insert_write_back_for_buffers_pass) "
        "finds the tensor to write the update back to by name and takes the input, so the "
        "buffer would never change and later calls would return wrong values. Rename the "
        f"forward argument (e.g. forward(self, {first}_in)) or the buffer."
    )


def _buffer_updates(ep: ExportedProgram) -> list[tuple[str, torch.fx.Node, torch.fx.Node]]:
    """``(buffer FQN, new value node, buffer placeholder)`` of each ``BUFFER_MUTATION`` of
    functional program ``ep`` whose value and buffer both have fake values (``meta["val"]``)."""
    sig = ep.graph_signature
    nodes = {n.name: n for n in ep.graph.nodes}
    buffer_nodes = {
        sig.inputs_to_buffers[name]: node
        for name, node in nodes.items()
        if name in sig.inputs_to_buffers
    }
    found = []
    for out, fqn in sig.buffers_to_mutate.items():
        value = nodes.get(out)
        buffer = buffer_nodes.get(fqn)
        if value is None or buffer is None:
            continue
        if isinstance(value.meta.get("val"), torch.Tensor) and isinstance(
            buffer.meta.get("val"), torch.Tensor
        ):
            found.append((fqn, value, buffer))
    return found


def mismatched_buffer_mutations(ep: ExportedProgram) -> dict[str, tuple[str, str]]:
    """The buffers of functional program ``ep`` whose ``BUFFER_MUTATION`` value differs from
    the buffer in dtype or shape (``{buffer FQN: ("float16 [3, 4]", "float32 [4]")}``: the
    buffer's dtype and shape, then its new value's).

    A buffer's new value always has its dtype and shape in eager PyTorch; a value that does not
    is torch's functionalisation dropping a whole-buffer ``copy_``'s conversion or broadcast
    (``passes/copy_conversions.py``), so what the method reads after that ``copy_`` is wrong
    too, or ExecuTorch's ``to_edge`` widening a 0-d buffer's arithmetic with a Python scalar
    (``passes/scalar_operands.py``). Only nodes with fake values are compared. Raises nothing."""
    found: dict[str, tuple[str, str]] = {}
    for fqn, value, buffer in _buffer_updates(ep):
        new, old = value.meta["val"], buffer.meta["val"]
        if new.dtype != old.dtype or not same_shape(new, old):
            found[fqn] = (layout_text(old.dtype, old.shape), layout_text(new.dtype, new.shape))
    return found


def mismatched_buffer_mutation_error(
    found: dict[str, tuple[str, str]], prepared: bool = False
) -> ValueError:
    """The ``ValueError`` for ``mismatched_buffer_mutations``' result; ``prepared``: the
    program went through the partitioner's preparation before decomposition
    (``passes.pipeline.prepare_aten_program``), so only a change in the model helps."""
    listed = "; ".join(
        f"buffer {fqn!r} ({buffer}) would be updated with a {value} value"
        for fqn, (buffer, value) in sorted(found.items())
    )
    causes = (
        "Either torch.export's functionalisation dropped the dtype conversion or broadcast of a "
        "whole-buffer copy_ (self.buf.copy_(x) or self.buf[:] = x), or ExecuTorch's to_edge "
        "widened a 0-d buffer's arithmetic with a Python scalar (self.count.add_(1) on int32 "
        "computed in int64)."
    )
    in_model = (
        "convert in the model: self.buf.copy_(x.to(self.buf.dtype).expand_as(self.buf)), "
        "self.count.add_(torch.tensor(1, dtype=self.count.dtype))."
    )
    if prepared:
        remedy = (
            "The delegate keeps both forms as eager has them where that is exact, but not this "
            "one (a scalar the buffer's dtype does not hold, a float16/bfloat16 product, an "
            "operand that is not a plain scalar); " + in_model
        )
    else:
        remedy = (
            "Lower with to_edge_transform_and_lower(..., partitioner=[TensorRTPartitioner()]) "
            "or executorch_trt.export, whose partitioner keeps both as eager has them before "
            "decomposition, or " + in_model
        )
    return ValueError(
        f"executorch_trt: {listed}, so the values the method reads after the update would be "
        f"wrong too. {causes} {remedy}"
    )


def check_supported_mutations(ep: ExportedProgram, method: str | None = None) -> None:
    """Raises the ``ValueError`` for the first write of ``ep`` the delegate refuses, naming
    ``method``: a mutated user input (``mutated_user_input_error``), a parameter updated in
    place (``mutated_parameter_error``), a buffer named like a user input
    (``buffer_named_like_input_error``)."""
    mutated = mutated_inputs(ep)
    if mutated.user_inputs:
        raise mutated_user_input_error(mutated.user_inputs, method)
    if mutated.parameters:
        raise mutated_parameter_error(mutated.parameters, method)
    named_like_inputs = buffers_named_like_inputs(ep, mutated)
    if named_like_inputs:
        raise buffer_named_like_input_error(named_like_inputs, method)
