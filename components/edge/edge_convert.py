"""A SavedModel's raw-column signature (the Transform graph inside) as TensorFlow Lite.

TFLite cannot read tf.Transform's vocabulary files: a table initialised from a file converts, then fails in the
interpreter ("hashtable need to be initialized"). So the signature is frozen with every nested function inlined
(the Transform graph's tables are `HashTableV2` nodes inside it), each table's contents are read from the loaded
model's filled table, and the graph is rebuilt around tables whose keys and values are constants:

- a string-keyed table becomes a `StaticHashTable` of constants: TFLite's builtin HASHTABLE ops;
- an int64-keyed table (TFLite's builtin tables take string keys only; one such table sends every table of the
  model to Select TF ops) becomes a match against its constant keys (Equal, Any, ArgMax, Gather, Select);
- `UpperBound` (tft.apply_buckets) becomes `K - count(x < boundaries)`, which keeps NaN in the last bucket as
  UpperBound does; a binary `DenseBincount` (Keras's one-hot CategoryEncoding) becomes `any(x == range(size))`;
  `StringToHashBucketFast` into one bucket (a vocabulary with one out-of-vocabulary id, what `--tflite` asks of
  the Transform) becomes zeros, and the `AsString` before it is left unused.

Every rewrite is exact. What is left without a builtin kernel (StringToHashBucketFast into several buckets: the
FarmHash of an out-of-vocabulary value, AsString before it) converts with Select TF ops, and the model then needs
the Flex delegate (TensorFlow's interpreter, or a LiteRT build with Select TF ops); `ops()` says which.

A text column's tokenization in the Transform graph (TF Text's classic WordPiece, regex splits, tf.Transform's
ragged-tensor asserts in V1 control flow) has no TFLite counterpart. Where the model records how each text column
was tokenized (model_info's `text`), its token ids and attention mask are found in the frozen graph by their
values on a few sentences, and everything that made them is cut off: the edge model tokenizes with
`text.edge_tokenize` (TF Text's FastBertNormalizer and FastWordpieceTokenizer, and its ByteSplitter for the special
tokens written in the text: ops TF Text registers as TFLite custom ops,
`TEXT_OPS`) and feeds the model part the same ids.
"""

from __future__ import annotations

import collections
import os
from typing import Any, Dict, List, Tuple

import numpy as np
import tensorflow as tf

from tfxflow.components.model import model_info
from tfxflow.components.model import text as text_lib
from tfxflow.components.model.tokenization import WORDPIECE, Tokenization

# Variants: the name, and the converter's optimisation. Dynamic-range int8 quantises the weight matrices only;
# float16 also rounds the Transform's constants (bucket boundaries, means) to 16 bits and is not offered.
VARIANTS = ("float32", "int8")


# TF Text's ops an edge tokenizer converts to: TFLite custom ops, their kernels in
# `tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS` (components/edge/edge_probe.py registers them).
TEXT_OPS = ("FastBertNormalize", "FastWordpieceTokenizeWithOffsets", "TFText>ByteSplitWithOffsets")
# Sentences whose token ids find a text column's ids and mask in the frozen graph: distinct lengths, plain words
# (where the served tokenizer and the edge one agree by construction).
_PROBE_TEXTS = ("the quick brown fox jumps over the lazy dog", "", "hello world", "a b c d e f g h i j k l m n o p")


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


def _one_bucket(name: str, node, nodes) -> List[tf.compat.v1.NodeDef]:
    """StringToHashBucketFast into one bucket: 0 for every value, whatever its hash (Fill of the input's shape).
    An integer column's AsString before it is passed over, so nothing reads it and it is left out."""
    x, dtype = node.input[0], tf.string
    before = nodes.get(x.split(":")[0])
    if before is not None and before.op == "AsString":
        x, dtype = before.input[0], tf.as_dtype(before.attr["T"].type)
    control = [i for i in node.input[1:] if i.startswith("^")]
    return [
        _const(f"{name}/zero", np.int64(0), tf.int64),
        _node(f"{name}/shape", "Shape", [x], T=_type(dtype), out_type=_type(tf.int32)),
        _node(name, "Fill", [f"{name}/shape", f"{name}/zero", *control], T=_type(tf.int64), index_type=_type(tf.int32)),
    ]


