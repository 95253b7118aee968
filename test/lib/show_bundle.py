"""Prints a .moebundle (docs/runtime-contract.md) with its images replaced by
`<N bytes, ELF, fnv1a64 ok>` (the checksum a version-7 image line records,
recomputed here): an independent reader for the writer's lit tests."""
import sys


def fnv1a64(blob):
    value = 0xcbf29ce484222325
    for byte in blob:
        value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return value

data = open(sys.argv[1], "rb").read()
pos = 0
while pos < len(data):
    end = data.index(b"\n", pos)
    line = data[pos:end].decode()
    pos = end + 1
    if line.startswith("image "):
        _, name, size, *checksum = line.split(" ")
        blob = data[pos:pos + int(size)]
        assert len(blob) == int(size) and data[pos + int(size):pos + int(size) + 1] == b"\n"
        pos += int(size) + 1
        kind = ", ELF" if blob[:4] == b"\x7fELF" else ""
        if checksum:
            ok = checksum == [f"fnv1a64={fnv1a64(blob):016x}"]
            kind += ", fnv1a64 ok" if ok else f", {checksum} WRONG"
        print(f"image {name} <{size} bytes{kind}>")
    else:
        print(line)
