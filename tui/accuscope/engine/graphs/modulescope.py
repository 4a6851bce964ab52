"""The module paths a `torch.onnx.export` keeps in its node names, read back: which ONNX tensor holds a
PyTorch module's output, so that a folder of forward-hook tensors named by module (`layer1.0.conv1.0.4.pt`)
reads through the export of the same model (`--golden-model model.onnx`) and pairs as a dump of it does.

The TorchScript exporter (`dynamo=False`) names each node by the scopes it ran in and its type:
`/layer1/layer1.0/conv1/Conv`, a scope being the module's full path (`layer1.0`) or its attribute name under
the scope before it (`conv1`): the node's module is `layer1.0.conv1`. A module's output is the first output of
the last node in its scope (its submodules' included), in the graph's order: a block's is its closing ReLU's.

Two cases the export changes, read from the modules' execution order (the hooks' call order):

- a module with no node of its own (a BatchNorm the export folds into the Conv before it, a Dropout at
  inference) holds the value of the module called just before it: it takes that module's tensor, and that
  module is `folded` (its own output is a value no tensor of the export holds: a Conv's before its BatchNorm);
- modules whose scopes end on the same node (a block, its Sequential and its last ReLU) hold one value: the
  first one called takes the tensor, the others are `same` as it.

The dynamo exporter (torch 2.9's default) names nodes `node_Conv_0`, keeping the scopes in metadata that is
not read here: such a graph has no module path, and nothing is found.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .graph import Graph


def module_of(node_name: str) -> str:
    """`/layer1/layer1.0/conv1/Conv` -> `layer1.0.conv1`; "" for a name without scopes (`/Add`, `node_Conv_0`)."""
    if not node_name.startswith("/"):
        return ""
    path = ""
    for scope in node_name[1:].split("/")[:-1]:
        path = scope if not path or scope.startswith(path + ".") else f"{path}.{scope}"
    return path


@dataclass
class ModuleOutputs:
    tensor: dict[str, str] = field(default_factory=dict)  # module -> the ONNX tensor holding its output
    folded: dict[str, str] = field(default_factory=dict)  # module -> the module after it, folded into it
    same: dict[str, str] = field(default_factory=dict)  # module -> the module whose tensor holds its value


def module_outputs(graph: Graph, modules: Iterable[str]) -> ModuleOutputs:
    """Each of `modules` (paths, in call order) read through `graph`'s scopes (see the module docstring)."""
    last: dict[str, str] = {}  # a scope -> the first output of its last node
    for node in graph.nodes:
        path = module_of(node.name)
        while path and node.outputs:
            last[path] = node.outputs[0]
            path = path.rpartition(".")[0]
    found = ModuleOutputs()
    if not last:
        return found
    owner: dict[str, str] = {}
    before = ""
    for module in modules:
        tensor = last.get(module)
        if tensor is None and before in found.tensor:  # no node of its own: the export folded it into `before`
            tensor = found.tensor.pop(before)
            found.folded[before] = module
        elif tensor is not None and tensor in owner:
            found.same[module] = owner[tensor]
            tensor = None
        if tensor is not None:
            found.tensor[module] = tensor
            owner[tensor] = module
        before = module
    return found