# What lies between a densified column and the op that reads it: ops that only move its values.
_SHAPE_OPS = ("Identity", "Squeeze")


def _densified(user, chain, dense) -> List[tf.compat.v1.NodeDef]:
    """`user` (a string table's lookup, or a hash into one bucket) of SparseToDense's output, through `chain`,
    as SparseToDense of its answers: on the sparse values, and on the default for the missing cells."""
    name = user.name
    indices, shape, values, default = dense.input[:4]
    control = [i for i in user.input if i.startswith("^")]
    i32 = tf.int32
    if user.op == "LookupTableFindV2":
        table, missing, answer = user.input[0], user.input[2], user.attr["Tout"]
        nodes = [
            _node(f"{name}/values", "LookupTableFindV2", [table, values, missing], Tin=_type(tf.string), Tout=answer),
            _const(f"{name}/one", np.array([1], np.int32), i32),
            _const(f"{name}/scalar", np.array([], np.int32), i32),
            _node(f"{name}/key", "Reshape", [default, f"{name}/one"], T=_type(tf.string), Tshape=_type(i32)),
            _node(
                f"{name}/found", "LookupTableFindV2", [table, f"{name}/key", missing], Tin=_type(tf.string), Tout=answer
            ),
            _node(f"{name}/default", "Reshape", [f"{name}/found", f"{name}/scalar"], T=answer, Tshape=_type(i32)),
        ]
    else:  # every value, the default included, hashes into bucket 0
        answer = _type(tf.int64)
        nodes = [
            _const(f"{name}/default", np.int64(0), tf.int64),
            _node(f"{name}/shape", "Shape", [values], T=_type(tf.string), out_type=_type(i32)),
            _node(f"{name}/values", "Fill", [f"{name}/shape", f"{name}/default"], T=answer, index_type=_type(i32)),
        ]
    last = f"{name}/dense"
    nodes.append(
        _node(
            last,
            "SparseToDense",
            [indices, shape, f"{name}/values", f"{name}/default"],
            T=answer,
            Tindices=dense.attr["Tindices"],
            validate_indices=dense.attr["validate_indices"],
        )
    )
    for step, op in enumerate(chain):
        moved = tf.compat.v1.NodeDef()
        moved.CopyFrom(op)
        moved.name = f"{name}/moved_{step}"
        moved.input[0] = last
        moved.attr["T"].CopyFrom(answer)
        nodes.append(moved)
        last = moved.name
    nodes.append(_node(name, "Identity", [last, *control], T=answer))
    return nodes


def _dense_strings(graph_def) -> Dict[str, List[tf.compat.v1.NodeDef]]:
    """{node: what replaces it} for the readers of a string column that SparseToDense densifies (tf.Transform's
    optional columns; TFLite's SPARSE_TO_DENSE has no string kernel): where every reader is a string table's
    lookup or a hash into one bucket, element-wise ops, each is moved before the densification (`_densified`),
    which then densifies numbers. Exact, missing cells included."""
    readers = collections.defaultdict(list)
    for node in graph_def.node:
        for tensor in node.input:
            if not tensor.startswith("^"):
                readers[tensor.split(":")[0]].append(node)
    found = {}
    for dense in graph_def.node:
        if dense.op != "SparseToDense" or dense.attr["T"].type != tf.string.as_datatype_enum:
            continue
        ends, movable, pending = [], True, [(dense, [])]
        while pending:
            node, chain = pending.pop()
            for user in readers[node.name]:
                if user.op in _SHAPE_OPS:
                    pending.append((user, chain + [user]))
                elif (user.op == "LookupTableFindV2" and user.input[1].split(":")[0] == node.name) or (
                    user.op == "StringToHashBucketFast" and user.attr["num_buckets"].i == 1
                ):
                    ends.append((user, chain))
                else:
                    movable = False
        if movable:
            found.update({user.name: _densified(user, chain, dense) for user, chain in ends})
    return found


