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
Smaller constants (biases, scalars) stay float32: they weigh little and each
would cost one more operator per loop step.
"""

import flatbuffers
import numpy as np

from keras_attention.export.operators import _schema

MIN_ELEMENTS = 1024
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
    when a tensor of another type shares its buffer.
    """
    schema = _schema()
    if data[4:8] != _FILE_IDENTIFIER:
        raise ValueError("Not a TFLite flatbuffer: its identifier is not TFL3.")
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    users, keep = _constant_users(model, schema, min_elements)
    converted = []
    for index in sorted(set(users) - keep):
        values = np.frombuffer(bytes(model.buffers[index].data), "<f4")
        if not np.all(np.abs(values) <= FLOAT16_MAX):  # also catches NaN
            continue
        half = values.astype("<f2")
        model.buffers[index].data = np.frombuffer(half.tobytes(), np.uint8)
        converted.append(index)
    if not converted:
        return bytes(data)
    dequantize = _dequantize_opcode(model, schema)
    per_subgraph = {}
    for index in converted:
        for subgraph, tensor in users[index]:
            per_subgraph.setdefault(subgraph, []).append(tensor)
    for s, tensors in sorted(per_subgraph.items()):
        _dequantize_in(model.subgraphs[s], sorted(tensors), dequantize, schema)
    _add_metadata(model, schema, *REDUCED_PRECISION)
    builder = flatbuffers.Builder(len(data) // 2 + 1024)
    builder.Finish(model.Pack(builder), file_identifier=_FILE_IDENTIFIER)
    return bytes(builder.Output())


def _constant_users(model, schema, min_elements):
    """{buffer: [(subgraph, tensor)]} of the float32 constants, and the buffers to keep."""
    users, keep = {}, set()
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
                or size < min_elements
                or len(buffer.data) != 4 * size
            ):
                keep.add(tensor.buffer)
    return users, keep


def _dequantize_in(subgraph, tensors, opcode, schema):
    """Makes each tensor float16 and reads it through a DEQUANTIZE at the top."""
    new_ops = []
    for t in tensors:
        tensor = subgraph.tensors[t]
        tensor.type = schema.TensorType.FLOAT16
        readers = [op for op in subgraph.operators if t in _ints(op.inputs)]
        if not readers:
            continue
        out = schema.TensorT()
        out.shape = tensor.shape
        out.shapeSignature = tensor.shapeSignature
        out.type = schema.TensorType.FLOAT32
        out.buffer = 0
        out.name = (tensor.name or b"") + b"/dequantized"
        subgraph.tensors.append(out)
        out_index = len(subgraph.tensors) - 1
        for op in readers:
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
