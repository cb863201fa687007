// The state of a delay queue: its elements (nodes on the wheel), the FIFO of expired
// elements, the pending takes, and the step that hands the one to the other.
//
// Every field is guarded by the shard's lock: the wheel's steps (element_due,
// dispatch_due) run under it on whatever thread runs the context, the queue's methods
// take it. No user code runs under the lock: an element is moved or destroyed there
// only when T is trivially copyable. Any other T (a timer among its members, say, whose
// move takes its own shard's lock) stays in its node when taken or erased: the node
// leaves both lists under the lock, its value is moved or destroyed outside it, and the
// node comes back to the free list under the lock again (two locks a take, not one).
// A node given back keeps its moved-from value until the node is reused or the queue
// destroyed.
#ifndef ASIO_WHEEL_DETAIL_DELAY_QUEUE_STATE_HPP
#define ASIO_WHEEL_DETAIL_DELAY_QUEUE_STATE_HPP

#include <asio_wheel/detail/wheel.hpp>
#include <asio_wheel/detail/wheel_clock.hpp>
#include <asio_wheel/detail/wheel_op.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace asio_wheel::detail {

template <class T>
struct delay_queue_state;

// One element. Allocated by push when no recycled node is free, and only freed with
// the queue (or, if it is leaving then, by whoever moves its value out): a key's node
// pointer therefore never dangles while its queue lives, and `seq`, the number of the
// push that put the element in the node, tells a stale key: a node's next push gets
// another number. A 64-bit count: before, a 32-bit generation bumped at each take
// wrapped after 2^32 reuses of one node (12 hours of a queue that holds one element at
// a time, at 100k pushes a second), and an old key named the new element.
template <class T>
struct delay_node : due_entry {
  // leaving: taken or erased, on neither list nor the free list, its value still here
  // for whoever took it to move out outside the lock (never for a trivially copyable T).
  enum class state_type : std::uint8_t { free, scheduled, expired, leaving };

  delay_queue_state<T>* owner = nullptr; // null once the queue is gone (a leaving node)
  std::uint64_t expired_place = 0; // where in the expired queue, while expired
  std::optional<T> value;       // the element; moved-from once taken or erased
  steady_time expiry{};
  std::uint64_t seq = 0;        // the push's number: push order, for ties, and the keys'
  state_type state = state_type::free;
  delay_node* next_free = nullptr;
  delay_node* next_all = nullptr;
};

// Whether a queue of T moves (and destroys) its elements under the lock: only when that
// runs no user code.
template <class T>
inline constexpr bool moved_under_lock = std::is_trivially_copyable_v<T>;

// The operation of one async_take: carries the element to the handler. Aborted and
// refused takes pass a value-initialised T. A trivially copyable element is moved into
// the op under the lock; any other stays in its node, which the op then holds, and is
// moved out on completion, outside the lock (the node then goes back to its queue).
template <class T>
class take_op : public wheel_op {
public:
  explicit take_op(func_type f) noexcept : wheel_op(f) {}
  ~take_op() { // destroyed without completing (shutdown): the node still goes back
    if constexpr (!moved_under_lock<T>)
      if (element_.node) delay_queue_state<T>::give_back(*element_.shard, *element_.node);
  }
  take_op(const take_op&) = delete;
  take_op& operator=(const take_op&) = delete;

  // The element it takes (lock held): moved in, or held in its node, leaving. Moved,
  // not copied: T may be move-only, and an rvalue picks T's trivial move constructor
  // over any constructor template of its own, so no user code runs under the lock.
  void carry(delay_node<T>& n, wheel_shard& shard) noexcept {
    if constexpr (moved_under_lock<T>) {
      element_.emplace(std::move(*n.value));
    } else {
      assert(!element_.node);
      element_ = {&n, &shard};
    }
  }

  // Throws only what T() throws, for a take that got no element (aborted, refused).
  std::tuple<T> take_values() noexcept(std::is_nothrow_default_constructible_v<T>) {
    if constexpr (moved_under_lock<T>) {
      if (element_) return {std::move(*element_)};
      return {T()};
    } else {
      if (!element_.node) return {T()};
      std::tuple<T> taken{std::move(*element_.node->value)};
      delay_queue_state<T>::give_back(*element_.shard, *std::exchange(element_.node, nullptr));
      return taken;
    }
  }

private:
  struct held_node {
    delay_node<T>* node = nullptr;
    wheel_shard* shard = nullptr;
  };
  std::conditional_t<moved_under_lock<T>, std::optional<T>, held_node> element_;
};