def rewrite(graph_def, tables):
    """The graph with int64-keyed tables as constant matches, string-keyed tables as resource placeholders (fed
    a constant table's handle), and UpperBound, binary DenseBincount, a hash into one bucket (a vocabulary's
    single out-of-vocabulary id) and the densifying of a string column read by lookups as builtin ops."""
    matched = {name for name, (_, _, key_dtype, _) in tables.items() if key_dtype == tf.int64}
    out = tf.compat.v1.GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    source_of = _sources(graph_def)
    nodes = {node.name: node for node in graph_def.node}
    moved = _dense_strings(graph_def)
    for node in graph_def.node:
        source = source_of(node.input[0]) if node.input else None
        if node.name in moved:
            out.node.extend(moved[node.name])
        elif node.op == "HashTableV2" or node.name in tables:
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
        elif node.op == "StringToHashBucketFast" and node.attr["num_buckets"].i == 1:
            out.node.extend(_one_bucket(node.name, node, nodes))
        else:
            out.node.add().CopyFrom(node)
    present = {node.name for node in out.node}
    for node in out.node:  # no control edge to a node that is gone (a matched table, its handle passed on)
        kept = [i for i in node.input if not i.startswith("^") or i[1:] in present]
        if len(kept) != len(node.input):
            del node.input[:]
            node.input.extend(kept)
    return out


def _text_records(model_dir: str) -> Dict[str, Dict[str, Any]]:
    """{text column: how it was tokenized (export.model_info's `text`), with its vocabulary read and its edge
    tokenizer built}; {} for a model without text columns or without the record."""
    found = {}
    for column, record in ((model_info.read(model_dir) or {}).get("text") or {}).items():
        tokenization = Tokenization(**record["tokenization"])
        if tokenization.kind != WORDPIECE:
            raise Unconvertible(
                f"text column '{column}': its tokenizer is {tokenization.describe()}; an edge model tokenizes "
                "with TF Text's FastBertTokenizer (WordPiece) only"
            )
        tokens = text_lib.read_vocabulary(os.path.join(model_dir, "assets", record["vocabulary"]))
        tokenizer = text_lib.edge_tokenizer(tokens, tokenization)
        found[column] = {**record, "tokens": tokens, "tokenization": tokenization, "tokenizer": tokenizer}
    return found


def _edge_ids(texts, record) -> Tuple[tf.Tensor, tf.Tensor]:
    length = int(record["sequence_length"])
    return text_lib.edge_tokenize(texts, record["tokens"], length, record["tokenization"], record["tokenizer"])


def _constant_table(keys, values, key_dtype, value_dtype) -> tf.lookup.StaticHashTable:
    """A table read from the model (`_tables`' entry) as one of constants, -1 where a key is missing."""
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant(keys, key_dtype), tf.constant(values, value_dtype)),
        default_value=tf.constant(-1, value_dtype),
    )


def _evaluate(
    graph_def, tables, feeds: Dict[str, np.ndarray], fetches: List[str], together: bool = False
) -> Dict[str, np.ndarray]:
    """{fetch: its value} of the rewritten graph on `feeds` ({input tensor name: values}), its tables filled;
    a fetch with no value (in a branch of V1 control flow not taken) is left out. `together`: in one run, {}
    where one of them has no value."""
    with tf.Graph().as_default() as graph:
        mapping = {f"{name}:0": _constant_table(*table).resource_handle for name, table in tables.items()}
        found = tf.graph_util.import_graph_def(graph_def, input_map=mapping, return_elements=fetches, name="m")
        fed = {f"m/{name}": value for name, value in feeds.items()}
        values = {}
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.tables_initializer())
            if together:
                try:
                    return dict(zip(fetches, session.run(found, feed_dict=fed), strict=True))
                except tf.errors.InvalidArgumentError:
                    return {}
            for name, tensor in zip(fetches, found, strict=True):
                try:
                    values[name] = session.run(tensor, feed_dict=fed)
                except tf.errors.InvalidArgumentError:
                    continue
        return values


