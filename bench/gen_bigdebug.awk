# SPDX-License-Identifier: Apache-2.0
# One translation unit of a large generated program for bench/symbolize_big.sh: NF functions
# (noinline), each with three calls to 8 always_inline helpers (so DWARF holds inlined
# subroutines and their call sites), and NS record types of 40 members (compiled with
# -fno-eliminate-unused-debug-types: the bulk of the DWARF, as types are in C++ programs' debug
# files, for a fraction of the compile time functions cost).
#   awk -v tu=T -v nf=N -v ns=S -f bench/gen_bigdebug.awk > tT.c

BEGIN {
  printf "#include <stdint.h>\n"
  printf "struct big_%d { int64_t a, b, c; double d[4]; const char *name; };\n", tu
  for (h = 0; h < 8; h++)
    printf "static inline __attribute__((always_inline)) int64_t inl_%d_%d(struct big_%d *s, int64_t x)\n{\n\tint64_t r = x * %d + s->a;\n\tfor (int i = 0; i < 4; i++)\n\t\tr ^= (int64_t)s->d[i] + (r >> %d);\n\ts->b += r;\n\treturn r + s->c;\n}\n", tu, h, tu, h + 3, h + 1
  for (t = 0; t < ns; t++) {
    printf "struct rec_%d_%d {\n", tu, t
    for (m = 0; m < 40; m++)
      printf "\tint%d_t field_%d_%d_%d;\n", (m % 4 == 0 ? 64 : m % 4 == 1 ? 32 : m % 4 == 2 ? 16 : 8), tu, t, m
    printf "};\n"
  }
  for (f = 0; f < nf; f++) {
    printf "__attribute__((noinline)) int64_t fn_%d_%d(struct big_%d *s, int64_t x)\n{\n", tu, f, tu
    printf "\tint64_t acc = x;\n"
    printf "\tif (x > %d)\n\t\tacc += inl_%d_%d(s, x - %d);\n", f % 97, tu, f % 8, f % 13
    printf "\telse\n\t\tacc -= inl_%d_%d(s, x + %d);\n", tu, (f + 3) % 8, f % 7
    printf "\tfor (int64_t i = 0; i < (x & 7); i++)\n\t\tacc = acc * 31 + inl_%d_%d(s, i);\n", tu, (f + 5) % 8
    printf "\treturn acc;\n}\n"
  }
}