// The expired elements, in (expiry, push order). Elements usually expire nearly in that
// order, so most go into a sorted run (a ring of keys, read front to back, O(1) both
// ways): at its back, or, when one comes a little early, sorted in among the last
// `reorder_window` keys; one that comes before all of those goes to a binary min-heap
// instead. (The wheel keeps no order inside a tick, and across ticks only by tick, so a
// FIFO alone would need a sorted insert: quadratic when a tick's elements come out of
// order. A slot's chains take turns, but its walk starts at chain 0, not at the chain
// its first entry went to: consecutive elements come out shuffled within about
// slot_chains places, which sent 40% of them to the heap, and its sift on each take
// writes the place of one node per level, a cache miss each.) The front is the lesser of
// the run's and the heap's. Each node knows its place (expired_place), so erasing one
// (erase, reset) leaves a hole in the run, O(1), or re-sifts the heap, O(log n).
//
// Both hold each node's key beside its pointer: the run is read in order and a sift
// compares within the array, writing only the nodes it moves, whose cache misses do not
// hold up the next level. Capacity is reserved by push(), outside the expiry path, so
// an expiry, which runs inside a driver step under the lock, never allocates: the heap
// has room for every element; the run only for as many as its ring holds, holes
// included, and an element that finds it full goes to the heap.
template <class Node>
class expired_queue {
public:
  bool empty() const noexcept { return run_head_ == run_tail_ && heap_.empty(); }
  Node& top() noexcept { return *front().node; }

  // Room for `n` elements, growing geometrically (lock held: the steps read the queue).
  void reserve(std::size_t n) {
    if (n > heap_.capacity()) heap_.reserve(std::max(n, 2 * heap_.capacity()));
    if (n > run_.size()) grow_run(n);
  }

  void push(Node& n) noexcept {
    const item it{n.expiry, n.seq, &n};
    if (run_tail_ - run_head_ < run_.size()) {
      // Its place from the back: after every key it does not come before (ties keep
      // push order), looking at no more than the window.
      const std::uint64_t stop =
          run_tail_ - std::min<std::uint64_t>(run_tail_ - run_head_, reorder_window);
      std::uint64_t p = run_tail_;
      while (p != stop && before(it, run_at(p - 1))) --p;
      if (p != stop || stop == run_head_) { // its place is known: in the run
        for (std::uint64_t q = run_tail_; q != p; --q) move_in_run(q, run_at(q - 1));
        ++run_tail_;
        place_in_run(p, it);
        // The run stays sorted: nothing before it comes after it, and it comes before
        // what follows (a tie goes behind the keys already there).
        assert(p == run_head_ || !before(it, run_at(p - 1)));
        assert(p + 1 == run_tail_ || before(it, run_at(p + 1)));
        return;
      }
    }
    assert(heap_.size() < heap_.capacity()); // reserved by the push that made n
    heap_.push_back(it);
    sift_up(heap_.size() - 1);
  }

  void erase(Node& n) noexcept {
    if (n.expired_place & run_bit) {
      const std::uint64_t p = n.expired_place & ~run_bit;
      assert(p >= run_head_ && p < run_tail_ && run_at(p).node == &n);
      run_at(p).node = nullptr; // a hole: keeps its key, which orders later pushes
      skip_holes();
      return;
    }
    const std::size_t i = n.expired_place;
    assert(i < heap_.size() && heap_[i].node == &n);
    const item last = heap_.back();
    heap_.pop_back();
    if (last.node == &n) return;
    place_in_heap(i, last);
    sift_up(i);
    sift_down(last.node->expired_place);
  }

  void pop() noexcept { erase(top()); }
  void clear() noexcept {
    heap_.clear();
    run_head_ = run_tail_;
  }
  // The nodes keep their places: a place counts within its own queue's run or heap.
  void swap(expired_queue& other) noexcept {
    run_.swap(other.run_);
    std::swap(run_head_, other.run_head_);
    std::swap(run_tail_, other.run_tail_);
    heap_.swap(other.heap_);
  }

private:
  // A node and its key, which does not change while the node is expired.
  struct item {
    decltype(Node::expiry) expiry;
    std::uint64_t seq;
    Node* node; // null: a hole in the run
  };
  // A node's expired_place with this bit is a position in the run, without it an index
  // into the heap. Positions in the run count up from the first push and never repeat
  // while their node is there, so growing the ring moves no node's place.
  static constexpr std::uint64_t run_bit = std::uint64_t{1} << 63;
  // How far back in the run a push looks for its place: room for the shuffle of the
  // wheel's walk, twice over. Each key passed over moves up one, its node's place with
  // it: a node the wheel has just handed over, still in cache.
  static constexpr std::uint64_t reorder_window = 2 * wheel::slot_chains;

