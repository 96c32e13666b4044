// SPDX-License-Identifier: Apache-2.0
// A Java workload with a known CPU split for native sampling through HotSpot's perf map
// (tests/e2e/agent_jvm.sh): three threads, each running one method (run60, run30, run10) for
// its whole life, which burns 6, 3 or 1 ms of every 10 ms and sleeps the rest. Each method is
// its thread's only frame of Java code, so once compiled (on-stack replacement of its loop) its
// samples fall in a code blob named after it: no caller inlines it, which would hide it from a
// perf map (a perf map has no inlined frames, unlike JFR with -XX:+DebugNonSafepoints).
// Each thread measures the CPU it got with its own thread clock, so the truth is what ran.
// Usage: java JitSplit SECONDS TRUTHFILE -> writes "pid N", "process_cpu_ns N" (the three
// threads' sum) and "JitSplit.runNN NS" lines to TRUTHFILE when done.
import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class JitSplit {
	static volatile long sink;
	static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();
	static final long[] CPU = new long[3];

	static void run60(long end) throws InterruptedException {
		long c0 = MX.getCurrentThreadCpuTime(), x = sink;
		while (System.nanoTime() < end) {
			long until = System.nanoTime() + 6_000_000;
			while (System.nanoTime() < until)
				for (int i = 0; i < 20_000; i++)
					x = x * 6364136223846793005L + 1442695040888963407L;
			Thread.sleep(4);
		}
		sink += x;
		CPU[0] = MX.getCurrentThreadCpuTime() - c0;
	}

	static void run30(long end) throws InterruptedException {
		long c0 = MX.getCurrentThreadCpuTime(), x = sink;
		while (System.nanoTime() < end) {
			long until = System.nanoTime() + 3_000_000;
			while (System.nanoTime() < until)
				for (int i = 0; i < 20_000; i++)
					x = x * 6364136223846793005L + 1442695040888963407L;
			Thread.sleep(7);
		}
		sink += x;
		CPU[1] = MX.getCurrentThreadCpuTime() - c0;
	}

	static void run10(long end) throws InterruptedException {
		long c0 = MX.getCurrentThreadCpuTime(), x = sink;
		while (System.nanoTime() < end) {
			long until = System.nanoTime() + 1_000_000;
			while (System.nanoTime() < until)
				for (int i = 0; i < 20_000; i++)
					x = x * 6364136223846793005L + 1442695040888963407L;
			Thread.sleep(9);
		}
		sink += x;
		CPU[2] = MX.getCurrentThreadCpuTime() - c0;
	}

	interface Body { void run(long end) throws InterruptedException; }

	public static void main(String[] args) throws Exception {
		double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
		long end = System.nanoTime() + (long)(seconds * 1e9);
		Body[] bodies = {JitSplit::run60, JitSplit::run30, JitSplit::run10};
		Thread[] t = new Thread[3];
		for (int i = 0; i < 3; i++) {
			Body b = bodies[i];
			t[i] = new Thread(() -> {
				try {
					b.run(end);
				} catch (InterruptedException e) {
				}
			}, "burn-" + i);
			t[i].start();
		}
		for (Thread th : t)
			th.join();
		try (PrintWriter w = new PrintWriter(args.length > 1 ? args[1] : "/dev/stdout")) {
			w.printf("pid %d%n", ProcessHandle.current().pid());
			w.printf("process_cpu_ns %d%n", CPU[0] + CPU[1] + CPU[2]);
			String[] names = {"run60", "run30", "run10"};
			for (int i = 0; i < 3; i++)
				w.printf("JitSplit.%s %d%n", names[i], CPU[i]);
		}
	}
}
