"""Prints a .moebundle (docs/runtime-contract.md) with its images replaced by
`<N bytes, ELF>`: an independent reader for the writer's lit tests."""
import sys

data = open(sys.argv[1], "rb").read()
pos = 0
while pos < len(data):
    end = data.index(b"\n", pos)
    line = data[pos:end].decode()
    pos = end + 1
    if line.startswith("image "):
        _, name, size = line.split(" ")
        blob = data[pos:pos + int(size)]
        assert len(blob) == int(size) and data[pos + int(size):pos + int(size) + 1] == b"\n"
        pos += int(size) + 1
        kind = ", ELF" if blob[:4] == b"\x7fELF" else ""
        print(f"image {name} <{size} bytes{kind}>")
    else:
        print(line)