  // Earlier expiry first; ties in push order.
  static bool before(const item& a, const item& b) noexcept {
    return a.expiry < b.expiry || (a.expiry == b.expiry && a.seq < b.seq);
  }

  const item& front() const noexcept {
    assert(!empty());
    if (run_head_ == run_tail_) return heap_.front();
    const item& r = run_at(run_head_);
    return heap_.empty() || before(r, heap_.front()) ? r : heap_.front();
  }

  // ---- the run: positions [run_head_, run_tail_), sorted, the head never a hole ----
  item& run_at(std::uint64_t p) noexcept { return run_[p & (run_.size() - 1)]; }
  const item& run_at(std::uint64_t p) const noexcept { return run_[p & (run_.size() - 1)]; }
  void place_in_run(std::uint64_t p, const item& it) noexcept {
    run_at(p) = it;
    it.node->expired_place = p | run_bit;
  }
  // As place_in_run, for a key already in the run, which may be a hole.
  void move_in_run(std::uint64_t p, const item& it) noexcept {
    run_at(p) = it;
    if (it.node) it.node->expired_place = p | run_bit;
  }
  void skip_holes() noexcept {
    while (run_head_ != run_tail_ && run_at(run_head_).node == nullptr) ++run_head_;
  }
  // A ring of at least n (a power of two, for the mask), the run kept at its positions.
  void grow_run(std::size_t n) {
    std::size_t size = std::max<std::size_t>(16, run_.size());
    while (size < n) size *= 2;
    std::vector<item> bigger(size);
    for (std::uint64_t p = run_head_; p != run_tail_; ++p)
      bigger[p & (size - 1)] = run_at(p);
    run_.swap(bigger);
  }

  // ---- the heap ----
  void place_in_heap(std::size_t i, const item& it) noexcept {
    assert(it.expiry == it.node->expiry && it.seq == it.node->seq);
    heap_[i] = it;
    it.node->expired_place = i;
  }
  void sift_up(std::size_t i) noexcept {
    const item n = heap_[i];
    while (i > 0 && before(n, heap_[(i - 1) / 2])) {
      place_in_heap(i, heap_[(i - 1) / 2]);
      i = (i - 1) / 2;
    }
    place_in_heap(i, n);
  }
  void sift_down(std::size_t i) noexcept {
    const item n = heap_[i];
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= heap_.size()) break;
      if (child + 1 < heap_.size() && before(heap_[child + 1], heap_[child])) ++child;
      if (!before(heap_[child], n)) break;
      place_in_heap(i, heap_[child]);
      i = child;
    }
    place_in_heap(i, n);
  }

  std::vector<item> run_; // the ring; its size a power of two (or 0)
  std::uint64_t run_head_ = 0, run_tail_ = 0;
  std::vector<item> heap_;
};

// Queue identities are never reused, so a key from another (even destroyed) queue is
// told apart without touching its node.
inline std::atomic<std::uint64_t> delay_queue_ids{0};

// The queue's state; itself the wheel entry of the dispatch step, linked (due now)
// while a waiting take and an expired element may meet.
template <class T>
struct delay_queue_state : due_entry {
  using node = delay_node<T>;
  using node_state = typename node::state_type;

  explicit delay_queue_state(wheel_shard& s) noexcept : shard(&s), takers(s.index()) {
    on_due = &delay_queue_state::dispatch_due;
  }

  ~delay_queue_state() { clear(); }

  // Pending takes complete with operation_aborted; the elements are destroyed and the
  // nodes freed, and the queue is left empty, off the wheel (its destruction, or a
  // move assignment to it). Nothing here throws, not even if the shard's posts do (a
  // user's executor). An element's destructor may use this queue again (push, take):
  // what it adds goes too, in another round, until a round destroys no element.
  void clear() noexcept {
    for (node* nodes = clear_round(); nodes; nodes = clear_round())
      for (node* n = nodes; n;) delete std::exchange(n, n->next_all); // outside the lock
  }

