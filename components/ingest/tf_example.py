"""tf.Examples from Arrow record batches, column by column, and GZIP TFRecord files, with no per-row Python
beyond one hash and one checksum call per record.

`encode` gives, byte for byte, protobuf's deterministic serialization of the tf.Example that TFX's
CsvExampleGen builds from a CSV row when the schema's column types are those TFX infers from the data: every
column a feature, an INT cell an `int64_list` of one value, a FLOAT cell a `float_list` (float32), a text cell
a `bytes_list`, an empty cell an empty list of the column's type. (TFX makes an integer-looking FLOAT column
an `int64_list` and an all-empty column a feature of no type; here the schema decides.)
Deterministic bytes matter twice: TFX splits on the SHA-256 of exactly these bytes (`split_buckets`), and
they parse to the same message (tfx_bsl's C++ encoder writes map entries in hash order, so its bytes hash
differently; asking protobuf for deterministic bytes row by row costs 21 us a row).

The wire format, for one feature of a one-value row (field numbers from tensorflow/core/example/*.proto):
`0a <len> [0a <len(key)> key 12 <len(F)> F]` per map entry of `Features.feature`, sorted by key, inside
`Example{features = 1}`; F is `1a <len> [0a <len> varint]` (Int64List, packed), `12 06 [0a 04 float32-le]`
(FloatList, packed) or `0a <len> [0a <len> bytes]` (BytesList).
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from typing import BinaryIO, Mapping, Sequence

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

INT, FLOAT, BYTES = "INT", "FLOAT", "BYTES"
# The Feature message of an empty cell, by column type: an empty list of that type.
_EMPTY_FEATURE = {INT: b"\x1a\x00", FLOAT: b"\x12\x00", BYTES: b"\x0a\x00"}
_FEATURE_TAG = {INT: b"\x1a", FLOAT: b"\x12", BYTES: b"\x0a"}


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def varints(values: np.ndarray) -> pa.BinaryArray:
    """Each value (int64, negative ones as protobuf does: 10 bytes of two's complement) as a varint."""
    rest = np.asarray(values).astype(np.int64).view(np.uint64)
    count = len(rest)
    table = np.zeros((count, 10), np.uint8)
    lengths = np.ones(count, np.int32)
    for i in range(10):
        low = (rest & np.uint64(0x7F)).astype(np.uint8)
        rest = rest >> np.uint64(7)
        more = rest > 0
        table[:, i] = low | (more.astype(np.uint8) << 7)
        if not more.any():
            break
        lengths += more
    data = table[np.arange(10) < lengths[:, None]]
    return _binary(lengths, data)


def _binary(lengths: np.ndarray, data: np.ndarray) -> pa.BinaryArray:
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.BinaryArray.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )


def _varint_length(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, np.int64)
    length = np.ones(len(values), np.int64)
    for bits in range(7, 64, 7):
        length += values >= (1 << bits)
    return length


def _join(*parts) -> pa.BinaryArray:
    scalars = [pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p for p in parts]
    return pc.binary_join_element_wise(*scalars, pa.scalar(b"", pa.binary()))


def _feature(column: pa.Array, kind: str):
    """(the Feature bytes of each row, their lengths) for the rows' values, nulls as zero/empty values."""
    if kind == FLOAT:
        values = np.asarray(column.cast(pa.float32()).fill_null(0.0)).astype("<f4")
        return _join(b"\x12\x06\x0a\x04", _binary(np.full(len(values), 4, np.int32), values.view(np.uint8))), np.full(
            len(values), 8, np.int64
        )
    if kind == INT:
        values = np.asarray(column.fill_null(0), np.int64)
        encoded = varints(values)
        value_len = np.where(values < 0, 10, _varint_length(np.maximum(values, 0)))
        inner = 2 + value_len
        return _join(b"\x1a", varints(inner), b"\x0a", varints(value_len), encoded), 2 + inner
    data = column.cast(pa.binary()).fill_null(b"")
    text_len = np.asarray(pc.binary_length(data), np.int64)
    inner = 1 + _varint_length(text_len) + text_len
    return _join(b"\x0a", varints(inner), b"\x0a", varints(text_len), data), 1 + _varint_length(inner) + inner


