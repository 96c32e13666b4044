// SPDX-License-Identifier: Apache-2.0
// A Java workload with a known CPU split for the JFR tests (tests/e2e/jfr_truth.sh): the main
// thread runs hot60, hot30 and hot10 in turns of 6, 3 and 1 calls of one unit of work, and measures the CPU
// time each got with its own thread clock, so the truth is what the JVM ran, not what we hoped
// for (a busy machine stretches wall time, not the split). Beside it, one thread allocates
// through allocBig and allocSmall (3:1 in bytes) and four threads meet on one monitor in
// contended, so the allocation and lock events have known hot methods too.
// Usage: java CpuSplit SECONDS  -> prints "truth METHOD PERCENT" lines on exit.
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class CpuSplit {
	static volatile long sink;
	static volatile boolean stop;
	static final Object MONITOR = new Object();

	static long spin(long n) {
		long x = sink;
		for (long i = 0; i < n; i++)
			x = x * 6364136223846793005L + 1442695040888963407L;
		return x;
	}
	static void hot60() { sink += spin(2_000_000); }
	static void hot30() { sink += spin(2_000_000); }
	static void hot10() { sink += spin(2_000_000); }

	static Object keep;
	static void allocBig() { for (int i = 0; i < 3; i++) keep = new byte[4096]; }
	static void allocSmall() { keep = new byte[4096]; }

	static void contended() throws InterruptedException {
		synchronized (MONITOR) {
			Thread.sleep(25);
		}
	}

	public static void main(String[] args) throws Exception {
		double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
		ThreadMXBean mx = ManagementFactory.getThreadMXBean();
		Thread alloc = new Thread(() -> {
			while (!stop) {
				allocBig();
				allocSmall();
				spin(2000);
			}
		}, "alloc");
		alloc.setDaemon(true);
		alloc.start();
		for (int t = 0; t < 4; t++) {
			Thread c = new Thread(() -> {
				try {
					while (!stop)
						contended();
				} catch (InterruptedException e) {
				}
			}, "contend-" + t);
			c.setDaemon(true);
			c.start();
		}
		long[] cpu = new long[3];
		long end = System.nanoTime() + (long)(seconds * 1e9);
		while (System.nanoTime() < end) {
			long t0 = mx.getCurrentThreadCpuTime();
			for (int i = 0; i < 6; i++) hot60();
			long t1 = mx.getCurrentThreadCpuTime();
			for (int i = 0; i < 3; i++) hot30();
			long t2 = mx.getCurrentThreadCpuTime();
			hot10();
			long t3 = mx.getCurrentThreadCpuTime();
			cpu[0] += t1 - t0;
			cpu[1] += t2 - t1;
			cpu[2] += t3 - t2;
		}
		stop = true;
		long sum = cpu[0] + cpu[1] + cpu[2];
		String[] names = {"hot60", "hot30", "hot10"};
		for (int i = 0; i < 3; i++)
			System.out.printf("truth CpuSplit.%s %.2f%n", names[i], 100.0 * cpu[i] / sum);
	}
}
