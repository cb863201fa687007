package delayqueue

import (
	"testing"
	"time"
)

func TestTakesInDueOrderAndNotEarly(t *testing.T) {
	q := New[int]()
	start := time.Now()
	q.Push(2, 20*time.Millisecond)
	q.Push(1, 10*time.Millisecond)
	for want := 1; want <= 2; want++ {
		if got := q.Take(); got != want {
			t.Fatalf("took %d, want %d", got, want)
		}
		if elapsed := time.Since(start); elapsed < time.Duration(want)*10*time.Millisecond {
			t.Fatalf("element %d taken after %v, before its delay", want, elapsed)
		}
	}
}

func TestAnEarlierPushWakesASleepingTake(t *testing.T) {
	q := New[int]()
	q.Push(2, time.Hour)
	go func() {
		time.Sleep(5 * time.Millisecond)
		q.Push(1, time.Millisecond)
	}()
	if got := q.Take(); got != 1 {
		t.Fatalf("took %d, want 1", got)
	}
}

// BenchmarkPushAndTake is S2's workload, as asio_wheel's bench runs it
// (bench/chained_take.hpp): push b.N values with delays of i ns, wait (untimed) until all
// are due, then take all b.N, each take after the one before. Reported per element: the
// push, the take, and their sum (ns/op). Run with -benchtime=1000000x for S2's N = 1M.
func BenchmarkPushAndTake(b *testing.B) {
	q := New[int]()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		q.Push(i, time.Duration(i))
	}
	push := time.Since(start)
	b.StopTimer()
	time.Sleep(time.Duration(b.N) + 2*time.Millisecond)
	b.StartTimer()
	start = time.Now()
	for i := 0; i < b.N; i++ {
		if got := q.Take(); got != i {
			b.Fatalf("take %d returned %d: out of push order", i, got)
		}
	}
	take := time.Since(start)
	b.ReportMetric(float64(push.Nanoseconds())/float64(b.N), "push-ns/op")
	b.ReportMetric(float64(take.Nanoseconds())/float64(b.N), "take-ns/op")
}
