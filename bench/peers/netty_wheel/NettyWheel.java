// The peer of BENCHMARKS.md's W1 to W5: Netty's HashedWheelTimer (Debian's
// libnetty-java 4.1.48 on Java 17, 1 ms tick, 512 slots, as BENCHMARKS.md measured it),
// run on the machine that runs asio_wheel_bench, so that issue 13's "overtake Netty on
// expiry storms and memory" is measured where our figures are. bench/peers/run.sh
// alternates it with asio_wheel_bench.
//
//   java -cp netty-common.jar NettyWheel.java W1|W2|W3|W4|W5 [N]
//
// W1 churn: N timeouts pending (deadlines uniform in [1 s, 60 s]); one op is a
//   newTimeout at a random deadline and its cancel. Netty has no handler to run for a
//   cancelled timeout; its worker thread takes the timeout out of its bucket at the next
//   tick, so the work is in two threads: reported per op are the wall time of the loop
//   and the CPU time of both threads over it, until the worker has removed them: what
//   BENCHMARKS.md's "Netty's total CPU" means.
// W2 idle reset: N timeouts pending; one op picks a random one and moves it to a random
//   deadline in [1 s, 60 s]. Netty cannot move a timeout: the op is its cancel and a new
//   timeout (the worker removes the old one a tick later). Reported as for W1.
// W3 fire: N timeouts all due within 50 ms (uniform); the clock starts before the first
//   newTimeout and stops when the last has run. Reported: ms, and how many ran before
//   their deadline (early).
// W4 memory: N timeouts pending, deadlines in [1 s, 60 s]; reported per timeout: the
//   growth of the Java heap in use after a full GC (the objects: each timeout, its task
//   and the caller's reference to it) and of the process's resident set (what the
//   machine pays), both from before the first newTimeout to once the worker has moved
//   all of them into its buckets.
//
// W5 idle wake-ups: 10k timeouts due in 60 s, nothing else, for 5 s: the voluntary
//   context switches per second of the worker thread (each a wake-up from its sleep to
//   the next tick), read from /proc.
//
// Each of W1, W2 and W3 runs one unrecorded warm-up repetition (the JIT) and 5 recorded ones,
// and reports their median (and min), as asio_wheel_bench does.
import io.netty.util.HashedWheelTimer;
import io.netty.util.Timeout;
import io.netty.util.TimerTask;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

public class NettyWheel {
  static final int REPS = 5;

  // The timer's worker thread: its CPU time (W1, W2) and its wake-ups (W5).
  static volatile Thread worker;

  static HashedWheelTimer newTimer() {
    HashedWheelTimer t = new HashedWheelTimer(r -> {
      Thread th = Executors.defaultThreadFactory().newThread(r);
      worker = th;
      return th;
    }, 1, TimeUnit.MILLISECONDS, 512);
    t.start();
    return t;
  }

  // CPU time of this thread and the timer's worker, in ns (the JVM's own threads, its
  // JIT and GC, are left out: asio_wheel_bench has none).
  static long churnCpuNanos() {
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    return mx.getCurrentThreadCpuTime() + mx.getThreadCpuTime(worker.getId());
  }

  static long residentBytes() throws Exception {
    // /proc/self/statm: size resident ... in pages.
    String[] f = Files.readString(Path.of("/proc/self/statm")).trim().split("\\s+");
    return Long.parseLong(f[1]) * 4096;
  }

  static long heapInUse() {
    Runtime r = Runtime.getRuntime();
    for (int i = 0; i < 3; ++i) System.gc();
    return r.totalMemory() - r.freeMemory();
  }

  // What a user passes: a task of its own per timeout, holding one reference (the
  // connection it would close), as asio_wheel_bench's handlers hold one pointer.
  static final class CountTask implements TimerTask {
    final AtomicLong runs;
    CountTask(AtomicLong runs) { this.runs = runs; }
    @Override public void run(Timeout timeout) { runs.incrementAndGet(); }
  }

  static long[] randomMillis(SplittableRandom rng, int n, long from, long to) {
    long[] d = new long[n];
    for (int i = 0; i < n; ++i) d[i] = rng.nextLong(from, to + 1);
    return d;
  }

