"""Tensors over the bytes of a safetensors file already in memory, without a copy.

``safetensors.torch.load(bytes)`` copies every tensor out of the buffer; the checkpoint reader has just mapped
(and hashed) the file copy-on-write, so the tensors here are views of that mapping (``torch.frombuffer``). The
format: an 8-byte little-endian header length, a JSON header ``{name: {dtype, shape, data_offsets}}`` (plus
``__metadata__``), then the data, offsets relative to the data's start. Nothing here unpickles anything.
"""

from __future__ import annotations

import json
import mmap
import struct
from typing import Any

_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}


def tensors_from_buffer(buffer: bytearray | mmap.mmap) -> dict[str, Any]:
    """The tensors of a safetensors file held in ``buffer`` (views of it); ValueError for a malformed file."""
    import torch

    if len(buffer) < 8:
        raise ValueError(f"{len(buffer)} bytes is shorter than the 8-byte header length")
    (header_len,) = struct.unpack("<Q", bytes(buffer[:8]))
    start = 8 + header_len
    if start > len(buffer):
        raise ValueError(f"header length {header_len} runs past the end of the file ({len(buffer)} bytes)")
    try:
        header = json.loads(bytes(buffer[8:start]).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"header is not JSON: {exc}") from exc
    view = memoryview(buffer)
    out: dict[str, Any] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = getattr(torch, _DTYPES[info["dtype"]])
            shape = [int(n) for n in info["shape"]]
            begin, end = (int(n) for n in info["data_offsets"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"tensor {name!r} has a malformed entry {info!r}") from exc
        count = 1
        for n in shape:
            count *= n
        itemsize = torch.empty((), dtype=dtype).element_size()
        if not 0 <= begin <= end <= len(buffer) - start or end - begin != count * itemsize:
            raise ValueError(f"tensor {name!r} has offsets {begin}..{end} that do not fit its shape or the file")
        if count == 0:
            out[name] = torch.empty(shape, dtype=dtype)
        else:
            out[name] = torch.frombuffer(view[start + begin : start + end], dtype=dtype).reshape(shape)
    return out
