#!/usr/bin/env python3
"""The Python side of tests/train/checkpoint_safetensors_python_test.cpp: graphstep's
safetensors files against the safetensors package, numpy and PyTorch.

    checkpoint_safetensors_interop.py read <file>         checks a checkpoint graphstep wrote
    checkpoint_safetensors_interop.py write <file>        writes known tensors with PyTorch
    checkpoint_safetensors_interop.py write-int64 <file>  writes an int64 tensor graphstep refuses

The values are given by formulas that the C++ test computes on its side too (keep the two in
step): element i of each tensor, in row-major order, is

    model/w                    F32  [2, 3]  0.25 * i - 1
    model/b                    BF16 [4]     (i - 1.5) * 0.5
    model/h                    F16  [3]     1.0, -2.0, 0.5
    data/tokens                I32  [2, 2]  7, -3, 2**31 - 1, -2**31
    dropout/mask               U8   [5]     0, 1, 255, 128, 7
    optimizer/exp_avg/model/w  F32  [2, 3]  1 / (i + 1), rounded to float32
    scalar                     F32  []      3.5
    empty                      F32  [0, 4]  (no element)

and graphstep's checkpoint also holds two values: "step", the int64 123456789012, and
"optimizer/adam", a struct {double beta1 = 0.9; double beta2 = 0.999; int64 step = 10}.
Exits 0 when every check holds; prints each failure and exits 1 otherwise."""

import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def expected_tensors():
    """name -> (safetensors dtype, shape, values as a list of Python numbers)."""
    return {
        "model/w": ("F32", [2, 3], [0.25 * i - 1 for i in range(6)]),
        "model/b": ("BF16", [4], [(i - 1.5) * 0.5 for i in range(4)]),
        "model/h": ("F16", [3], [1.0, -2.0, 0.5]),
        "data/tokens": ("I32", [2, 2], [7, -3, 2**31 - 1, -(2**31)]),
        "dropout/mask": ("U8", [5], [0, 1, 255, 128, 7]),
        "optimizer/exp_avg/model/w": ("F32", [2, 3], [1 / (i + 1) for i in range(6)]),
        "scalar": ("F32", [], [3.5]),
        "empty": ("F32", [0, 4], []),
    }


TORCH_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16,
                "I32": torch.int32, "U8": torch.uint8}
NUMPY_DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "U8": np.uint8}


def torch_tensor(dtype, shape, values):
    return torch.tensor(values, dtype=TORCH_DTYPES[dtype]).reshape(shape)


def read(path):
    problems = []
    expected = expected_tensors()
    values = {"step": 8, "optimizer/adam": 24}

    with safe_open(path, framework="np") as f:
        metadata = f.metadata()
        names = set(f.keys())
        want_metadata = {"graphstep.checkpoint": "1"}
        want_metadata.update({f"graphstep.value:{n}": str(s) for n, s in values.items()})
        if metadata != want_metadata:
            problems.append(f"metadata {metadata}, expected {want_metadata}")
        if names != set(expected) | set(values):
            problems.append(f"tensors {sorted(names)}, expected "
                            f"{sorted(set(expected) | set(values))}")
        # numpy has no bfloat16: the BF16 tensor is read through torch below.
        for name, (dtype, shape, want) in expected.items():
            if dtype == "BF16" or name not in names:
                continue
            got = f.get_tensor(name)
            want_array = np.array(want, dtype=NUMPY_DTYPES[dtype]).reshape(shape)
            if got.dtype != want_array.dtype or list(got.shape) != shape:
                problems.append(f"{name}: {got.dtype} {list(got.shape)}, expected "
                                f"{want_array.dtype} {shape}")
            elif got.tobytes() != want_array.tobytes():  # bit for bit
                problems.append(f"{name}: {got.ravel().tolist()}, expected {want}")
        # Host values: U8 tensors of their bytes.
        if "step" in names:
            step = np.frombuffer(f.get_tensor("step").tobytes(), dtype="<i8")
            if step.tolist() != [123456789012]:
                problems.append(f"step: {step.tolist()}, expected [123456789012]")
        if "optimizer/adam" in names:
            adam = np.frombuffer(f.get_tensor("optimizer/adam").tobytes(),
                                 dtype=[("beta1", "<f8"), ("beta2", "<f8"), ("step", "<i8")])
            if adam.tolist() != [(0.9, 0.999, 10)]:
                problems.append(f"optimizer/adam: {adam.tolist()}, expected [(0.9, 0.999, 10)]")

    # Every tensor through PyTorch too, the BF16 one compared by its raw bits.
    loaded = load_file(path)
    for name, (dtype, shape, want) in expected.items():
        if name not in loaded:
            continue
        got = loaded[name]
        want_tensor = torch_tensor(dtype, shape, want)
        if got.dtype != want_tensor.dtype or list(got.shape) != shape:
            problems.append(f"torch {name}: {got.dtype} {list(got.shape)}, expected "
                            f"{want_tensor.dtype} {shape}")
        elif dtype == "BF16":
            got_bits = got.view(torch.int16).tolist()
            want_bits = want_tensor.view(torch.int16).tolist()
            if got_bits != want_bits:
                problems.append(f"torch {name}: bits {got_bits}, expected {want_bits}")
        elif not torch.equal(got, want_tensor):
            problems.append(f"torch {name}: {got.tolist()}, expected {want_tensor.tolist()}")
    return problems


def write(path):
    tensors = {name: torch_tensor(dtype, shape, values)
               for name, (dtype, shape, values) in expected_tensors().items()}
    save_file(tensors, path, metadata={"format": "pt"})
    return []


def write_int64(path):
    save_file({"positions": torch.arange(3, dtype=torch.int64)}, path)
    return []


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("read", "write", "write-int64"):
        print(__doc__)
        return 2
    mode, path = sys.argv[1], sys.argv[2]
    problems = {"read": read, "write": write, "write-int64": write_int64}[mode](path)
    for problem in problems:
        print(f"FAILED: {problem}")
    if not problems:
        print(f"{mode}: ok ({path})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