  // The queue moved from `from` to *this, which is empty (new, or cleared by a move
  // assignment): takes over its shard, identity (so that its keys name the elements
  // here), elements, nodes, pending takes and place on the wheel. `from` is left as a
  // new queue, with an identity of its own. O(nodes), for each node names its queue
  // (element_due, give_back); nothing else moves.
  void take_over(delay_queue_state& from) noexcept {
    assert(all_nodes == nullptr && takers.ops.empty() && !linked());
    // A move assignment from a queue on another shard: *this goes there first.
    if (from.shard != shard) {
      wheel_shard::move_list_to_shard(takers, *from.shard);
      shard = from.shard;
    }
    auto guard = shard->lock();
    id = std::exchange(from.id, ++delay_queue_ids);
    expired.swap(from.expired);
    free_nodes = std::exchange(from.free_nodes, nullptr);
    all_nodes = std::exchange(from.all_nodes, nullptr);
    size = std::exchange(from.size, 0);
    next_seq = std::exchange(from.next_seq, 0);
    for (node* n = all_nodes; n; n = n->next_all) n->owner = this;
    if (from.linked()) shard->move_entry_locked(from, *this);
    if (!from.takers.ops.empty()) shard->move_list_locked(from.takers, takers);
  }

  // One round of clear() under the lock: aborts the takes, takes every element off
  // the wheel and out of the expired queue, and returns the nodes for the caller to
  // delete outside the lock (an element's destructor may use the wheel). Leaving nodes
  // are not ours to free: whoever takes its value out frees it then (give_back), seeing
  // no owner; they leave all_nodes.
  node* clear_round() noexcept {
    auto guard = shard->lock();
    shard->forget_after_tick_locked(*this);
    shard->unschedule_locked(*this);
    for (node** link = &all_nodes; node* n = *link;) {
      if (n->state == node_state::scheduled) shard->unschedule_locked(*n);
      if (n->state == node_state::leaving) {
        n->owner = nullptr;
        *link = n->next_all;
      } else {
        link = &n->next_all;
      }
    }
    expired.clear();
    shard->abort_all_on_destruction_locked(takers);
    free_nodes = nullptr;
    size = 0;
    return std::exchange(all_nodes, nullptr);
  }

  // Both change only in take_over, on the queue's own thread: `shard` while the queue is
  // empty and off the wheel (no step reaches it), `id` under the lock.
  wheel_shard* shard;
  std::uint64_t id = ++delay_queue_ids;
  wait_list takers;        // pending takes
  expired_queue<node> expired; // ordered by (expiry, push order)
  node* free_nodes = nullptr;
  node* all_nodes = nullptr;
  std::size_t size = 0;    // elements scheduled or expired
  std::uint64_t next_seq = 0;

  // Admits `op` (an async_take). Served at once, as if by post, when elements have
  // expired, no take is ahead in line, the wheel's tick is finished (else a later
  // element of the tick could still come due: dispatch_soon_locked) and the last step
  // handed over all it made due (else an earlier element may wait in the due list):
  // then it never counts as pending.
  // If it throws (a post on a user's executor), `op` is destroyed and the queue is as
  // it was.
  void start_take(take_op<T>& op) {
    auto guard = shard->lock();
    if (takers.ops.empty() && !expired.empty() && !shard->shut_down_locked() &&
        !shard->tick_unfinished_locked() && !shard->due_backlog_locked()) {
      try {
        shard->post_step_locked(); // first: if it throws, the element stays queued
      } catch (...) {
        wheel_shard::discard(guard, op);
        throw;
      }
      hand_front_locked(op);
      shard->complete_soon_locked(op, op_result::success); // the step is posted already
      return;
    }
    if (!shard->admit(guard, takers, op, steady_time::max())) return;
    if (expired.empty()) return;
    try {
      dispatch_soon_locked();
    } catch (...) {
      shard->withdraw(guard, takers, op);
      throw;
    }
  }

  // The live node (n, seq) names, or nullptr if that is stale (lock held).
  node* find_locked(node* n, std::uint64_t seq) const noexcept {
    if (!n) return nullptr;
    const bool live = n->state == node_state::scheduled || n->state == node_state::expired;
    return n->seq == seq && live ? n : nullptr;
  }

  // Takes a live node off the wheel or out of the expired queue (lock held).
  void unlink_locked(node& n) noexcept {
    if (n.state == node_state::scheduled)
      shard->unschedule_locked(n);
    else
      expired.erase(n);
  }

  // Schedules the dispatch step unless it is already on the wheel (lock held), behind
  // every element due so far: the elements of one tick come due in no order, and the
  // expired queue can tell the earliest only once the whole tick is in it. Due now,
  // that is, unless expiry_batch stopped the wheel inside its tick (a storm larger
  // than the batch): then the tick's other elements would come due after the step, and
  // a take served before them could get a later element than one of theirs; so the
  // step waits for the tick's end, and comes due then, before the next tick's elements
  // (wheel_shard::schedule_after_due_so_far_locked).
  void dispatch_soon_locked() {
    if (!linked()) shard->schedule_after_due_so_far_locked(*this);
  }

