"""A SavedModel's raw-column signature (the Transform graph inside) as TensorFlow Lite.

TFLite cannot read tf.Transform's vocabulary files: a table initialised from a file converts, then fails in the
interpreter ("hashtable need to be initialized"). So the signature is frozen with every nested function inlined
(the Transform graph's tables are `HashTableV2` nodes inside it), each table's contents are read from the loaded
model's filled table, and the graph is rebuilt around tables whose keys and values are constants:

- a string-keyed table becomes a `StaticHashTable` of constants: TFLite's builtin HASHTABLE ops;
- an int64-keyed table (TFLite's builtin tables take string keys only; one such table sends every table of the
  model to Select TF ops) becomes a match against its constant keys (Equal, Any, ArgMax, Gather, Select);
- `UpperBound` (tft.apply_buckets) becomes `K - count(x < boundaries)`, which keeps NaN in the last bucket as
  UpperBound does; a binary `DenseBincount` (Keras's one-hot CategoryEncoding) becomes `any(x == range(size))`.

Every rewrite is exact. What is left without a builtin kernel (StringToHashBucketFast: the FarmHash of an
out-of-vocabulary value, AsString before it) converts with Select TF ops, and the model then needs the Flex
delegate (TensorFlow's interpreter, or a LiteRT build with Select TF ops); `ops()` says which.
"""

from __future__ import annotations

import collections
from typing import Any, Dict, List, Tuple

import numpy as np
import tensorflow as tf

# Variants: the name, and the converter's optimisation. Dynamic-range int8 quantises the weight matrices only;
# float16 also rounds the Transform's constants (bucket boundaries, means) to 16 bits and is not offered.
VARIANTS = ("float32", "int8")


class Unconvertible(Exception):
    """The model cannot become a TFLite model: the message names the op or the step and why."""


def _freeze(function) -> Tuple[Any, Any]:
    from tensorflow.python.framework import convert_to_constants

    frozen, graph_def = convert_to_constants.convert_variables_to_constants_v2_as_graph(
        function, aggressive_inlining=True
    )
    if graph_def.library.function:
        names = sorted(f.signature.name for f in graph_def.library.function)[:3]
        raise Unconvertible(f"functions left after inlining the signature: {', '.join(names)}")
    return frozen, graph_def


def _sources(graph_def):
    """A function giving the node a tensor comes from, through Identity nodes (an inlined function passes a
    table's handle on so)."""
    nodes = {n.name: n for n in graph_def.node}

    def source(tensor: str) -> str:
        name = tensor.split(":")[0].lstrip("^")
        while name in nodes and nodes[name].op == "Identity":
            name = nodes[name].input[0].split(":")[0]
        return name

    return source


def _exported(handle, key_dtype, value_dtype, name: str):
    keys, values = tf.raw_ops.LookupTableExportV2(table_handle=handle, Tkeys=key_dtype, Tvalues=value_dtype)
    if keys.shape[0] == 0:
        raise Unconvertible(f"table '{name}' could not be read from the loaded model")
    order = np.argsort(values.numpy(), kind="stable")
    return keys.numpy()[order], values.numpy()[order], key_dtype, value_dtype


def _tables(graph_def, function, frozen) -> Dict[str, Tuple[np.ndarray, np.ndarray, tf.DType, tf.DType]]:
    """{table node: (keys, values, key dtype, value dtype)}, read from the loaded model's filled tables: those
    made inside the graph (tf.Transform's: a HashTableV2 of the same shared name, made eagerly, is a handle to the
    same resource) and those the function captures (a Keras lookup layer's: placeholders of the frozen graph)."""
    tables = {}
    captured = {internal.name: external for external, internal in function.graph.captures}
    source = _sources(graph_def)
    for placeholder in frozen.inputs:
        if placeholder.dtype != tf.resource:
            continue
        name = placeholder.name.split(":")[0]
        finds = [n for n in graph_def.node if n.op == "LookupTableFindV2" and source(n.input[0]) == name]
        if placeholder.name not in captured or not finds:
            raise Unconvertible(f"the signature captures a resource '{name}' that is not a lookup table")
        key_dtype, value_dtype = (tf.as_dtype(finds[0].attr[a].type) for a in ("Tin", "Tout"))
        tables[name] = _exported(captured[placeholder.name], key_dtype, value_dtype, name)
    for node in graph_def.node:
        if node.op in ("MutableHashTableV2", "MutableDenseHashTableV2", "MutableHashTableOfTensorsV2"):
            raise Unconvertible(f"{node.op} '{node.name}': a mutable table has no TFLite equivalent")
        if node.op != "HashTableV2":
            continue
        key_dtype, value_dtype = tf.as_dtype(node.attr["key_dtype"].type), tf.as_dtype(node.attr["value_dtype"].type)
        handle = tf.raw_ops.HashTableV2(
            key_dtype=key_dtype,
            value_dtype=value_dtype,
            shared_name=node.attr["shared_name"].s,
            container=node.attr["container"].s,
        )
        if not node.attr["shared_name"].s:
            raise Unconvertible(f"table '{node.name}' has no shared name to find it by in the loaded model")
        tables[node.name] = _exported(handle, key_dtype, value_dtype, node.name)
    return tables