  // One figure, in the line format of bench/peers/run.sh: workload, implementation,
  // metric, N, value, unit, a note without spaces.
  static void report(String id, String metric, int n, double value, String unit, String note) {
    System.out.println(id + " netty " + metric + " " + n + " " + round(value) + " " + unit + " " + note);
  }

  static String round(double v) {
    return String.format("%.1f", v);
  }

  static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  static double min(double[] v) {
    return Arrays.stream(v).min().getAsDouble();
  }

  // The worker takes at most 100000 new timeouts from its queue into its buckets per
  // tick, so 1M take 10 ticks. pendingTimeouts counts the queued ones too and cannot say
  // when they are all in, so this waits a fixed 100 ms (100 ticks).
  static void settle() throws InterruptedException {
    Thread.sleep(100);
  }

  // One op of W1 or W2: call i of a repetition, given that repetition's random draws.
  interface Op {
    void run(int i);
  }

  // W1's and W2's measurement: a warm-up and REPS repetitions of `ops` ops, each op from
  // `repetition` (which makes the repetition's draws), timed by the wall clock and by the
  // CPU time of this thread and the worker until the worker has taken out what they
  // cancelled (a few ticks). The timer holds n pending timeouts throughout.
  static void timeOps(HashedWheelTimer timer, int n, String id, String metric, int ops,
                      Supplier<Op> repetition) throws Exception {
    double[] wall = new double[REPS], cpu = new double[REPS];
    for (int rep = -1; rep < REPS; ++rep) {
      Op op = repetition.get();
      long cpu0 = churnCpuNanos(), t0 = System.nanoTime();
      for (int i = 0; i < ops; ++i) op.run(i);
      long t1 = System.nanoTime();
      while (timer.pendingTimeouts() > n) Thread.sleep(1);
      long cpu1 = churnCpuNanos();
      if (rep >= 0) {
        wall[rep] = (t1 - t0) / (double) ops;
        cpu[rep] = (cpu1 - cpu0) / (double) ops;
      }
    }
    timer.stop();
    report(id, metric + "_wall", n, median(wall), "ns/op", "min=" + round(min(wall)));
    report(id, metric + "_cpu", n, median(cpu), "ns/op", "min=" + round(min(cpu)));
  }

  static final int OPS = 1_000_000;

  static void w1(int n) throws Exception {
    SplittableRandom rng = new SplittableRandom(1);
    HashedWheelTimer timer = newTimer();
    AtomicLong runs = new AtomicLong();
    for (long d : randomMillis(rng, n, 1000, 60000)) timer.newTimeout(new CountTask(runs), d, TimeUnit.MILLISECONDS);
    settle();
    timeOps(timer, n, "W1", "churn", OPS, () -> {
      long[] delays = randomMillis(rng, OPS, 1000, 60000);
      return i -> timer.newTimeout(new CountTask(runs), delays[i], TimeUnit.MILLISECONDS).cancel();
    });
  }

  static void w2(int n) throws Exception {
    SplittableRandom rng = new SplittableRandom(2);
    HashedWheelTimer timer = newTimer();
    AtomicLong runs = new AtomicLong();
    Timeout[] pending = new Timeout[n];
    long[] initial = randomMillis(rng, n, 1000, 60000);
    for (int i = 0; i < n; ++i)
      pending[i] = timer.newTimeout(new CountTask(runs), initial[i], TimeUnit.MILLISECONDS);
    settle();
    timeOps(timer, n, "W2", "reset", OPS, () -> {
      long[] delays = randomMillis(rng, OPS, 1000, 60000);
      int[] which = new int[OPS];
      for (int i = 0; i < OPS; ++i) which[i] = rng.nextInt(n);
      return i -> {
        Timeout old = pending[which[i]];
        old.cancel();
        pending[which[i]] = timer.newTimeout(old.task(), delays[i], TimeUnit.MILLISECONDS);
      };
    });
  }

  // The voluntary context switches of the thread named `name` (/proc/self/task/*/comm).
  static long contextSwitches(String name) throws Exception {
    try (var tasks = Files.list(Path.of("/proc/self/task"))) {
      for (Path task : (Iterable<Path>) tasks::iterator) {
        if (!Files.readString(task.resolve("comm")).trim().equals(name)) continue;
        for (String line : Files.readAllLines(task.resolve("status")))
          if (line.startsWith("voluntary_ctxt_switches:")) return Long.parseLong(line.split("\\s+")[1]);
      }
    }
    throw new IllegalStateException("W5: no thread named " + name);
  }

