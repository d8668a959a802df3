"""Read a GGUF file (llama.cpp's model format): its metadata and its tensors, with numpy.

The layout (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md): a header, the
metadata as typed key/value pairs, one record per tensor (name, shape, type, offset),
then the tensor data, aligned. Tensors are mapped, not read, and dequantised to float32
on demand: F32, F16, BF16, Q8_0, Q4_0 and Q4_1 are the types small models ship in.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeAlias

import numpy as np
import numpy.typing as npt

__all__ = ["GgufError", "GgufFile", "Tensor", "dequantize", "read_gguf"]

MAGIC: Final = b"GGUF"
Floats: TypeAlias = npt.NDArray[np.float32]

# The metadata value types, by their number in the file: struct code and size.
_SCALARS: Final[Mapping[int, tuple[str, int]]] = {
    0: ("B", 1),
    1: ("b", 1),
    2: ("H", 2),
    3: ("h", 2),
    4: ("I", 4),
    5: ("i", 4),
    6: ("f", 4),
    7: ("?", 1),
    10: ("Q", 8),
    11: ("q", 8),
    12: ("d", 8),
}
_STRING, _ARRAY = 8, 9
# ggml tensor types: name, weights per block, bytes per block.
_TYPES: Final[Mapping[int, tuple[str, int, int]]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    8: ("Q8_0", 32, 34),
    30: ("BF16", 1, 2),
}


class GgufError(Exception):
    """The file is not a GGUF file this reader understands; the message says why."""


@dataclass(frozen=True)
class Tensor:
    """One tensor: ``shape`` in numpy order (rows first), ``data`` its raw bytes."""

    name: str
    shape: tuple[int, ...]
    kind: str
    data: npt.NDArray[np.uint8]

    def floats(self) -> Floats:
        """The tensor as float32, in ``shape``."""
        return dequantize(self.kind, self.data).reshape(self.shape)


@dataclass(frozen=True)
class GgufFile:
    """The metadata (``general.architecture`` ...) and the tensors by name."""

    path: Path
    metadata: Mapping[str, Any]
    tensors: Mapping[str, Tensor]

    def field(self, key: str) -> Any:
        """A metadata value, or GgufError naming the key when the file lacks it."""
        if key not in self.metadata:
            raise GgufError(
                f"{self.path}: the GGUF metadata has no {key!r}: "
                "use a GGUF file converted by llama.cpp's convert_hf_to_gguf.py"
            )
        return self.metadata[key]


class _Cursor:
    """Reads little-endian values from a buffer, front to back."""

    def __init__(self, buffer: bytes | mmap.mmap) -> None:
        self.buffer, self.at = buffer, 0

    def take(self, code: str, size: int) -> Any:
        (value,) = struct.unpack_from("<" + code, self.buffer, self.at)
        self.at += size
        return value

    def string(self) -> str:
        length = self.take("Q", 8)
        text = bytes(self.buffer[self.at : self.at + length]).decode("utf-8", "surrogateescape")
        self.at += length
        return text

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.take(*_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            inner, count = self.take("I", 4), self.take("Q", 8)
            if inner in _SCALARS:  # read numbers in one go: vocabularies are long
                code, size = _SCALARS[inner]
                values = list(struct.unpack_from(f"<{count}{code}", self.buffer, self.at))
                self.at += count * size
                return values
            return [self.value(inner) for _ in range(count)]
        raise GgufError(f"unknown GGUF metadata type {kind}")


def read_gguf(path: Path) -> GgufFile:
    """Map ``path`` and read its metadata and tensor records (the data stays on disk)."""
    with path.open("rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    if mapped[:4] != MAGIC:
        raise GgufError(f"{path} is not a GGUF file (it does not start with GGUF)")
    cursor = _Cursor(mapped)
    cursor.at = 4
    version, tensor_count, kv_count = cursor.take("I", 4), cursor.take("Q", 8), cursor.take("Q", 8)
    if version not in (2, 3):
        raise GgufError(f"{path}: GGUF version {version} is not supported (2 and 3 are)")
    metadata = {cursor.string(): cursor.value(cursor.take("I", 4)) for _ in range(kv_count)}
    records = [_tensor_record(cursor, path) for _ in range(tensor_count)]
    alignment = int(metadata.get("general.alignment", 32))
    start = -(-cursor.at // alignment) * alignment
    whole = np.frombuffer(mapped, dtype=np.uint8)
    tensors = {}
    for name, shape, kind, offset in records:
        size = _byte_size(kind, shape)
        data = whole[start + offset : start + offset + size]
        if data.size != size:
            raise GgufError(
                f"{path}: tensor {name} runs past the end of the file "
                "(a truncated download?): fetch the file again"
            )
        tensors[name] = Tensor(name, shape, _TYPES[kind][0], data)
    return GgufFile(path, metadata, tensors)


def _tensor_record(cursor: _Cursor, path: Path) -> tuple[str, tuple[int, ...], int, int]:
    name = cursor.string()
    dims = [cursor.take("Q", 8) for _ in range(cursor.take("I", 4))]
    kind, offset = cursor.take("I", 4), cursor.take("Q", 8)
    if kind not in _TYPES:
        known = ", ".join(name for name, _, _ in _TYPES.values())
        raise GgufError(
            f"{path}: tensor {name} has ggml type {kind}; this engine reads "
            f"{known}: use a GGUF file quantised to one of those"
        )
    return name, tuple(reversed(dims)), kind, offset  # ggml lists the row length first


def _byte_size(kind: int, shape: tuple[int, ...]) -> int:
    _, per_block, block_bytes = _TYPES[kind]
    count = int(np.prod(shape, dtype=np.int64))
    if count % per_block:
        raise GgufError(f"a tensor of {count} weights does not fill whole blocks of {per_block}")
    return count // per_block * block_bytes


def dequantize(kind: str, data: npt.NDArray[np.uint8]) -> Floats:
    """The weights in ``data`` (raw bytes of type ``kind``) as one flat float32 array."""
    if kind == "F32":
        return data.view(np.float32).copy()
    if kind == "F16":
        return data.view(np.float16).astype(np.float32)
    if kind == "BF16":
        return (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    if kind == "Q8_0":
        blocks = data.reshape(-1, 34)
        scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
        return (blocks[:, 2:].view(np.int8).astype(np.float32) * scale).reshape(-1)
    if kind in ("Q4_0", "Q4_1"):
        return _four_bit(data, with_min=kind == "Q4_1")
    raise GgufError(f"cannot dequantise ggml type {kind}")


def _four_bit(data: npt.NDArray[np.uint8], *, with_min: bool) -> Floats:
    """Q4_0 (scale, weights centred on 8) and Q4_1 (scale and minimum): 32 weights a block,
    the first 16 in the low nibbles, the last 16 in the high ones."""
    blocks = data.reshape(-1, 20 if with_min else 18)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    packed = blocks[:, 4:] if with_min else blocks[:, 2:]
    nibbles = np.concatenate([packed & 0x0F, packed >> 4], axis=1).astype(np.float32)
    if with_min:
        low = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
        return (nibbles * scale + low).reshape(-1)
    return ((nibbles - 8.0) * scale).reshape(-1)
