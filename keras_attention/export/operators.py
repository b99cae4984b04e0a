"""Reading the operators of a `.tflite` model, to check what it needs at run time."""

from keras_attention.files.reading import read_bytes

# What a builtin-only model must not contain: Flex (TensorFlow) and custom
# operators need a delegate or registrar in the app; variable operators mean
# the weights were not frozen (`invoke` then fails in a WHILE body).
FORBIDDEN_PREFIXES = ("CUSTOM:",)
VARIABLE_OPERATORS = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")


def tflite_operators(model):
    """Operator names of a `.tflite` model, over all its subgraphs (loop bodies too).

    `tflite_subgraph_operators` gives the same counts per subgraph.

    Builtins by name ("FULLY_CONNECTED"); a custom operator, Flex ops included,
    as "CUSTOM:<code>" ("CUSTOM:FlexStringLower"). Reads the flatbuffer with
    LiteRT's schema (or TensorFlow's).

    Args:
        model: path of a `.tflite` file, or its bytes.

    Returns:
        dict: operator name → number of uses.
    """
    counts = {}
    for ops in tflite_subgraph_operators(model).values():
        for name, n in ops.items():
            counts[name] = counts.get(name, 0) + n
    return dict(sorted(counts.items()))


def tflite_subgraph_operators(model):
    """Operator names of each subgraph of a `.tflite` model.

    Args:
        model: path of a `.tflite` file, or its bytes.

    Returns:
        dict: "index:name" of the subgraph ("12:while_body") → dict operator
        name → number of uses, named as in `tflite_operators`.
    """
    schema = tflite_schema()
    data = model if isinstance(model, bytes | bytearray) else read_bytes(model, "TFLite model")
    root = schema.Model.GetRootAs(data, 0)
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    codes = []
    for i in range(root.OperatorCodesLength()):
        code = root.OperatorCodes(i)
        # Codes above 127 live in `builtin_code`; older files use the int8 field.
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == schema.BuiltinOperator.CUSTOM:
            codes.append(f"CUSTOM:{code.CustomCode().decode()}")
        else:
            codes.append(names.get(builtin, f"BUILTIN_{builtin}"))
    subgraphs = {}
    for s in range(root.SubgraphsLength()):
        subgraph = root.Subgraphs(s)
        counts = {}
        for j in range(subgraph.OperatorsLength()):
            name = codes[subgraph.Operators(j).OpcodeIndex()]
            counts[name] = counts.get(name, 0) + 1
        title = (subgraph.Name() or b"").decode() or f"subgraph_{s}"
        subgraphs[f"{s}:{title}"] = dict(sorted(counts.items()))
    return subgraphs


def tflite_schema():
    """The TFLite flatbuffer schema: LiteRT's, or the copy TensorFlow ships."""
    try:
        from ai_edge_litert import schema_py_generated as schema
    except ImportError:
        try:
            from tensorflow.lite.python import schema_py_generated as schema
        except ImportError as error:
            raise ImportError(
                "Listing TFLite operators needs ai-edge-litert or TensorFlow: "
                "`pip install keras-seq2seq-attention[tensorflow]`."
            ) from error
    return schema


def non_builtin_operators(model):
    """The operators of a `.tflite` model that a builtin-only interpreter
    cannot run as they stand: custom and Flex operators, and resource-variable
    operators. An empty dict means builtin ops only, no variables.

    Args:
        model: path of a `.tflite` file, or its bytes.

    Returns:
        dict: operator name → number of uses.
    """
    return {
        name: n
        for name, n in tflite_operators(model).items()
        if name.startswith(FORBIDDEN_PREFIXES) or name in VARIABLE_OPERATORS
    }
