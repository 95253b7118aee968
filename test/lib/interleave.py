#!/usr/bin/env python3
"""Rewrites every moe.swiglu and moe.swiglu_grad of a module (one op a line,
dynamic M) to read its gate-up input interleaved (gate column i at 2i, up
at 2i + 1, as GPT-OSS's gate-up projection lies): the input is interleaved
first (expand to [M, 2, I], transpose to [M, I, 2], collapse), the op gets
`interleaved`, and a gradient is put back into halves after it. The values
are the same, so the module must print what it printed before.

    python3 interleave.py IN.mlir > OUT.mlir
"""
import re
import sys

ACT = re.compile(r"^(\s*)(%\S+) = moe\.swiglu (\w+) (%[\w.#]+)( scale %[\w.#]+)?(.*?) : "
                 r"\(tensor<\?x(\d+)x(\w+)>(.*)$")
GRAD = re.compile(r"^(\s*)(%\S+) = moe\.swiglu_grad (\w+) (%[\w.#]+), (%[\w.#]+)(.*?) : "
                  r"\(tensor<\?x(\d+)x(\w+)>(.*)$")


def reshuffle(indent, name, temp, source, width, element, interleave):
    """`name` = `source` ([?, width]) interleaved, or back into halves
    (values named `temp`_... on the way)."""
    half = width // 2
    wide = f"tensor<?x{width}x{element}>"
    split = f"tensor<?x2x{half}x{element}>" if interleave else f"tensor<?x{half}x2x{element}>"
    swapped = f"tensor<?x{half}x2x{element}>" if interleave else f"tensor<?x2x{half}x{element}>"
    inner = "2, " + str(half) if interleave else str(half) + ", 2"
    return [
        f"{indent}{temp}_c0 = arith.constant 0 : index\n",
        f"{indent}{temp}_m = tensor.dim {source}, {temp}_c0 : {wide}\n",
        f"{indent}{temp}_split = tensor.expand_shape {source} [[0], [1, 2]] "
        f"output_shape [{temp}_m, {inner}] : {wide} into {split}\n",
        f"{indent}{temp}_init = tensor.empty({temp}_m) : {swapped}\n",
        f"{indent}{temp}_swap = linalg.transpose ins({temp}_split : {split}) "
        f"outs({temp}_init : {swapped}) permutation = [0, 2, 1]\n",
        f"{indent}{name} = tensor.collapse_shape {temp}_swap [[0], [1, 2]] : {swapped} into {wide}\n",
    ]


def main(path):
    lines, count = [], 0
    for line in open(path):
        grad = GRAD.match(line)
        m = grad or ACT.match(line)
        if not m:
            lines.append(line)
            continue
        # `extra`: the gradient's operand, or the activation's scale clause.
        indent, result, act, source, extra, rest, width, element, tail = m.groups()
        count += 1
        il = f"%il{count}"
        types = f"(tensor<?x{width}x{element}>{tail}\n"
        lines += reshuffle(indent, il, il, source, int(width), element, True)
        if grad:
            lines.append(f"{indent}{il}_grad = moe.swiglu_grad {act} {il}, {extra} interleaved{rest} : {types}")
            lines += reshuffle(indent, result, f"{il}_back", f"{il}_grad", int(width), element, False)
        else:
            lines.append(f"{indent}{result} = moe.swiglu {act} {il}{extra or ''} interleaved{rest} : {types}")
    if not count:
        sys.exit(f"interleave.py: no moe.swiglu or moe.swiglu_grad in {path}")
    sys.stdout.write("".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
