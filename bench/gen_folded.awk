# SPDX-License-Identifier: Apache-2.0
# Benchmark input generator: NSTACKS unique folded stacks from a fixed seed, shaped like a real
# service profile: each new stack takes an earlier one, keeps a prefix of it (biased towards
# keeping most of it) and adds 1-6 new frames, so stacks share prefixes and deepen as a real
# call tree does; names are drawn from 20,000 Go-style function names.
#   awk -v seed=42 -v nstacks=200000 -f bench/gen_folded.awk | LC_ALL=C sort
function fname(f) { return "svc/pkg" (f % 97) ".(*T" (f % 13) ").Method" f }
BEGIN {
  srand(seed); n = 0; P = 20000; m = 0
  for (r = 0; r < 8; r++) {
    s = "main"; d = 4 + int(rand() * 6)
    for (i = 0; i < d; i++) s = s ";" fname(int(rand() * P))
    st[m++] = s
  }
  while (n < nstacks) {
    k = split(st[int(rand() * m)], a, ";")
    cut = k - int(rand() * rand() * (k - 2)); if (cut < 3) cut = 3
    s = a[1]; for (i = 2; i <= cut; i++) s = s ";" a[i]
    add = 1 + int(rand() * 6); if (cut + add > 60) add = 1
    for (i = 0; i < add; i++) s = s ";" fname(int(rand() * P))
    if (!(s in seen)) { seen[s] = 1; st[m++] = s; print s, 1 + int(rand() * 50); n++ }
  }
}
