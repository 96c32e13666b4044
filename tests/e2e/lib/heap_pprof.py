#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Writes a heap snapshot as @datadog/pprof (Node) writes one: sample types objects/count and
# space/bytes, period type space/bytes, no inuse_/alloc_ prefix. Plain protobuf by hand, so the
# test does not depend on our encoder: heap_pprof.py OUT TIME_NS [go]  (two stacks, 74 MB in
# all; with "go" the sample types are Go's inuse_objects/inuse_space).
import struct, sys

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def field(num, payload):  # length-delimited
    return varint(num << 3 | 2) + varint(len(payload)) + payload

def vfield(num, n):
    return varint(num << 3) + varint(n)

def packed(num, xs):
    return field(num, b"".join(varint(x) for x in xs))

strings = ["", "objects", "count", "space", "bytes", "main", "load", "cache", "inuse_objects",
           "inuse_space"]
S = {s: i for i, s in enumerate(strings)}
out, t = sys.argv[1], int(sys.argv[2])
pre = "inuse_" if sys.argv[3:] == ["go"] else ""
p = b""
p += field(1, vfield(1, S[pre + "objects"]) + vfield(2, S["count"]))
p += field(1, vfield(1, S[pre + "space"]) + vfield(2, S["bytes"]))
# stacks are leaf first: load<-main holds 70 MB, cache<-main 4 MB
p += field(2, packed(1, [2, 1]) + packed(2, [700, 70000000]))
p += field(2, packed(1, [3, 1]) + packed(2, [40, 4000000]))
for fid, name in ((1, "main"), (2, "load"), (3, "cache")):
    p += field(4, vfield(1, fid) + field(4, vfield(1, fid)))
    p += field(5, vfield(1, fid) + vfield(2, S[name]))
for s in strings:
    p += field(6, s.encode())
p += vfield(9, t)
p += field(11, vfield(1, S["space"]) + vfield(2, S["bytes"]))
p += vfield(12, 524288)
open(out, "wb").write(p)
