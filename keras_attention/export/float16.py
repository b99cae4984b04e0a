"""Float16 weights written into a converted float32 `.tflite` model.

The TFLite converter's own float16 option (`supported_types=[tf.float16]`)
quantizes the weights before it moves the loop-invariant constants of a
`WHILE` into the loop body. A weight the search loop reads (the target
embedding table, the attention's query projection) then stays in the calling
graph as `DEQUANTIZE(float16 constant)`, and its float32 result becomes one of
the loop's carried values: the `WHILE` kernel copies every carried value from
the body's outputs to its inputs at each step, so a translator of 8,000
subwords copies its 4 MB embedding table once per output token. The float32
conversion has no such copies (the constants are in the body).

`float16_weights` starts from the float32 conversion instead: each float32
constant of at least `MIN_ELEMENTS` values becomes a float16 constant read by a
`DEQUANTIZE` at the top of the same subgraph, so the weights stay where the
float32 model has them. `DEQUANTIZE` of a constant runs once and keeps its
result; XNNPACK reads the float16 weights of a `FULLY_CONNECTED` directly.
Smaller constants (scalars, masks) stay float32: they weigh little and each
would cost one more operator per loop step.

Two rules keep the products fast in LiteRT.js (XNNPACK on WebAssembly), which
without them ran the trained translator's beam search three times as slowly
with float16 weights as with float32 (docs/deploy.md):

- the bias of a product follows its weights, whatever its size: a
  `FULLY_CONNECTED` of float16 weights and a float32 bias runs far more
  slowly there than one whose weights and bias are both float16 or both float32;
  where the bias cannot be float16 (beyond its range), the weights stay
  float32 too;
- a weight that products and other operators both read (an embedding table
  tied to the output layer: `GATHER` and `FULLY_CONNECTED`) gets two
  `DEQUANTIZE`s, one the products alone read: XNNPACK then takes the
  dequantized weight as a constant. The table is held twice in float32 at run
  time.
"""

import flatbuffers
import numpy as np

from keras_attention.export.operators import tflite_schema

MIN_ELEMENTS = 1024
# Operators whose input 1 is a weight and input 2 its bias.
_WEIGHTS_AND_BIAS = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D")
FLOAT16_MAX = float(np.finfo(np.float16).max)
# What the converter's float16 models declare: float16 weights, float32 sums.
REDUCED_PRECISION = (b"reduced_precision_support", b"fp16accfp32")
_DEQUANTIZE_FLOAT16_VERSION = 3  # the first DEQUANTIZE version with float16 input
_FILE_IDENTIFIER = b"TFL3"