def _type(dtype) -> tf.compat.v1.AttrValue:
    return tf.compat.v1.AttrValue(type=tf.as_dtype(dtype).as_datatype_enum)


def _const(name: str, value, dtype) -> tf.compat.v1.NodeDef:
    tensor = tf.make_tensor_proto(value, dtype=dtype)
    return tf.compat.v1.NodeDef(
        name=name,
        op="Const",
        attr={"dtype": _type(dtype), "value": tf.compat.v1.AttrValue(tensor=tensor)},
    )


def _node(name: str, op: str, inputs: List[str], **attrs) -> tf.compat.v1.NodeDef:
    node = tf.compat.v1.NodeDef(name=name, op=op, input=list(inputs))
    for key, value in attrs.items():
        node.attr[key].CopyFrom(value)
    return node


_FALSE = tf.compat.v1.AttrValue(b=False)
_TRUE = tf.compat.v1.AttrValue(b=True)


def _match(name: str, node, keys, values, key_dtype, value_dtype) -> List[tf.compat.v1.NodeDef]:
    """LookupTableFindV2 over constant keys as builtin ops: values[argmax(x == keys)] where found, else the
    default."""
    x, default = node.input[1], node.input[2]
    control = [i for i in node.input[3:] if i.startswith("^")]
    i32 = tf.int32
    return [
        _const(f"{name}/keys", keys, key_dtype),
        _const(f"{name}/values", values, value_dtype),
        _const(f"{name}/last", np.int32(-1), i32),
        _const(f"{name}/zero", np.int32(0), i32),
        _node(f"{name}/x", "ExpandDims", [x, f"{name}/last"], T=_type(key_dtype), Tdim=_type(i32)),
        _node(
            f"{name}/equal", "Equal", [f"{name}/x", f"{name}/keys"], T=_type(key_dtype), incompatible_shape_error=_TRUE
        ),
        _node(f"{name}/found", "Any", [f"{name}/equal", f"{name}/last"], Tidx=_type(i32), keep_dims=_FALSE),
        _node(f"{name}/equal_int", "Cast", [f"{name}/equal"], SrcT=_type(tf.bool), DstT=_type(i32)),
        _node(
            f"{name}/index",
            "ArgMax",
            [f"{name}/equal_int", f"{name}/last"],
            T=_type(i32),
            Tidx=_type(i32),
            output_type=_type(i32),
        ),
        _node(
            f"{name}/hit",
            "GatherV2",
            [f"{name}/values", f"{name}/index", f"{name}/zero"],
            Tparams=_type(value_dtype),
            Tindices=_type(i32),
            Taxis=_type(i32),
            batch_dims=tf.compat.v1.AttrValue(i=0),
        ),
        _node(name, "SelectV2", [f"{name}/found", f"{name}/hit", default, *control], T=_type(value_dtype)),
    ]


