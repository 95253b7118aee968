#!/usr/bin/env python3
"""Rewrites every moe.grouped_matmul of a module (pretty form, one op a line)
to read its weights as they would lie [E, K, N]: a linalg.transpose of the
weights [E, N, K] before it, and `kn_weights` on it. The product is the
same, so the module must print what it printed before.

    python3 kn_weights.py IN.mlir > OUT.mlir
"""
import re
import sys

OP = re.compile(r"^(\s*)(%\S+) = moe\.grouped_matmul (%\w+), (%\w+), (%\w+)(.*?) : "
                r"\((tensor<[^>]*>), tensor<(\d+)x(\d+)x(\d+)x(\w+)>(.*)$")


def main(path):
    lines, count = [], 0
    for line in open(path):
        m = OP.match(line)
        if not m:
            lines.append(line)
            continue
        (indent, result, rows, weights, offsets, rest, rows_type, e, n, k, element,
         tail) = m.groups()
        count += 1
        source = f"tensor<{e}x{n}x{k}x{element}>"
        target = f"tensor<{e}x{k}x{n}x{element}>"
        kn = f"%kn_weights{count}"
        lines.append(f"{indent}{kn}_init = tensor.empty() : {target}\n")
        lines.append(f"{indent}{kn} = linalg.transpose ins({weights} : {source}) "
                     f"outs({kn}_init : {target}) permutation = [0, 2, 1]\n")
        lines.append(f"{indent}{result} = moe.grouped_matmul {rows}, {kn}, {offsets}"
                     f"{rest} kn_weights : ({rows_type}, {target}{tail}\n")
    if not count:
        sys.exit(f"kn_weights.py: no moe.grouped_matmul in {path}")
    sys.stdout.write("".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
