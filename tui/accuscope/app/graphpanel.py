"""What the graph screen's detail panel says, as rich markup lines: the op under the cursor (its
rows in the result table, the framework ops fused into an offline-model device op, its inputs and
outputs with their producers and consumers, its attributes) and the submodel chosen for export.
The screen (graphscreen.py) puts them together with the last export's lines."""
from __future__ import annotations

from ..engine.compare.results import ResultTable
from ..engine.graphs.graph import Graph, Node
from ..engine.graphs.lanes import reads
from ..engine.graphs.subgraph import Selection
from . import formatting as fmt
from .formatting import shown
from .graphview import OpResults, shape_text, value_text
from .opcolumns import MARK_EXEMPT, MARK_FAIL, MARK_INVALID


def node_lines(graph: Graph, results: OpResults | None, table: ResultTable, node: Node, position: int) -> list[str]:
    """The op at `position` of `graph`: what it is, its rows in `table` as `results` badges them, the
    framework ops fused into it, its inputs and outputs with their producers and consumers, its
    attributes."""
    lines = [f"[b]{shown(node.name)}[/]", f"{shown(node.type)} · op {position + 1} of {len(graph.nodes)} · "
             f"seq {node.seq_id}" + (f" · subgraph {shown(node.subgraph)}" if node.subgraph else "")]
    if results is not None:
        rows = results.rows[position]
        badge = results.own_badge(position)
        if "module" in node.attrs:
            group = results.badge(position)
            fails, _, total = group.text.partition("/")
            lines.append(f"module {shown(node.attrs['module'])}: " + (f"{fails} of {total} calls failing"
                                                                    if group.text else "no call has a row"))
        if not rows:
            lines.append("result: no row in the result table")
        else:
            cols = table.columns
            if badge.state == "none":
                lines.append("result: its output has no row (fused into a device op); its input rows:")
            else:
                word = {"fail": "failing", "pass": "passing", "invalid": "not compared", "exempt": "exempt"}
                lines.append(f"result: {shown(badge.mark.strip() or '✓')} {word[badge.state]}"
                             + (f", worst {badge.key or results.metric} {shown(badge.text)}" if badge.text else "")
                             + f" ({len(rows)} row{'s' if len(rows) != 1 else ''})")
            for r in rows[:8]:
                value = results.values[r]
                mark = (MARK_FAIL if results.fail[r] else MARK_INVALID if results.invalid[r]
                        else MARK_EXEMPT if results.exempt[r] else " ")
                text = fmt.number(float(value), 9) if results.metric else ""
                reason = str(cols["reason"][r])
                slot = fmt.slot(str(cols["tensor"][r]), cols["io"][r], cols["param"][r])
                lines.append(f"  {shown(mark)} #{cols['index'][r]} {slot}"
                             f" {results.metric} {text}" + (f"  {shown(fmt.fit(reason, 50))}" if reason else ""))
            if len(rows) > 8:
                lines.append(f"  … {len(rows) - 8} more rows")
    if node.fused is not None:
        if node.fused:
            lines += ["", f"[b]fused framework ops[/] ({len(node.fused)})"]
            lines += [f"  {shown(f)}" for f in node.fused]
        else:
            lines += ["", "[b]fused framework ops[/]: none (device-only op inserted by the converter)"]
    lines += ["", f"[b]inputs[/] ({len(node.inputs)})"]
    for j, (t, s) in enumerate(zip(node.inputs, node.input_shapes)):
        hit = graph.producer(t)
        where = (f"← {hit[0].name}" if hit else "← network input" if t in graph.inputs
                 else "weight" if t in graph.weights else "← (no producer)")
        lines.append(f"  {j} {shown(t)} {shown(shape_text(s))}  {shown(where)}")
    hidden = [t for t in reads(node) if t not in node.inputs]
    for t in hidden:
        hit = graph.producer(t)
        lines.append(f"  body reads {shown(t)}" + (f"  ← {shown(hit[0].name)}" if hit else ""))
    lines += ["", f"[b]outputs[/] ({len(node.outputs)})"]
    for j, (t, s, d) in enumerate(zip(node.outputs, node.output_shapes, node.output_dtypes)):
        users = [c.name for c, _ in graph.consumers(t)]
        more = f" … {len(users) - 4} more" if len(users) > 4 else ""
        where = "→ " + ", ".join(users[:4]) + more if users else ""
        if t in graph.outputs:
            where = (where + " " if where else "") + "→ network output"
        lines.append(f"  {j} {shown(t)} {shown(shape_text(s))} {shown(d or '')}  {shown(where or '(unused)')}")
    attrs = [(k, v) for k, v in node.attrs.items() if not k.startswith("_")]
    internal = [(k, v) for k, v in node.attrs.items() if k.startswith("_") and k != "_subgraph_inputs"]
    if attrs or internal:
        lines += ["", f"[b]attributes[/] ({len(attrs) + len(internal)})"]
        for k, v in attrs + internal:
            lines.append(f"  {shown(k)} = {shown(value_text(v))}")
    return lines


def selection_lines(graph: Graph, start: int | None, end: int | None, selection: Selection | None,
                    framework_problem: str) -> list[str]:
    """The submodel between the ops at `start` and `end` (either may be unmarked yet): its `selection`
    once both are, and why an offline model's selection has no framework ops yet."""
    if start is None and end is None:
        return ["", "[dim]s: mark the start op, e: the end op of a submodel to export[/]"]
    lines = ["", "[b]submodel[/]"]
    if start is not None:
        lines.append(f"  S start {shown(graph.nodes[start].name)}")
    if end is not None:
        lines.append(f"  E end   {shown(graph.nodes[end].name)}")
    if selection is None:
        lines.append("  [dim]" + ("e: mark the end op" if end is None else "s: mark the start op") + "[/]")
        return lines
    lines += [f"  {shown(s)}" for s in selection.describe()]
    if graph.is_device and selection.framework is None:
        lines.append("  " + shown(framework_problem or "framework model: loading…"))
    lines.append("  [dim]x: export and re-test[/]")
    return lines