def _upper_bound(name: str, node) -> List[tf.compat.v1.NodeDef]:
    # K - #(x < boundaries) rather than #(x >= boundaries): NaN compares false both ways, and UpperBound puts it
    # in the last bucket (the converter would fold LogicalNot(Less) into GreaterEqual).
    boundaries, x = node.input[0], node.input[1]
    control = [i for i in node.input[2:] if i.startswith("^")]
    i32, t = tf.int32, node.attr["T"]
    ints = dict(begin_mask=tf.compat.v1.AttrValue(i=0), end_mask=tf.compat.v1.AttrValue(i=1))
    masks = dict(
        ellipsis_mask=tf.compat.v1.AttrValue(i=0),
        new_axis_mask=tf.compat.v1.AttrValue(i=0),
        shrink_axis_mask=tf.compat.v1.AttrValue(i=1),
    )
    return [
        _const(f"{name}/last", np.int32(-1), i32),
        _const(f"{name}/one", np.int32(1), i32),
        _const(f"{name}/begin", np.array([-1], np.int32), i32),
        _const(f"{name}/end", np.array([0], np.int32), i32),
        _const(f"{name}/stride", np.array([1], np.int32), i32),
        _node(f"{name}/x", "ExpandDims", [x, f"{name}/last"], T=t, Tdim=_type(i32)),
        _node(f"{name}/boundaries", "ExpandDims", [boundaries, f"{name}/one"], T=t, Tdim=_type(i32)),
        _node(f"{name}/less", "Less", [f"{name}/x", f"{name}/boundaries"], T=t),
        _node(f"{name}/less_int", "Cast", [f"{name}/less"], SrcT=_type(tf.bool), DstT=_type(i32)),
        _node(
            f"{name}/below",
            "Sum",
            [f"{name}/less_int", f"{name}/last"],
            T=_type(i32),
            Tidx=_type(i32),
            keep_dims=_FALSE,
        ),
        _node(f"{name}/shape", "Shape", [boundaries], T=t, out_type=_type(i32)),
        _node(
            f"{name}/count",
            "StridedSlice",
            [f"{name}/shape", f"{name}/begin", f"{name}/end", f"{name}/stride"],
            T=_type(i32),
            Index=_type(i32),
            **ints,
            **masks,
        ),
        _node(f"{name}/bucket", "Sub", [f"{name}/count", f"{name}/below"], T=_type(i32)),
        _node(name, "Cast", [f"{name}/bucket", *control], SrcT=_type(i32), DstT=node.attr["out_type"]),
    ]


def _one_hot(name: str, node) -> List[tf.compat.v1.NodeDef]:
    x, size = node.input[0], node.input[1]
    control = [i for i in node.input[3:] if i.startswith("^")]
    index_type = node.attr["Tidx"]
    dtype = tf.as_dtype(index_type.type)
    i32 = tf.int32
    return [
        _const(f"{name}/last", np.int32(-1), i32),
        _const(f"{name}/axis", np.int32(1), i32),
        _const(f"{name}/start", np.array(0, dtype.as_numpy_dtype), dtype),
        _const(f"{name}/step", np.array(1, dtype.as_numpy_dtype), dtype),
        _node(f"{name}/range", "Range", [f"{name}/start", size, f"{name}/step"], Tidx=index_type),
        _node(f"{name}/x", "ExpandDims", [x, f"{name}/last"], T=index_type, Tdim=_type(i32)),
        _node(f"{name}/equal", "Equal", [f"{name}/x", f"{name}/range"], T=index_type, incompatible_shape_error=_TRUE),
        _node(f"{name}/any", "Any", [f"{name}/equal", f"{name}/axis"], Tidx=_type(i32), keep_dims=_FALSE),
        _node(name, "Cast", [f"{name}/any", *control], SrcT=_type(tf.bool), DstT=node.attr["T"]),
    ]


def rewrite(graph_def, tables):
    """The graph with int64-keyed tables as constant matches, string-keyed tables as resource placeholders (fed
    a constant table's handle), and UpperBound and binary DenseBincount as builtin ops."""
    matched = {name for name, (_, _, key_dtype, _) in tables.items() if key_dtype == tf.int64}
    out = tf.compat.v1.GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    source_of = _sources(graph_def)
    for node in graph_def.node:
        source = source_of(node.input[0]) if node.input else None
        if node.op == "HashTableV2" or node.name in tables:
            if node.name not in matched:
                shape = tf.compat.v1.AttrValue(shape=tf.TensorShape([]).as_proto())
                out.node.append(_node(node.name, "Placeholder", [], dtype=_type(tf.resource), shape=shape))
        elif source in matched and node.op == "Identity":
            continue  # a matched table's handle passed on: its lookups are rewritten
        elif source in matched and node.op == "LookupTableSizeV2":
            out.node.append(_const(node.name, np.int64(len(tables[source][0])), tf.int64))
        elif source in matched and node.op == "LookupTableFindV2":
            out.node.extend(_match(node.name, node, *tables[source]))
        elif node.op == "UpperBound":
            out.node.extend(_upper_bound(node.name, node))
        elif node.op == "DenseBincount" and node.attr["binary_output"].b:
            out.node.extend(_one_hot(node.name, node))
        else:
            out.node.add().CopyFrom(node)
    present = {node.name for node in out.node}
    for node in out.node:  # no control edge to a node that is gone (a matched table, its handle passed on)
        kept = [i for i in node.input if not i.startswith("^") or i[1:] in present]
        if len(kept) != len(node.input):
            del node.input[:]
            node.input.extend(kept)
    return out


