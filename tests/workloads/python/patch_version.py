# SPDX-License-Identifier: Apache-2.0
# Copies an ELF64 Python executable (non-PIE or PIE) and writes VERSION (hex, e.g. 0x036300f0)
# into its exported Py_Version, for the unknown-version test (tests/e2e/agent_python.sh).
#   python3 patch_version.py IN OUT VERSION      exits 2 when IN exports no Py_Version
import struct
import sys

src, dst, ver = sys.argv[1], sys.argv[2], int(sys.argv[3], 16)
b = bytearray(open(src, "rb").read())
shoff, = struct.unpack_from("<Q", b, 0x28)
shentsize, shnum = struct.unpack_from("<HH", b, 0x3A)
phoff, = struct.unpack_from("<Q", b, 0x20)
phentsize, phnum = struct.unpack_from("<HH", b, 0x36)
secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
addr = None
for s in secs:
    if s[1] != 11:  # SHT_DYNSYM
        continue
    strtab = secs[s[6]]
    for off in range(s[4], s[4] + s[5], 24):
        name, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", b, off)
        n0 = strtab[4] + name
        if b[n0:b.index(0, n0)] == b"Py_Version":
            addr = value
if addr is None:
    sys.exit(2)
for i in range(phnum):
    typ, _, off, vaddr, _, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", b, phoff + i * phentsize)
    if typ == 1 and vaddr <= addr < vaddr + filesz:
        struct.pack_into("<I", b, off + addr - vaddr, ver)
        break
else:
    sys.exit(2)
open(dst, "wb").write(b)
