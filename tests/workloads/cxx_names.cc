// SPDX-License-Identifier: Apache-2.0
// A C++ workload for the naming tests (tests/e2e/names_agree.sh): it burns CPU for SECONDS in
// frames whose names only read well demangled: a class template's member (two instantiations,
// which a readable profile shows as one function), an operator whose name holds '<', and a
// function in a namespace. Each is kept out of line, so that DWARF (strobe record) and the
// symbol table (the agent's default) see the same frames.
//   cxx_names SECONDS
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace shop {

template <typename T> struct Basket {
	T total{};
	__attribute__((noinline)) T add_items(long n)
	{
		volatile T t = total;
		for (long i = 0; i < n; i++)
			t = t + static_cast<T>(i & 7);
		total = t;
		return total;
	}
};

struct Price {
	long cents;
	__attribute__((noinline)) bool operator<(const Price &o) const
	{
		volatile long x = 0;
		for (long i = 0; i < 300000; i++)
			x = x + (i & 3);
		return cents + x < o.cents;
	}
};

__attribute__((noinline)) long checkout(long rounds)
{
	volatile long s = 0;
	for (long i = 0; i < rounds; i++)
		s = s + i % 13;
	return s;
}

} // namespace shop

static double now()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3;
	shop::Basket<int> bi;
	shop::Basket<double> bd;
	shop::Price a{1}, b{2};
	long n = 0;
	for (double end = now() + secs; now() < end; n++) {
		bi.add_items(300000);
		bd.add_items(300000);
		n += a < b;
		n += shop::checkout(300000) & 1;
	}
	printf("rounds %ld\n", n);
	return 0;
}