def edge_module(model_dir: str, signature: str, loaded=None) -> tf.Module:
    """A module whose `serve` answers as the SavedModel's `signature` does (same inputs and outputs by name),
    with constant tables: what the converter takes. `loaded`: the SavedModel, if loaded already."""
    loaded = loaded if loaded is not None else tf.saved_model.load(model_dir)
    if signature not in loaded.signatures:
        raise Unconvertible(f"the model has no '{signature}' signature (it has {sorted(loaded.signatures)})")
    function = loaded.signatures[signature]
    frozen, graph_def = _freeze(function)
    tables = _tables(graph_def, function, frozen)
    graph = rewrite(graph_def, tables)
    input_specs = function.structured_input_signature[1]
    # The columns' placeholders ("<column>:0"); the others are captured tables, fed below.
    inputs = [t.name for t in frozen.inputs if t.dtype != tf.resource]
    outputs = dict(zip(sorted(function.structured_outputs), [t.name for t in frozen.outputs], strict=True))
    kept = {name: table for name, table in tables.items() if table[2] != tf.int64}

    class Edge(tf.Module):
        def __init__(self):
            super().__init__()
            self.tables = {
                name: tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(tf.constant(keys, key_dtype), tf.constant(values, value_dtype)),
                    default_value=tf.constant(-1, value_dtype),
                )
                for name, (keys, values, key_dtype, value_dtype) in kept.items()
            }

        @tf.function(input_signature=[dict(input_specs)], autograph=False)
        def serve(self, features):
            mapping = {name: features[name.split(":")[0]] for name in inputs}
            # tf.identity: the handle becomes a capture of this function (a resource handle itself cannot be
            # mapped into an imported graph under eager execution).
            mapping.update({f"{name}:0": tf.identity(t.resource_handle) for name, t in self.tables.items()})
            found = tf.graph_util.import_graph_def(
                graph, input_map=mapping, return_elements=list(outputs.values()), name="model"
            )
            return {key: tf.identity(tensor, name=key) for key, tensor in zip(outputs, found, strict=True)}

    return Edge()


def convert(model_dir: str, signature: str, work_dir: str, loaded=None) -> Dict[str, bytes]:
    """{variant: .tflite bytes} of the model's `signature`, its one TFLite signature named `signature` too;
    raises Unconvertible naming what failed."""
    import os

    module = edge_module(model_dir, signature, loaded)
    saved = os.path.join(work_dir, "edge_savedmodel")
    tf.saved_model.save(module, saved, signatures={signature: module.serve})
    converted = {}
    for variant in VARIANTS:
        converter = tf.lite.TFLiteConverter.from_saved_model(saved, signature_keys=[signature])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
        if variant == "int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        try:
            converted[variant] = converter.convert()
        except Exception as err:  # the converter raises many kinds; the message names the op
            raise Unconvertible(_converter_reason(err)) from err
    return converted


def _converter_reason(err: Exception) -> str:
    """The ops the converter could not take, by name, else its first line."""
    import re

    text = str(err)
    refused = sorted(set(re.findall(r"'tf\.(\w+)' op is neither a custom op nor a flex op", text)))
    if refused:
        return (
            f"op {', '.join(refused)}: no TFLite kernel, builtin or Select TF op (a custom op the model brings would "
            "need its own TFLite kernel)"
        )
    return error_line(err)


def error_line(err: BaseException) -> str:
    """`<type>: <first non-empty line of the message>` (at most 300 characters of it): a reason in one line."""
    first = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    return f"{type(err).__name__}: {first[:300]}"


def ops(model: bytes) -> Dict[str, int]:
    """How many of each op the model's graphs use (custom ops by name: Flex ops start with 'Flex')."""
    from tensorflow.lite.python import schema_py_generated as schema

    parsed = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model, 0))
    builtin = {code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
    counts: Dict[str, int] = collections.Counter()
    for graph in parsed.subgraphs or []:
        for op in graph.operators or []:
            code = parsed.operatorCodes[op.opcodeIndex]
            counts[
                code.customCode.decode()
                if code.customCode
                else builtin[max(code.builtinCode, code.deprecatedBuiltinCode)]
            ] += 1
    return dict(sorted(counts.items()))
