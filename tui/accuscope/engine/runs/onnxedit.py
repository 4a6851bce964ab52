"""Small edits of ONNX models that conversions need before they can run on a model."""
from __future__ import annotations


def constants_as_initializers(model):
    """The model with every Constant node's tensor moved into the initializers (in place, returned).
    Exporters such as Paddle2ONNX keep weights in Constant nodes (PP-OCR does); onnxruntime's
    quantizer and mixed-precision block lists need them as initializers."""
    import onnx
    kept = []
    for node in model.graph.node:
        if node.op_type == "Constant" and [a.name for a in node.attribute] == ["value"]:
            tensor = onnx.TensorProto()
            tensor.CopyFrom(node.attribute[0].t)
            tensor.name = node.output[0]
            model.graph.initializer.append(tensor)
        else:
            kept.append(node)
    del model.graph.node[:]
    model.graph.node.extend(kept)
    return model