def _entry(key: str, column: pa.Array, kind: str):
    """(each row's `Features.feature` map entry for `key`, field tag and length included; their lengths)."""
    key_bytes = key.encode("utf-8")
    head = b"\x0a" + _varint_bytes(len(key_bytes)) + key_bytes + b"\x12"
    empty = head + _varint_bytes(len(_EMPTY_FEATURE[kind])) + _EMPTY_FEATURE[kind]
    feature, feature_len = _feature(column, kind)
    entry_len = len(head) + _varint_length(feature_len) + feature_len
    entries = _join(b"\x0a", varints(entry_len), head, varints(feature_len), feature)
    empty_entry = b"\x0a" + _varint_bytes(len(empty)) + empty
    if column.null_count:
        entries = pc.if_else(column.is_valid(), entries, pa.scalar(empty_entry, pa.binary()))
        entry_len = np.where(np.asarray(column.is_valid()), entry_len + 1 + _varint_length(entry_len), len(empty_entry))
    else:
        entry_len = entry_len + 1 + _varint_length(entry_len)
    return entries, entry_len


def encode(batch: pa.RecordBatch, kinds: Mapping[str, str]) -> pa.BinaryArray:
    """Serialized tf.Examples of `batch`'s rows (see the module docstring); `kinds` maps each column to INT,
    FLOAT or BYTES."""
    if not batch.num_rows:
        return pa.array([], pa.binary())
    parts, total = [], np.zeros(batch.num_rows, np.int64)
    for name in sorted(batch.schema.names, key=lambda n: n.encode("utf-8")):
        entries, lengths = _entry(name, batch.column(name), kinds[name])
        parts.append(entries)
        total += lengths
    return _join(b"\x0a", varints(total), *parts)


def split_buckets(examples: pa.BinaryArray, buckets: Sequence[int]) -> np.ndarray:
    """The split index of each serialized example as TFX's ExampleGen partitions (`_PartitionFn`): SHA-256 of
    the deterministic bytes, as an integer modulo the last bucket, then the first bucket boundary above it."""
    modulus = buckets[-1]
    values = np.fromiter(
        (int.from_bytes(hashlib.sha256(record).digest(), "big") % modulus for record in examples.to_pylist()),
        np.int64,
        count=len(examples),
    )
    return np.searchsorted(np.asarray(buckets), values, side="right")


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC-32C of `data` (TensorFlow's framing; google-crc32c's C code)."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class TFRecordGzipWriter:
    """Appends records to one GZIP TFRecord file (TensorFlow's framing: length, masked CRC-32C of the length,
    data, masked CRC-32C of the data), a batch at a time; compression runs outside the GIL."""

    def __init__(self, stream: BinaryIO, level: int = 1):
        self._stream = stream
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, 31)  # wbits 31: a gzip member
        self.records = 0

    def write(self, records) -> None:
        """Appends every record of `records` (a binary Arrow array without nulls, or a list of bytes)."""
        if not len(records):
            return
        values = records.to_pylist() if isinstance(records, pa.Array) else list(records)
        lengths = np.fromiter((len(v) for v in values), np.int64, count=len(values))
        heads = lengths.astype("<u8").tobytes()
        pack = struct.Struct("<I").pack
        frames = [
            head + pack(masked_crc(head)) + value + pack(masked_crc(value))
            for head, value in zip((heads[i : i + 8] for i in range(0, len(heads), 8)), values, strict=True)
        ]
        self._stream.write(self._compressor.compress(b"".join(frames)))
        self.records += len(values)

    def close(self) -> None:
        self._stream.write(self._compressor.flush())
