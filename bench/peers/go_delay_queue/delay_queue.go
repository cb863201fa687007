// A delay queue as Go programs commonly write one, and as seed S2 (issue 13) measured
// it: a binary heap of elements by due time (container/heap) under a mutex, and a Take
// that blocks until the earliest element is due. A push that becomes the new earliest
// wakes a sleeping Take through a channel of one, so that it sleeps for the new, shorter
// time. It is the peer of asio_wheel::delay_queue in S2 (bench/chained_take.hpp), built
// here so that both run on the same machine.
package delayqueue

import (
	"container/heap"
	"sync"
	"time"
)

type element[T any] struct {
	value T
	due   time.Time
}

// byDue is the heap: the earliest due time at index 0.
type byDue[T any] []element[T]

func (h byDue[T]) Len() int           { return len(h) }
func (h byDue[T]) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h byDue[T]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byDue[T]) Push(x any)        { *h = append(*h, x.(element[T])) }
func (h *byDue[T]) Pop() any {
	old := *h
	last := old[len(old)-1]
	*h = old[:len(old)-1]
	return last
}

// DelayQueue hands out each pushed value once its delay has passed, earliest first.
type DelayQueue[T any] struct {
	mu       sync.Mutex
	elements byDue[T]
	// A Take that sleeps until the earliest element is due is woken here when a push
	// brings an earlier one. Buffered: a push never blocks, and one token is enough.
	earlier chan struct{}
}

func New[T any]() *DelayQueue[T] {
	return &DelayQueue[T]{earlier: make(chan struct{}, 1)}
}

// Push adds v, due after delay.
func (q *DelayQueue[T]) Push(v T, delay time.Duration) {
	e := element[T]{value: v, due: time.Now().Add(delay)}
	q.mu.Lock()
	heap.Push(&q.elements, e)
	isEarliest := q.elements[0].due.Equal(e.due)
	q.mu.Unlock()
	if isEarliest {
		select {
		case q.earlier <- struct{}{}:
		default:
		}
	}
}

// Take returns the earliest value once it is due, blocking until then.
func (q *DelayQueue[T]) Take() T {
	for {
		q.mu.Lock()
		if len(q.elements) == 0 {
			q.mu.Unlock()
			<-q.earlier
			continue
		}
		wait := time.Until(q.elements[0].due)
		if wait <= 0 {
			e := heap.Pop(&q.elements).(element[T])
			q.mu.Unlock()
			return e.value
		}
		q.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-q.earlier:
			t.Stop()
		}
	}
}