def _text_tensors(graph_def, tables, input_specs, inputs, records) -> Dict[str, Tuple[str, ...]]:
    """{ids or mask feature name: the tensors of the graph that carry it}: the int64 [batch, sequence_length]
    tensors at the inlined functions' boundaries (the Transform graph's outputs, the model's inputs) whose values
    on _PROBE_TEXTS are the edge tokenizer's ids or mask of them. Unconvertible where one is not found."""
    texts = tf.constant(list(_PROBE_TEXTS))
    rows = len(_PROBE_TEXTS)
    specs = {**input_specs, **{spec.name: spec for spec in input_specs.values() if spec.name}}
    feeds = {}
    for name in inputs:
        column = name.split(":")[0]
        spec = specs[column]
        if column in records:
            feeds[name] = np.array([t.encode() for t in _PROBE_TEXTS], dtype=object)
        elif spec.dtype == tf.string:
            feeds[name] = np.array([b""] * rows, dtype=object)
        else:
            feeds[name] = np.zeros([rows], spec.dtype.as_numpy_dtype)
    boundaries = [
        f"{node.name}:0"
        for node in graph_def.node
        if node.op == "Identity"
        and ("/output/_" in node.name or "/input/_" in node.name)
        and node.attr["T"].type == tf.int64.as_datatype_enum
    ]
    wanted = {}
    for record in records.values():
        ids, mask = (t.numpy() for t in _edge_ids(texts, record))
        wanted.update({record["ids"]: ids, record["mask"]: mask})

    def matching(values):
        return {
            feature: tuple(n for n, v in values.items() if v.shape == want.shape and (v == want).all())
            for feature, want in wanted.items()
        }

    # The Transform layer's outputs first, in one run (they are computed whatever the branches); the other
    # boundaries one by one where they are not enough (a fetch in a branch not taken has no value).
    layer = [name for name in boundaries if "transform_features_layer" in name and "/output/_" in name]
    found = matching(_evaluate(graph_def, tables, feeds, layer, together=True))
    if not all(found.values()):
        found = matching(_evaluate(graph_def, tables, feeds, boundaries))
    missing = [feature for feature, tensors in found.items() if not tensors]
    if missing:
        raise Unconvertible(
            f"text features {', '.join(missing)} were not found in the graph (or the edge tokenizer does not give "
            "the served ids on plain words)"
        )
    return found


def _cut_text(graph_def, replaced: Dict[str, Tuple[str, ...]], outputs: List[str]):
    """The graph with each replaced tensor a placeholder `edge_text/<feature>` and only what the outputs need
    by data: the Transform graph's tokenizer (and the control edges its asserts hung on others) is gone."""
    by_tensor = {tensor: feature for feature, tensors in replaced.items() for tensor in tensors}
    graph = tf.compat.v1.GraphDef()
    graph.versions.CopyFrom(graph_def.versions)
    for feature in replaced:
        shape = tf.compat.v1.AttrValue(shape=tf.TensorShape([None, None]).as_proto())
        graph.node.append(_node(f"edge_text/{feature}", "Placeholder", [], dtype=_type(tf.int64), shape=shape))
    for node in graph_def.node:
        copy = graph.node.add()
        copy.CopyFrom(node)
        del copy.input[:]
        for tensor in node.input:
            name = tensor if ":" in tensor or tensor.startswith("^") else f"{tensor}:0"
            copy.input.append(f"edge_text/{by_tensor[name]}" if name in by_tensor else tensor)
    nodes = {node.name: node for node in graph.node}
    needed, stack = set(), [name.split(":")[0] for name in outputs]
    while stack:  # reached by data edges only
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        stack.extend(i.split(":")[0] for i in nodes[name].input if not i.startswith("^"))
    pruned = tf.compat.v1.GraphDef()
    pruned.versions.CopyFrom(graph.versions)
    for node in graph.node:
        if node.name in needed:
            copy = pruned.node.add()
            copy.CopyFrom(node)
            kept = [i for i in node.input if not i.startswith("^") or i[1:] in needed]
            del copy.input[:]
            copy.input.extend(kept)
    return pruned


