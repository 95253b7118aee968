#!/usr/bin/env python3
"""Extract the payload of the first #gpu.object in a lowered MLIR file.

usage: extract_gpu_object.py <lowered.mlir> <out-file>
The object is either `assembly = "..."` (cubin-format=isa -> PTX text) or the
bare string payload (cubin-format=bin -> cubin bytes). MLIR escapes
non-printable bytes as \\XX (two hex digits) and '"' / '\\' as \\22 / \\5C.
"""
import re
import sys

src = open(sys.argv[1], "r", encoding="latin-1").read()
i = src.find("#gpu.object<")
if i < 0:
    sys.exit("no #gpu.object found")
# The payload is the last quoted string of the gpu.object attribute.
m = re.compile(r'(assembly = )?"((?:[^"\\]|\\[0-9A-Fa-f]{2}|\\[\\"nt])*)"')
best = None
for mm in m.finditer(src, i):
    best = mm
    # stop at the first string after 'properties' block that is long
    if len(mm.group(2)) > 256:
        break
if best is None:
    sys.exit("no payload string")
s = best.group(2)
out = bytearray()
k = 0
while k < len(s):
    c = s[k]
    if c == "\\":
        nxt = s[k + 1]
        if nxt in "0123456789abcdefABCDEF" and k + 2 < len(s) and s[k + 2] in "0123456789abcdefABCDEF":
            out.append(int(s[k + 1:k + 3], 16)); k += 3; continue
        out.append({"n": 10, "t": 9, "\\": 92, '"': 34}[nxt]); k += 2; continue
    out.append(ord(c)); k += 1
open(sys.argv[2], "wb").write(bytes(out))
print(f"wrote {len(out)} bytes to {sys.argv[2]}")