  static void w5(int n) throws Exception {
    SplittableRandom rng = new SplittableRandom(5);
    HashedWheelTimer timer = newTimer();
    AtomicLong runs = new AtomicLong();
    for (long d : randomMillis(rng, n, 59000, 60000))
      timer.newTimeout(new CountTask(runs), d, TimeUnit.MILLISECONDS);
    settle();
    // Linux names a thread by the first 15 bytes of its Java name.
    String name = worker.getName().length() > 15 ? worker.getName().substring(0, 15) : worker.getName();
    long c0 = contextSwitches(name), t0 = System.nanoTime();
    Thread.sleep(5000);
    long c1 = contextSwitches(name), t1 = System.nanoTime();
    timer.stop();
    if (runs.get() != 0) throw new IllegalStateException("W5: a timeout ran");
    report("W5", "idle", n, (c1 - c0) / ((t1 - t0) / 1e9), "wakeups/s", "its_worker");
  }

  static void w3(int n) throws Exception {
    SplittableRandom rng = new SplittableRandom(3);
    HashedWheelTimer timer = newTimer();
    double[] ms = new double[REPS];
    long earlyAll = 0;
    for (int rep = -1; rep < REPS; ++rep) {
      long[] offsets = new long[n];
      for (int i = 0; i < n; ++i) offsets[i] = rng.nextLong(0, 50_000_001); // ns
      CountDownLatch all = new CountDownLatch(n);
      AtomicLong early = new AtomicLong();
      AtomicLong last = new AtomicLong();
      long t0 = System.nanoTime();
      for (int i = 0; i < n; ++i) {
        final long due = System.nanoTime() + offsets[i];
        timer.newTimeout(timeout -> {
          long now = System.nanoTime();
          if (now < due) early.incrementAndGet();
          last.set(now);
          all.countDown();
        }, offsets[i], TimeUnit.NANOSECONDS);
      }
      if (!all.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("W3: not all fired in 30 s");
      if (rep >= 0) {
        ms[rep] = (last.get() - t0) / 1e6;
        earlyAll += early.get();
      }
    }
    timer.stop();
    report("W3", "fire", n, median(ms), "ms", "min=" + round(min(ms)) + ";early=" + earlyAll);
  }

  static void w4(int n) throws Exception {
    SplittableRandom rng = new SplittableRandom(4);
    long[] delays = randomMillis(rng, n, 1000, 60000);
    HashedWheelTimer timer = newTimer();
    AtomicLong runs = new AtomicLong();
    settle();
    long heap0 = heapInUse(), rss0 = residentBytes();
    // As a server keeps each connection's timeout (asio_wheel_bench keeps its timers in
    // a vector): the array of references is counted, 4 bytes a timeout.
    Timeout[] keep = new Timeout[n];
    for (int i = 0; i < n; ++i)
      keep[i] = timer.newTimeout(new CountTask(runs), delays[i], TimeUnit.MILLISECONDS);
    settle();
    long heap1 = heapInUse(), rss1 = residentBytes();
    report("W4", "heap", n, (heap1 - heap0) / (double) n, "B", "per_pending_timeout");
    report("W4", "rss", n, (rss1 - rss0) / (double) n, "B", "per_pending_timeout");
    if (timer.pendingTimeouts() != n || keep[n - 1].isExpired()) throw new IllegalStateException("W4: timeouts not pending");
    timer.stop();
  }

  public static void main(String[] args) throws Exception {
    String w = args.length > 0 ? args[0] : "";
    int n = args.length > 1 ? Integer.parseInt(args[1]) : 1_000_000;
    switch (w) {
      case "W1": w1(n); break;
      case "W2": w2(n); break;
      case "W5": w5(args.length > 1 ? n : 10_000); break;
      case "W3": w3(n); break;
      case "W4": w4(n); break;
      default:
        System.err.println("usage: NettyWheel W1|W2|W3|W4|W5 [N]");
        System.exit(2);
    }
  }
}