  // Whether an element placed now for `expiry` has expired at once: the wheel has
  // reached its tick (a delay that has passed), and the last step handed over every
  // element it made due. While one of those waits in the due list, a new element goes
  // behind it there: in the expired queue, it could be handed out first (by a dispatch
  // step queued ahead of that element) though that element expired earlier.
  bool expired_at_once_locked(steady_time expiry) const noexcept {
    return shard->due_at_once_locked(expiry) && !shard->due_backlog_locked();
  }

  // Puts `n` (off the wheel) in place for `expiry`, by push or reset (lock held). An
  // element expired at once goes straight into the expired queue, at its place by
  // (expiry, push order), as a step would put it: were it left in the wheel's due list
  // until then, a take served at once, or a dispatch step queued before it, would hand
  // out an element that it precedes. Never throws: if the driver cannot be told, the
  // entry stays and comes due late.
  void place_locked(node& n, steady_time expiry) noexcept {
    n.expiry = expiry;
    if (!expired_at_once_locked(expiry)) {
      n.state = node_state::scheduled;
      shard->schedule_nothrow_locked(n, expiry);
      // Due already (its tick reached, behind a backlog): a dispatch step queued ahead
      // of it goes behind it, else it would hand out elements that `n` precedes.
      if (n.is_due() && linked() && is_due()) {
        shard->unschedule_locked(*this);
        shard->schedule_after_due_so_far_nothrow_locked(*this);
      }
      return;
    }
    n.state = node_state::expired;
    expired.push(n); // room reserved by push
    if (!takers.ops.empty() && !linked())
      shard->schedule_after_due_so_far_nothrow_locked(*this);
  }

  // A live node's element is taken or erased: keys to it go stale, and the node, off
  // both lists already, is leaving until recycled (lock held).
  void take_out_locked(node& n) noexcept {
    assert(n.state != node_state::free && n.state != node_state::leaving && !n.linked());
    n.state = node_state::leaving;
    --size;
  }

  // A leaving node, its value moved out, goes on the free list (lock held).
  void recycle_locked(node& n) noexcept {
    assert(n.state == node_state::leaving && n.owner == this);
    n.state = node_state::free;
    n.next_free = free_nodes;
    free_nodes = &n;
  }

  // A leaving node whose value has been moved out, by a take or erase outside the
  // lock: back to its queue, or, if the queue is gone (~delay_queue_state), freed.
  static void give_back(wheel_shard& shard, node& n) noexcept {
    bool orphan;
    {
      auto guard = shard.lock();
      orphan = n.owner == nullptr;
      if (!orphan) n.owner->recycle_locked(n);
    }
    if (orphan) delete &n; // its moved-from value destroyed outside the lock
  }

  // The earliest expired element goes to `op` (lock held): moved in, its node
  // recycled, or left in its node for the op to move out (take_op).
  void hand_front_locked(take_op<T>& op) noexcept {
    node& n = expired.top();
    expired.pop();
    take_out_locked(n);
    op.carry(n, *shard);
    if constexpr (moved_under_lock<T>) recycle_locked(n);
  }

  // An element came due: into the expired queue, at its place by (expiry, push order).
  // Elements of one wheel tick come due in no particular order, so they are only
  // handed to takes by the dispatch step, which the wheel runs after them
  // (dispatch_soon_locked).
  // Counts as one against the step's expiry_batch, like a completion.
  static std::size_t element_due(due_entry& e, due_step&) {
    auto& n = static_cast<node&>(e);
    delay_queue_state& q = *n.owner;
    n.state = node_state::expired;
    q.expired.push(n);
    if (!q.takers.ops.empty()) q.dispatch_soon_locked();
    return 1;
  }

  // Hands expired elements to waiting takes, both in order, at most `budget`; if more
  // could meet, the step comes back on the next driver step.
  static std::size_t dispatch_due(due_entry& e, due_step& step) {
    auto& q = static_cast<delay_queue_state&>(e);
    std::size_t n = 0;
    for (; n < step.budget && !q.takers.ops.empty() && !q.expired.empty(); ++n) {
      q.hand_front_locked(static_cast<take_op<T>&>(q.takers.ops.front()));
      step.shard.complete_front_locked(q.takers, step.out);
    }
    if (!q.takers.ops.empty() && !q.expired.empty()) q.dispatch_soon_locked();
    return n;
  }
};

} // namespace asio_wheel::detail

#endif
