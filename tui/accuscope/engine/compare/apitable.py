"""MindSpore -> PyTorch API correspondence, accuscope's own, written from the two frameworks' public API
documentation (mindspore.mint / mindspore.ops / mindspore.Tensor / mindspore.ops.Primitive, and
torch / torch.nn.functional / torch.Tensor / torch_npu), in msprobe's call-name vocabulary:

    MindSpore dump                         PyTorch dump
    Mint.{f}          mindspore.mint.f     Torch.{f}        torch.f
    MintFunctional.{f} mint.nn.functional  Functional.{f}   torch.nn.functional.f
    Functional.{f}    mindspore.ops.f      Torch.{f} / Functional.{f} (below)
    Tensor.{m}        mindspore.Tensor.m   Tensor.{m}
    Primitive.{P}     ops.P (a class)      Torch.{f} / Functional.{f} (below)
    Cell.{path}.{C}   nn.Cell class C      Module.{path}.{M} (CELLS below)

`targets(api)` gives the PyTorch API names a MindSpore API name may stand for, likeliest first (torch
often has one function in two places: `torch.relu` and `torch.nn.functional.relu`; the dump says which
the script called, so the pairing takes the first that the PyTorch side holds).
"""
from __future__ import annotations

from functools import lru_cache

# mindspore.ops functional name -> the PyTorch call (T: torch.*, F: torch.nn.functional.*, N: torch_npu)
_OPS = """
abs T acos T acosh T add T addbmm T addcdiv T addcmul T addmm T addmv T all T amax T amin T any T
arange T argmax T argmin T asin T asinh T atan T atan2 T atanh T baddbmm T bernoulli T bmm T
broadcast_to T cat T ceil T chunk T clamp T clip T concat:cat T cos T cosh T cumprod T cumsum T
div T divide T dropout F einsum T equal:eq T erf T exp T expand_dims:unsqueeze T flatten T flip T floor T
gather:index_select T gather_elements:gather T ge T greater:gt T greater_equal:ge T gt T isclose T isfinite T isinf T
isnan T le T lerp T less:lt T less_equal:le T log T log1p T log_softmax F logical_and T logical_not T
logical_or T logsumexp T lt T masked_fill T matmul T max T maximum T mean T min T minimum T mul T
multiply T narrow T ne T neg T norm T not_equal:ne T ones T ones_like T permute T pow T prod T
rand T randn T reciprocal T repeat_interleave T reshape T round T rsqrt T scatter T select:where T
sigmoid T sign T sin T sinh T softmax T sort T split T sqrt T square T squeeze T stack T std T sub T
subtract T sum T tan T tanh T tile T topk T transpose:permute T tril T triu T unsqueeze T var T
where T zeros T zeros_like T
dense:linear F conv1d F conv2d F conv3d F relu F relu6 F gelu F silu F elu F leaky_relu F
softplus F hardswish F mish F layer_norm F batch_norm F group_norm F instance_norm F
embedding F pad F interpolate F avg_pool1d F avg_pool2d F max_pool2d F adaptive_avg_pool2d F
cross_entropy F nll_loss F mse_loss F l1_loss F smooth_l1_loss F binary_cross_entropy F
binary_cross_entropy_with_logits F kl_div F one_hot F normalize F cosine_similarity F
scaled_dot_product_attention F
flash_attention_score:npu_fusion_attention N rms_norm:npu_rms_norm N rotary_position_embedding:npu_rotary_mul N
swiglu:npu_swiglu N
"""

# ops.Primitive classes -> the PyTorch call
_PRIMITIVES = """
Abs:abs T Add:add T AddN:sum T ArgMaxWithValue:max T Assign:copy_ X BatchMatMul:bmm T BiasAdd:add T
Cast:to X Concat:cat T Cos:cos T Div:div T Equal:eq T Erf:erf T Exp:exp T ExpandDims:unsqueeze T
FlashAttentionScore:npu_fusion_attention N Gather:index_select T GatherD:gather T GeLU:gelu F
Greater:gt T LayerNorm:layer_norm F Less:lt T Log:log T LogSoftmax:log_softmax F MatMul:matmul T
Maximum:maximum T Minimum:minimum T Mul:mul T Neg:neg T OneHot:one_hot F Pow:pow T RealDiv:div T
ReduceMax:amax T ReduceMean:mean T ReduceMin:amin T ReduceSum:sum T ReLU:relu F Reshape:reshape T
RmsNorm:npu_rms_norm N Rsqrt:rsqrt T Select:where T Sigmoid:sigmoid T SiLU:silu F Sin:sin T
Softmax:softmax T Split:split T Sqrt:sqrt T Square:square T Squeeze:squeeze T StridedSlice:__getitem__ X
Sub:sub T Tanh:tanh T Tile:tile T TopK:topk T Transpose:permute T Zeros:zeros T
"""

# mindspore.Tensor methods whose torch.Tensor name differs (any other keeps its name)
_TENSOR = "asnumpy:numpy astype:to expand_dims:unsqueeze swapaxes:transpose"

# nn.Cell class -> nn.Module class (any other keeps its name)
CELLS = {"Dense": "Linear", "SequentialCell": "Sequential", "CellList": "ModuleList", "CellDict": "ModuleDict",
         "Conv2dTranspose": "ConvTranspose2d", "Conv1dTranspose": "ConvTranspose1d"}

_PREFIX = {"T": "Torch", "F": "Functional", "N": "NPU", "X": "Tensor"}
_OTHER = {"Torch": ("Functional", "Tensor"), "Functional": ("Torch", "Tensor"), "NPU": (), "Tensor": ("Torch",)}
MS_TYPES = ("Mint", "MintFunctional", "Functional", "Tensor", "Primitive", "Distributed")  # what the table covers


def _table(text: str, primitive: bool) -> dict[str, str]:
    found, words = {}, text.split()
    for name, where in zip(words[::2], words[1::2]):
        ms, _, pt = name.partition(":")
        found[ms] = f"{_PREFIX[where]}.{pt or ms}"
    return found


OPS = _table(_OPS, False)
PRIMITIVES = _table(_PRIMITIVES, True)
TENSOR = dict(pair.split(":") for pair in _TENSOR.split())


@lru_cache(maxsize=4096)
def targets(api: str) -> tuple[str, ...]:
    """`Mint.matmul` -> ("Torch.matmul", "Functional.matmul", "Tensor.matmul"): the PyTorch API names a
    MindSpore API (`{type}.{name}`) may stand for, likeliest first; () where the table has none."""
    kind, _, name = api.partition(".")
    if kind == "Mint":
        first = f"Torch.{name}"
    elif kind == "MintFunctional":
        first = f"Functional.{name}"
    elif kind == "Functional":
        first = OPS.get(name, "")
    elif kind == "Primitive":
        first = PRIMITIVES.get(name, "")
    elif kind == "Tensor":
        first = f"Tensor.{TENSOR.get(name, name)}"
    elif kind == "Distributed":
        first = api
    else:
        first = ""
    if not first:
        return ()
    head, _, tail = first.partition(".")
    return (first, *(f"{other}.{tail}" for other in _OTHER.get(head, ())))


def cell_class(name: str) -> str:
    """A MindSpore Cell class name as the PyTorch Module class of the same layer."""
    return CELLS.get(name, name)