def edge_module(model_dir: str, signature: str, loaded=None) -> tf.Module:
    """A module whose `serve` answers as the SavedModel's `signature` does (same inputs and outputs by name),
    with constant tables and its text columns tokenized by `text.edge_tokenize`: what the converter takes.
    `loaded`: the SavedModel, if loaded already."""
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
    records = {column: r for column, r in _text_records(model_dir).items() if f"{column}:0" in inputs}
    if records:
        replaced = _text_tensors(graph, kept, input_specs, inputs, records)
        graph = _cut_text(graph, replaced, list(outputs.values()))
        present = {node.name for node in graph.node}
        kept = {name: table for name, table in kept.items() if name in present}
        # The graph's own placeholder of a text column went with its tokenizer: the column reaches the model
        # through the edge tokenizer alone (it stays an input of the signature).
        inputs = [name for name in inputs if name.split(":")[0] in present]

    class Edge(tf.Module):
        def __init__(self):
            super().__init__()
            self.tables = {name: _constant_table(*table) for name, table in kept.items()}

        @tf.function(input_signature=[dict(input_specs)], autograph=False)
        def serve(self, features):
            mapping = {name: features[name.split(":")[0]] for name in inputs}
            for column, record in records.items():
                ids, mask = _edge_ids(features[column], record)
                mapping.update({f"edge_text/{record['ids']}:0": ids, f"edge_text/{record['mask']}:0": mask})
            # tf.identity: the handle becomes a capture of this function (a resource handle itself cannot be
            # mapped into an imported graph under eager execution).
            mapping.update({f"{name}:0": tf.identity(t.resource_handle) for name, t in self.tables.items()})
            found = tf.graph_util.import_graph_def(
                graph, input_map=mapping, return_elements=list(outputs.values()), name="model"
            )
            return {key: tf.identity(tensor, name=key) for key, tensor in zip(outputs, found, strict=True)}

    edge = Edge()
    edge.text_columns = sorted(records)
    return edge


def convert(model_dir: str, signature: str, work_dir: str, loaded=None) -> Dict[str, bytes]:
    """{variant: .tflite bytes} of the model's `signature`, its one TFLite signature named `signature` too;
    raises Unconvertible naming what failed."""
    module = edge_module(model_dir, signature, loaded)
    saved = os.path.join(work_dir, "edge_savedmodel")
    # No custom gradients (the converter never differentiates; see export.SERVING).
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    tf.saved_model.save(module, saved, signatures={signature: module.serve}, options=options)
    converted = {}
    builtin = set(_builtin_names().values())
    for variant in VARIANTS:
        converter = tf.lite.TFLiteConverter.from_saved_model(saved, signature_keys=[signature])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
        # Custom ops only for an edge tokenizer's TEXT_OPS (any other is refused below, as without it).
        converter.allow_custom_ops = bool(module.text_columns)
        if variant == "int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        try:
            converted[variant] = converter.convert()
        except Exception as err:  # the converter raises many kinds; the message names the op
            raise Unconvertible(_converter_reason(err)) from err
        custom = [op for op in ops(converted[variant]) if op not in builtin and op not in TEXT_OPS]
        custom = [op for op in custom if not op.startswith("Flex")]
        if custom:
            raise Unconvertible(_refused(custom))
    return converted


def _converter_reason(err: Exception) -> str:
    """The ops the converter could not take, by name, else its first line."""
    import re

    text = str(err)
    refused = sorted(set(re.findall(r"'tf\.(\w+)' op is neither a custom op nor a flex op", text)))
    return _refused(refused) if refused else error_line(err)


def _refused(names: List[str]) -> str:
    return (
        f"op {', '.join(names)}: no TFLite kernel, builtin or Select TF op (a custom op the model brings would need "
        "its own TFLite kernel)"
    )


def error_line(err: BaseException) -> str:
    """`<type>: <first non-empty line of the message>` (at most 300 characters of it): a reason in one line."""
    first = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    return f"{type(err).__name__}: {first[:300]}"


def _builtin_names() -> Dict[int, str]:
    from tensorflow.lite.python import schema_py_generated as schema

    return {code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")}


def ops(model: bytes) -> Dict[str, int]:
    """How many of each op the model's graphs use (custom ops by name: Flex ops start with 'Flex')."""
    from tensorflow.lite.python import schema_py_generated as schema

    parsed = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model, 0))
    builtin = _builtin_names()
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
