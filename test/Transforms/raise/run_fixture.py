"""Runs a raised fixture on the CPU against torch's eager output.

`run_fixture.py driver NAME IO RAISED` prints the raised module RAISED (what
`moe-opt --moe-raise` made of fixtures/NAME.mlir) with a `@main` that calls
`@NAME` on the input recorded in IO (fixtures/NAME.io.txt, written by
export/export_fixtures.py) and prints the layer output. `run_fixture.py
check IO OUT [TOLERANCE]` compares what mlir-runner printed with the recorded
torch output (relative L2 error at most TOLERANCE, 1e-5 by default). A bf16
fixture's input is passed as bf16 (the recorded values are bf16 exactly) and
its bf16 output is extended to f32 to be printed.
"""
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "lib"))
from mlir_data import literal, parse_memrefs, rel_l2  # noqa: E402

# f32 end to end; the sums run in another order and printing keeps 6 digits.
# bf16 fixtures pass their own (see raise-fixtures-run.mlir).
TOLERANCE = 1e-5


def read_io(path):
    lines = [l for l in open(path).read().splitlines() if l.strip()]
    shapes = [[int(d) for d in re.findall(r"\d+", l)] for l in lines if l.startswith("#")]
    data = [np.array([float(v) for v in l.split()], dtype=np.float32)
            for l in lines if not l.startswith("#")]
    return data[0].reshape(shapes[0]), data[1].reshape(shapes[1])


def driver(name, io_path, raised_path):
    x, _ = read_io(io_path)
    text = open(raised_path).read()
    signature = re.search(r"func\.func @%s\((%%\w+): (tensor<[^>]*>)\) -> \((.*)\) \{" % name, text)
    if not signature:
        sys.exit("no func.func @%s in %s" % (name, raised_path))
    arg_type, result_types = signature.group(2), signature.group(3)
    element = arg_type[:-1].split("x")[-1]
    if element not in ("f32", "bf16"):
        sys.exit("unsupported element type %s" % element)
    shape = "x".join(str(d) for d in x.shape)
    static_type = "tensor<%sx%s>" % (shape, element)
    result_type = result_types.split(", ")[0]
    main = [
        "  func.func private @printMemrefF32(tensor<*xf32>)",
        "  func.func @main() {",
        "    %%x = arith.constant %s : %s" % (literal(x, element), static_type),
        "    %%xd = tensor.cast %%x : %s to %s" % (static_type, arg_type),
        "    %%y:2 = call @%s(%%xd) : (%s) -> (%s)" % (name, arg_type, result_types),
    ]
    if element == "f32":
        main.append("    %%u = tensor.cast %%y#0 : %s to tensor<*xf32>" % result_type)
    else:
        # The output has the input's shape: extend it to f32 for printing.
        main += [
            "    %%ys = tensor.cast %%y#0 : %s to %s" % (result_type, static_type),
            "    %%e = tensor.empty() : tensor<%sxf32>" % shape,
            "    %%yf = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>,"
            " affine_map<(a, b, c) -> (a, b, c)>], iterator_types = [\"parallel\", \"parallel\","
            " \"parallel\"]} ins(%%ys : %s) outs(%%e : tensor<%sxf32>) {" % (static_type, shape),
            "    ^bb0(%in: bf16, %out: f32):",
            "      %f = arith.extf %in : bf16 to f32",
            "      linalg.yield %f : f32",
            "    } -> tensor<%sxf32>" % shape,
            "    %%u = tensor.cast %%yf : tensor<%sxf32> to tensor<*xf32>" % shape,
        ]
    main += [
        "    call @printMemrefF32(%u) : (tensor<*xf32>) -> ()",
        "    return",
        "  }",
    ]
    # Before the module's closing brace (the resource blobs follow it).
    end = text.find("\n{-#")
    end = len(text) if end < 0 else end
    close = text.rfind("}", 0, end)
    print(text[:close] + "\n".join(main) + "\n" + text[close:])


def check(io_path, out_path, tolerance=TOLERANCE):
    tolerance = float(tolerance)
    _, expected = read_io(io_path)
    printed = parse_memrefs(open(out_path).read())
    if len(printed) != 1:
        sys.exit("FAIL: expected 1 printed tensor, got %d" % len(printed))
    err = rel_l2(printed[0], expected)
    if not err <= tolerance:
        sys.exit("FAIL: rel L2 %.3g against torch (tolerance %.g)" % (err, tolerance))
    print("PASS: rel L2 %.3g against torch (tolerance %.g)" % (err, tolerance))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "driver":
        driver(*sys.argv[2:])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "check":
        check(*sys.argv[2:])
    else:
        sys.exit(__doc__)
