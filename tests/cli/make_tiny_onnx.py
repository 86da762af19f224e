"""Writes a tiny ONNX model (Identity, one input, one output) and its data as .npy, with
no dependency: the protobuf and .npy bytes are encoded here. Names may hold any text, so
the JSON tests of `ak` can use quotes and backslashes in them.

usage: make_tiny_onnx.py DIR INPUT_NAME OUTPUT_NAME DIM_NAME
writes DIR/model.onnx, DIR/inputs/INPUT_NAME.npy, DIR/ref/OUTPUT_NAME.npy (equal to the
input: Identity) and DIR/bad/OUTPUT_NAME.npy (different: a failing comparison)."""
import os
import struct
import sys


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, value):
    """An int field (wire type 0) or a bytes/str/message field (wire type 2)."""
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def value_info(name, dim_name):
    shape = field(1, field(2, dim_name)) + field(1, field(1, 3))  # [dim_name, 3]
    tensor_type = field(1, 1) + field(2, shape)  # elem_type FLOAT
    return field(1, name) + field(2, field(1, tensor_type))


def model(inp, out, dim_name):
    node = field(1, inp) + field(2, out) + field(4, "Identity")
    graph = field(1, node) + field(2, "tiny") + field(11, value_info(inp, dim_name)) + \
        field(12, value_info(out, dim_name))
    return field(1, 8) + field(2, "ak-test") + field(7, graph) + \
        field(8, field(1, "") + field(2, 13))


def npy(values, rows, cols):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + \
        struct.pack("<%df" % len(values), *values)


def main():
    folder, inp, out, dim_name = sys.argv[1:5]
    for sub in ("inputs", "ref", "bad"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    values = [0.5, -1.0, 2.0, 3.25, 0.0, -7.5]
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(model(inp, out, dim_name))
    with open(os.path.join(folder, "inputs", inp + ".npy"), "wb") as f:
        f.write(npy(values, 2, 3))
    with open(os.path.join(folder, "ref", out + ".npy"), "wb") as f:
        f.write(npy(values, 2, 3))
    with open(os.path.join(folder, "bad", out + ".npy"), "wb") as f:
        f.write(npy([v + 1 for v in values], 2, 3))


main()
