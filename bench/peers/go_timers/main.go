// The peer of BENCHMARKS.md's W1 to W4 in Go: the runtime's own timers (time.AfterFunc,
// Stop and Reset; per-P heaps in Go 1.19, Debian's), run on the machine that runs
// asio_wheel_bench. bench/peers/run.sh alternates it with asio_wheel_bench.
//
//	go run . W1|W2|W3|W4 [N]
//
// W1 churn: N timers pending (deadlines uniform in [1 s, 60 s]); one op is an AfterFunc
// at a random deadline and its Stop.
// W2 idle reset: N timers pending; one op Resets a random one to a random deadline in
// [1 s, 60 s].
// W3 fire: N timers all due within 50 ms (uniform); the clock starts before the first
// AfterFunc and stops when the last function has run. Reported: ms, and how many ran
// before their deadline (early).
// W4 memory: N timers pending, deadlines in [1 s, 60 s], kept in a slice as a server
// keeps each connection's; per timer, the growth of the resident set and of the heap in
// use after a GC.
//
// Each function holds one pointer, as asio_wheel_bench's handlers do. W1, W2 and W3 run
// one unrecorded warm-up repetition and 5 recorded ones, and report their median (and
// min).
package main

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const reps = 5

type counter struct{ runs atomic.Int64 }

func randomDurations(rng *rand.Rand, n int, from, to time.Duration) []time.Duration {
	d := make([]time.Duration, n)
	for i := range d {
		d[i] = from + time.Duration(rng.Int63n(int64(to-from)+1))
	}
	return d
}

// report prints one figure in the line format of bench/peers/run.sh: workload,
// implementation, metric, N, value, unit, a note without spaces.
func report(id, metric string, n int, value float64, unit, note string) {
	fmt.Printf("%s go_timers %s %d %.1f %s %s\n", id, metric, n, value, unit, note)
}

func minMedian(v []float64) (float64, float64) {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[0], s[len(s)/2]
	}
	return s[0], (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func arm(c *counter, delays []time.Duration) []*time.Timer {
	timers := make([]*time.Timer, len(delays))
	for i, d := range delays {
		timers[i] = time.AfterFunc(d, func() { c.runs.Add(1) })
	}
	return timers
}

const ops = 1_000_000

// timeOps is W1's and W2's measurement: a warm-up and reps recorded repetitions, each
// of a loop of ops operations that repetition() returns once it has made the
// repetition's random draws (untimed); the loop itself runs the operations inline, so
// that no call per operation is timed. Reports the median (and min) ns per op.
func timeOps(id, metric string, n int, repetition func() func()) {
	ns := make([]float64, 0, reps)
	for rep := -1; rep < reps; rep++ {
		loop := repetition()
		t0 := time.Now()
		loop()
		if rep >= 0 {
			ns = append(ns, float64(time.Since(t0).Nanoseconds())/ops)
		}
	}
	lo, med := minMedian(ns)
	report(id, metric, n, med, "ns/op", fmt.Sprintf("min=%.1f", lo))
}

func w1(n int) {
	rng := rand.New(rand.NewSource(1))
	var c counter
	pending := arm(&c, randomDurations(rng, n, time.Second, 60*time.Second))
	timeOps("W1", "churn", n, func() func() {
		delays := randomDurations(rng, ops, time.Second, 60*time.Second)
		return func() {
			for _, d := range delays {
				time.AfterFunc(d, func() { c.runs.Add(1) }).Stop()
			}
		}
	})
	runtime.KeepAlive(pending)
}

func w2(n int) {
	rng := rand.New(rand.NewSource(2))
	var c counter
	pending := arm(&c, randomDurations(rng, n, time.Second, 60*time.Second))
	timeOps("W2", "reset", n, func() func() {
		delays := randomDurations(rng, ops, time.Second, 60*time.Second)
		which := make([]int32, ops)
		for i := range which {
			which[i] = int32(rng.Intn(n))
		}
		return func() {
			for i, d := range delays {
				pending[which[i]].Reset(d)
			}
		}
	})
}

func w3(n int) {
	rng := rand.New(rand.NewSource(3))
	ms := make([]float64, 0, reps)
	var early int64
	for rep := -1; rep < reps; rep++ {
		offsets := randomDurations(rng, n, 0, 50*time.Millisecond)
		var wg sync.WaitGroup
		wg.Add(n)
		var last atomic.Int64
		var earlyHere atomic.Int64
		t0 := time.Now()
		for _, d := range offsets {
			due := time.Now().Add(d)
			time.AfterFunc(d, func() {
				now := time.Now()
				if now.Before(due) {
					earlyHere.Add(1)
				}
				// The latest finish wins; finishes race, so keep the maximum.
				for {
					old := last.Load()
					if now.UnixNano() <= old || last.CompareAndSwap(old, now.UnixNano()) {
						break
					}
				}
				wg.Done()
			})
		}
		wg.Wait()
		if rep >= 0 {
			ms = append(ms, float64(last.Load()-t0.UnixNano())/1e6)
			early += earlyHere.Load()
		}
	}
	lo, med := minMedian(ms)
	report("W3", "fire", n, med, "ms", fmt.Sprintf("min=%.1f;early=%d", lo, early))
}

func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		panic(err)
	}
	pages, err := strconv.ParseInt(strings.Fields(string(b))[1], 10, 64)
	if err != nil {
		panic(err)
	}
	return pages * int64(os.Getpagesize())
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func w4(n int) {
	rng := rand.New(rand.NewSource(4))
	delays := randomDurations(rng, n, time.Second, 60*time.Second)
	var c counter
	debug.FreeOSMemory()
	heap0, rss0 := heapInUse(), residentBytes()
	pending := arm(&c, delays)
	heap1, rss1 := heapInUse(), residentBytes()
	report("W4", "heap", n, float64(heap1-heap0)/float64(n), "B", "per_pending_timer")
	report("W4", "rss", n, float64(rss1-rss0)/float64(n), "B", "per_pending_timer")
	if c.runs.Load() != 0 {
		panic("W4: a timer fired")
	}
	runtime.KeepAlive(pending)
}

func main() {
	n := 1_000_000
	if len(os.Args) > 2 {
		v, err := strconv.Atoi(os.Args[2])
		if err != nil || v <= 0 {
			fmt.Fprintln(os.Stderr, "go_timers: bad N:", os.Args[2])
			os.Exit(2)
		}
		n = v
	}
	w := ""
	if len(os.Args) > 1 {
		w = os.Args[1]
	}
	switch w {
	case "W1":
		w1(n)
	case "W2":
		w2(n)
	case "W3":
		w3(n)
	case "W4":
		w4(n)
	default:
		fmt.Fprintln(os.Stderr, "usage: go_timers W1|W2|W3|W4 [N]")
		os.Exit(2)
	}
}