def float16_weights(data, min_elements=MIN_ELEMENTS):
    """A float32 `.tflite` model (bytes) with its large float32 weights in float16.

    Args:
        data: the flatbuffer of a float32 model (`export.convert(..., None)`).
        min_elements: constants with fewer values stay float32.

    Returns:
        bytes: the model; every subgraph computes what it computed, each
        converted weight rounded to float16 once, at load.

    A constant stays float32 when a subgraph takes it as an input or gives it
    as an output, when it holds a value beyond float16's range (±65,504), or
    when a tensor of another type shares its buffer. The bias of a product
    (`FULLY_CONNECTED`, `CONV_2D`, `DEPTHWISE_CONV_2D`) is float16 exactly
    when its weights are, below `min_elements` too.
    """
    schema = tflite_schema()
    if data[4:8] != _FILE_IDENTIFIER:
        raise ValueError("Not a TFLite flatbuffer: its identifier is not TFL3.")
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    users, keep, small = _constant_users(model, schema, min_elements)
    convertible = {
        index
        for index in set(users) - keep
        # `<=` is False for NaN too
        if np.all(np.abs(np.frombuffer(bytes(model.buffers[index].data), "<f4")) <= FLOAT16_MAX)
    }
    converted = _with_their_biases(convertible - small, convertible, _products(model, schema))
    for index in sorted(converted):
        values = np.frombuffer(bytes(model.buffers[index].data), "<f4")
        half = values.astype("<f2")
        model.buffers[index].data = np.frombuffer(half.tobytes(), np.uint8)
    if not converted:
        return bytes(data)
    dequantize = _dequantize_opcode(model, schema)
    per_subgraph = {}
    for index in converted:
        for subgraph, tensor in users[index]:
            per_subgraph.setdefault(subgraph, []).append(tensor)
    codes = _product_codes(schema)
    for s, tensors in sorted(per_subgraph.items()):
        _dequantize_in(
            model.subgraphs[s],
            sorted(tensors),
            dequantize,
            schema,
            lambda op: _builtin_code(model, op) in codes,
        )
    _add_metadata(model, schema, *REDUCED_PRECISION)
    builder = flatbuffers.Builder(len(data) // 2 + 1024)
    builder.Finish(model.Pack(builder), file_identifier=_FILE_IDENTIFIER)
    return bytes(builder.Output())


def _with_their_biases(chosen, convertible, products):
    """`chosen` buffers, with the bias of each product whose weights are in it
    (and the weights of each whose bias is); a product whose weights or bias is
    not `convertible` keeps both float32."""
    allowed = set(convertible)
    changed = True
    while changed:  # only removes: ends
        changed = False
        for pair in products:
            if len(allowed & set(pair)) == 1:
                allowed -= set(pair)
                changed = True
    chosen = set(chosen) & allowed
    changed = True
    while changed:  # only adds, within `allowed`: ends
        changed = False
        for pair in products:
            if len(chosen & set(pair)) == 1:
                chosen |= set(pair)
                changed = True
    return chosen


def _products(model, schema):
    """(weights buffer, bias buffer) of each product with constant weights and bias."""
    codes = _product_codes(schema)
    pairs = set()
    for subgraph in model.subgraphs:
        for op in subgraph.operators or []:
            inputs = _ints(op.inputs)
            if _builtin_code(model, op) not in codes or len(inputs) < 3:
                continue
            weights, bias = inputs[1], inputs[2]
            if weights < 0 or bias < 0:  # -1: no bias
                continue
            buffers = subgraph.tensors[weights].buffer, subgraph.tensors[bias].buffer
            if all(buffers):
                pairs.add(buffers)
    return sorted(pairs)


def _product_codes(schema):
    return {getattr(schema.BuiltinOperator, name) for name in _WEIGHTS_AND_BIAS}


def _builtin_code(model, op):
    code = model.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def _constant_users(model, schema, min_elements):
    """{buffer: [(subgraph, tensor)]} of the float32 constants, the buffers to
    keep float32, and those below `min_elements` (float16 only as a bias)."""
    users, keep, small = {}, set(), set()
    for m in model.metadata or []:
        keep.add(m.buffer)
    for s, subgraph in enumerate(model.subgraphs):
        boundary = set(_ints(subgraph.inputs)) | set(_ints(subgraph.outputs))
        for t, tensor in enumerate(subgraph.tensors):
            buffer = model.buffers[tensor.buffer] if tensor.buffer else None
            if buffer is None or buffer.data is None or len(buffer.data) == 0:
                continue  # not a constant (buffer 0 is the empty one), or stored outside
            users.setdefault(tensor.buffer, []).append((s, t))
            size = int(np.prod(_ints(tensor.shape))) if tensor.shape is not None else 1
            if (
                tensor.type != schema.TensorType.FLOAT32
                or t in boundary
                or tensor.isVariable
                or len(buffer.data) != 4 * size
            ):
                keep.add(tensor.buffer)
            elif size < min_elements:
                small.add(tensor.buffer)
    return users, keep, small


def _dequantize_in(subgraph, tensors, opcode, schema, is_product):
    """Makes each tensor float16 and reads it through DEQUANTIZE at the top:
    one for the products that read it, one for its other readers."""
    new_ops = []
    for t in tensors:
        tensor = subgraph.tensors[t]
        tensor.type = schema.TensorType.FLOAT16
        readers = [op for op in subgraph.operators if t in _ints(op.inputs)]
        groups = (
            [op for op in readers if is_product(op)],
            [op for op in readers if not is_product(op)],
        )
        for suffix, group in zip((b"", b"_other"), groups, strict=True):
            if not group:
                continue
            out = schema.TensorT()
            out.shape = tensor.shape
            out.shapeSignature = tensor.shapeSignature
            out.type = schema.TensorType.FLOAT32
            out.buffer = 0
            out.name = (tensor.name or b"") + b"/dequantized" + suffix
            subgraph.tensors.append(out)
            out_index = len(subgraph.tensors) - 1
            for op in group:
                op.inputs = [out_index if i == t else i for i in _ints(op.inputs)]
            op = schema.OperatorT()
            op.opcodeIndex = opcode
            op.inputs = [t]
            op.outputs = [out_index]
            new_ops.append(op)
    subgraph.operators = new_ops + list(subgraph.operators)


def _dequantize_opcode(model, schema):
    """The index of a DEQUANTIZE operator code that reads float16 (added if absent)."""
    code = schema.BuiltinOperator.DEQUANTIZE
    for i, c in enumerate(model.operatorCodes):
        if max(c.builtinCode, c.deprecatedBuiltinCode) == code:
            c.version = max(c.version, _DEQUANTIZE_FLOAT16_VERSION)
            return i
    c = schema.OperatorCodeT()
    c.builtinCode = code
    c.deprecatedBuiltinCode = code
    c.version = _DEQUANTIZE_FLOAT16_VERSION
    model.operatorCodes.append(c)
    return len(model.operatorCodes) - 1


def _add_metadata(model, schema, name, value):
    if any(m.name == name for m in model.metadata or []):
        return
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(value, np.uint8)
    model.buffers.append(buffer)
    entry = schema.MetadataT()
    entry.name = name
    entry.buffer = len(model.buffers) - 1
    model.metadata = [*(model.metadata or []), entry]


def _ints(values):
    return [] if values is None else [int(v) for v in values]
