// SPDX-License-Identifier: Apache-2.0
/*
 * Safety workload for libstrobe-heap.so (tests/e2e/record_heap.sh): C++ new/delete, containers
 * and strings from several threads, then a fork whose child allocates and exits with a known
 * status, then a fork+exec. Its output is deterministic, so a run with the library preloaded
 * must print exactly what a run without it prints, and exit the same way.
 */
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

static std::mutex mu;
static unsigned long long total;

__attribute__((noinline)) static unsigned long long work(int seed)
{
	unsigned long long sum = 0;
	for (int round = 0; round < 200; round++) {
		std::map<int, std::string> m;
		std::vector<std::unique_ptr<int[]>> blocks;
		for (int i = 0; i < 500; i++) {
			m[i * seed % 977] = std::string(static_cast<size_t>(i % 90 + 1), static_cast<char>('a' + i % 26));
			blocks.emplace_back(new int[static_cast<size_t>(i % 300 + 1)]());
			blocks.back()[0] = i;
		}
		for (auto &kv : m)
			sum += kv.first + kv.second.size();
		for (auto &b : blocks)
			sum += static_cast<unsigned long long>(b[0]);
		std::lock_guard<std::mutex> g(mu);
		total += 1;
	}
	return sum;
}

int main()
{
	std::vector<std::thread> ts;
	std::vector<unsigned long long> out(8);
	for (int t = 0; t < 8; t++)
		ts.emplace_back([t, &out] { out[static_cast<size_t>(t)] = work(t + 3); });
	for (auto &t : ts)
		t.join();
	for (int t = 0; t < 8; t++)
		std::printf("thread %d sum %llu\n", t, out[static_cast<size_t>(t)]);
	std::printf("rounds %llu\n", total);
	std::fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		unsigned long long s = work(11);
		std::printf("forked child sum %llu\n", s);
		std::fflush(stdout);
		_exit(3);
	}
	int st = 0;
	waitpid(c, &st, 0);
	std::printf("forked child status %d\n", WEXITSTATUS(st));
	std::fflush(stdout);
	c = fork();
	if (c == 0) {
		execl("/bin/sh", "sh", "-c", "echo exec child; exit 4", static_cast<char *>(nullptr));
		_exit(127);
	}
	waitpid(c, &st, 0);
	std::printf("exec child status %d\n", WEXITSTATUS(st));
	return 5;
}
