"""modulescope: the module paths of a torch.onnx export's node names, and each hooked module's ONNX tensor, on the
export of tests/fixtures/torchexport (make_fixtures.py)."""
from __future__ import annotations

from accuscope.engine.graphs.modulescope import module_of, module_outputs
from accuscope.engine.sides.registry import load_graph
from support.data import FIXTURES

CALLED = ("conv bn relu layer1.0.conv1 layer1.0.bn1 layer1.0.relu1 layer1.0.conv2 layer1.0.bn2 layer1.0.relu2 layer1.0 "
          "layer1 pool flatten fc").split()  # the hooks' call order


def test_module_of_reads_full_paths_and_attribute_names():
    assert module_of("/layer1/layer1.0/conv1/Conv") == "layer1.0.conv1"
    assert module_of("/encoder/layers.0/self_attn/MatMul") == "encoder.layers.0.self_attn"
    assert module_of("/layer1/layer1.0/Add") == "layer1.0"
    assert module_of("/Add") == "" and module_of("node_Conv_0") == "" and module_of("Conv_0") == ""


def test_each_module_takes_its_scopes_last_node_a_folded_batchnorm_its_convs():
    found = module_outputs(load_graph(str(FIXTURES / "torchexport" / "model.onnx")), CALLED)
    assert found.tensor == {"bn": "/conv/Conv_output_0", "relu": "/relu/Relu_output_0",
                            "layer1.0.bn1": "/layer1/layer1.0/conv1/Conv_output_0",
                            "layer1.0.relu1": "/layer1/layer1.0/relu1/Relu_output_0",
                            "layer1.0.bn2": "/layer1/layer1.0/conv2/Conv_output_0",
                            "layer1.0.relu2": "/layer1/layer1.0/relu2/Relu_output_0",
                            "pool": "/pool/GlobalAveragePool_output_0", "flatten": "/flatten/Flatten_output_0",
                            "fc": "y"}
    assert found.folded == {"conv": "bn", "layer1.0.conv1": "layer1.0.bn1", "layer1.0.conv2": "layer1.0.bn2"}
    assert found.same == {"layer1.0": "layer1.0.relu2", "layer1": "layer1.0.relu2"}


def test_a_module_first_called_with_no_node_takes_nothing():
    """No module called before it to be folded into: a module without a node pairs with nothing."""
    found = module_outputs(load_graph(str(FIXTURES / "torchexport" / "model.onnx")), ["dropout", "fc"])
    assert found.tensor == {"fc": "y"} and not found.folded and not found.same
