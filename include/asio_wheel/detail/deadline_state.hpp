// The deadline of one operation started with cancel_after/cancel_at: its wheel entry,
// the cancellation signal the operation's slot belongs to, and who may free it.
//
// Ownership is a reference count: the wrapped handler holds one until the operation
// completes (or the handler is destroyed), the initiation one until it has put the
// entry on the wheel, and a firing one from the moment the entry comes due until the
// emission has run (or been skipped). The last one out frees the state with the
// handler's allocator. The count is kept under the shard's lock, which each of those
// steps takes anyway (to arm, to take the entry off, to queue or check the emission),
// so it costs no read-modify-write of its own: a cancel_after pays two locked
// instructions fewer than with an atomic count.
//
// Who emits: the shard's step, when the entry comes due (on_due, under the lock),
// queues the state itself as an operation; its completion, outside the lock, emits
// the signal on the handler's associated executor (defaulting to the operation's I/O
// executor; inline when that is the wheel context's plain executor, else through
// dispatch), as Boost.Asio's own cancel_after does. So with a handler bound to a
// strand, the emission and the operation's own steps (a composed operation's, run on
// that strand) never overlap. A cancellation forwarded from the user's own slot is an
// emission too.
//
// An emission holds a ref from the moment the deadline comes due (or the user's signal
// reaches ours) until it has run or been skipped: a firing. Under the shard's lock the
// emitter checks `done` and skips a completed operation. The operation's completion
// sets `done`; if a firing is under way then (queued, running on another thread, or
// running this very completion from a cancellation handler), the completion waits,
// moved out to memory of its own (a deferred_completion), and the firing that ends
// last runs it, after giving back its ref. So the user's handler always runs after the
// state, allocated with the handler's allocator, is freed, as Asio requires of an
// operation's memory (the handler may free that allocator's arena), never while an
// emission runs, and on the handler's executor: where the firing ran, or dispatched
// there (cancel_after_op.hpp). The one exception: when there is no memory to put the
// completion off in, the handler runs at once and the state is freed after it.
#ifndef ASIO_WHEEL_DETAIL_DEADLINE_STATE_HPP
#define ASIO_WHEEL_DETAIL_DEADLINE_STATE_HPP

#include <asio_wheel/detail/handler_op.hpp>
#include <asio_wheel/detail/wheel_clock.hpp>
#include <asio_wheel/detail/wheel_op.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <asio_wheel/detail/config.hpp>

#include <cassert>
#include <chrono>
#include <cstddef>
#include <memory>
#include <utility>

namespace asio_wheel::detail {

// When the deadline is: relative to the initiation (cancel_after) or absolute.
struct deadline_spec {
  bool relative = true;
  steady_duration after{};
  steady_time at{};

  steady_time resolve(const wheel_shard& shard) const {
    return relative ? shard.deadline_after(after) : at;
  }
};

// A completion put off until the emission it happened inside has ended (see the top).
// run(self, invoke) frees the object, then invokes what it holds, or only destroys it.
struct deferred_completion {
  using run_func = void (*)(deferred_completion*, bool invoke);
  explicit deferred_completion(run_func f) noexcept : run(f) {}
  const run_func run;
};

class deadline_state : public due_entry, public wheel_op {
public:
  using dealloc_func = void (*)(deadline_state*);

  deadline_state(wheel_shard& shard, net::any_io_executor&& io_ex,
                 net::cancellation_type type, dealloc_func dealloc) noexcept
      : wheel_op(&deadline_state::fire),
        shard_(&shard),
        io_ex_(std::move(io_ex)),
        type_(type),
        dealloc_(dealloc) {
    on_due = &deadline_state::due;
  }

  // The signal whose slot the operation sees; the user's own slot forwards to it.
  net::cancellation_signal signal;

  // The wrapped handler's ref, taken while the initiation alone knows the state (before
  // the operation starts or the entry is armed): no other thread can count at once, so
  // it needs no lock.
  void add_handler_ref() noexcept {
    assert(refs_ == 1 && !done_);
    refs_ = 2;
  }

  // Drops a ref, taking the lock: the initiation's when the operation's initiation
  // threw, the firing one after an emission or when it never ran, the handler's after
  // waiting one out.
  void release() noexcept {
    bool last;
    {
      auto guard = shard_->lock();
      last = drop_ref_locked();
    }
    if (last) dealloc_(this);
  }

  // Puts the entry on the wheel for `t`, unless the operation already completed, and
  // drops the initiation's ref: the last one only when the operation completed already.
  // If max_pending refuses the entry, the deadline counts as passed: it fires on the
  // next step.
  //
  // Never throws: the operation has started, and a caller that saw an exception would
  // take it for never started, yet its handler would run. What can throw here is the
  // shard's executor (the tracked copy that counting takes, a post of the step that a
  // passed deadline needs, the driver's construction), and only a user's: on an
  // io_context none can. Then the entry still goes on the wheel (uncounted if counting
  // threw, and as passed), only the driver has not heard of it: it fires at the shard's
  // next step or arming, late but never early, and its operation completes once.
  void arm_and_release(steady_time t) noexcept {
    bool last;
    {
      auto guard = shard_->lock();
      if (!done_ && !shard_->shut_down_locked()) {
        count_locked();
        shard_->schedule_nothrow_locked(*this, counted_ ? t : steady_time::min());
        shard_->settle_moot_locked();
      }
      last = drop_ref_locked();
    }
    if (last) dealloc_(this);
  }

  // The operation completed (or its handler was destroyed): takes the entry off the
  // wheel so that no emission starts any more. Unless a firing is under way, drops the
  // handler's ref. With `may_settle_later`, and when this thread runs the shard's
  // context (which then outlives the caller's next steps), what the shard does on being
  // left idle waits: `settle` is the shard, whose settle_idle() the caller must then
  // call. With a firing under way, `wait` is true and the ref stays: the caller puts its
  // completion off (defer_completion), or ends with release() if it has none to run.
  // Called again by the completion put off, it finds no firing and drops the ref.
  struct finished {
    wheel_shard* settle = nullptr;
    bool wait = false;
  };
  finished finish(bool may_settle_later = false) noexcept {
    finished f;
    bool last = false;
    {
      auto guard = shard_->lock();
      done_ = true;
      f.wait = firings_ != 0;
      if (!shard_->shut_down_locked()) {
        if (may_settle_later && !f.wait && shard_->context_runs_here_locked()) f.settle = shard_;
        if (f.settle) {
          shard_->unschedule_settling_later_locked(*this);
          settle_count_locked(op_result::aborted, wheel_shard::idle_action::settle_later);
        } else {
          // Uncounted first: the unschedule's disarm check must see the shard left with
          // nothing pending, or the driver stays armed for this deadline's tick, and
          // holds run(), when only delay_queue elements with no take remain slotted.
          settle_count_locked(op_result::aborted);
          shard_->unschedule_locked(*this);
        }
      }
      if (!f.wait) last = drop_ref_locked();
    }
    if (last) dealloc_(this);
    return f;
  }

  // After finish() said wait: `c` runs when the last firing ends, or returns false if
  // the firings ended meanwhile (the caller then runs `c` itself).
  [[nodiscard]] bool defer_completion(deferred_completion& c) noexcept {
    auto guard = shard_->lock();
    if (firings_ == 0) return false;
    assert(deferred_ == nullptr);
    deferred_ = &c;
    return true;
  }

  // The user's own slot was emitted (forward_cancellation): passed on as a firing of its
  // own, unless the operation completed.
  void emit_forwarded(net::cancellation_type t) {
    {
      auto guard = shard_->lock();
      if (done_) return;
      ++refs_;
      ++firings_;
    }
    emit_and_end_firing(t);
  }

protected:
  ~deadline_state() = default; // through dealloc_ only

private:
  [[nodiscard]] bool drop_ref_locked() noexcept {
    assert(refs_ > 0);
    return --refs_ == 0;
  }

  // Carries a deferred completion to the I/O executor (see emit_now); destroys it if
  // never run.
  class posted_completion {
  public:
    explicit posted_completion(deferred_completion* c) noexcept : c_(c) {}
    posted_completion(posted_completion&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
    posted_completion& operator=(posted_completion&&) = delete;
    ~posted_completion() {
      if (c_) c_->run(c_, false);
    }
    void operator()() {
      deferred_completion* c = std::exchange(c_, nullptr);
      c->run(c, true);
    }

  private:
    deferred_completion* c_;
  };

  // Carries the firing ref to the I/O executor; gives it back if never run.
  class emitter {
  public:
    explicit emitter(deadline_state* s) noexcept : s_(s) {}
    emitter(emitter&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    emitter& operator=(emitter&&) = delete;
    ~emitter() {
      if (s_) s_->give_back_unrun();
    }
    void operator()() {
      const dispatch_watch::run_scope scope; // a cancellation handler may throw
      std::exchange(s_, nullptr)->emit_now();
    }

  private:
    deadline_state* s_;
  };

  // Counts the deadline among the shard's pending operations (lock held). A count that
  // throws (the tracked executor it may take) leaves it uncounted, as if refused.
  void count_locked() noexcept {
    try {
      counted_ = shard_->count_pending_locked();
    } catch (...) {
      counted_ = false;
    }
  }

  void settle_count_locked(op_result r, wheel_shard::idle_action idle =
                                             wheel_shard::idle_action::now) noexcept {
    if (counted_) shard_->uncount_pending_locked(r, 1, idle);
    counted_ = false;
  }

  // The deadline came (lock held): queue the emission as an operation of the step.
  static std::size_t due(due_entry& e, due_step& step) {
    auto& s = static_cast<deadline_state&>(e);
    s.settle_count_locked(op_result::success);
    ++s.refs_; // the firing ref
    ++s.firings_;
    step.out.push_back(static_cast<wheel_op&>(s));
    return 1;
  }

  // The step runs it outside the lock (action::complete), or shutdown drops it.
  static bool fire(wheel_op* op, action a, void*) {
    // Never on a wait_list, so never asked about cancellation handlers.
    assert(a == action::complete || a == action::destroy);
    auto* s = static_cast<deadline_state*>(op);
    emitter e(s);
    if (a != action::complete) return false;
    if (runs_inline(s->io_ex_, *s->shard_)) {
      e();
      return false;
    }
    const dispatch_watch watch;
    net::dispatch(s->io_ex_, std::move(e));
    return watch.handler_threw();
  }

  // The firing ref of an emission that never ran: shutdown dropped it, or the I/O
  // executor threw from its dispatch (a user's, or a strand's that could not allocate)
  // or dropped it unrun. Unless the operation completed or the shard shut down
  // meanwhile, the deadline goes back on the wheel for the next tick, to be emitted
  // again then, so the operation is not left without its deadline (late, never early).
  // Not as passed: while the executor keeps failing, each step would retry at once, in
  // a busy loop.
  // A completion that waited for this firing is posted to the emission's executor (or
  // destroyed, after shutdown).
  void give_back_unrun() noexcept {
    bool shut_down;
    {
      auto guard = shard_->lock();
      shut_down = shard_->shut_down_locked();
      if (!done_ && !shut_down && !linked()) {
        // Counted again, as when it was armed (the firing uncounted it): the driver
        // wakes the wheel for pending operations only. Past max_pending too: it was
        // admitted once, and refused it would wait for a step that nothing might bring
        // (with its shard's last operation gone and the limit filled on another shard).
        // Only a count that throws (a user's executor's tracked work) leaves it so.
        // Not through count_locked: a parameter there to choose cost every deadline's
        // arming 4 to 11 instructions (W9, callgrind).
        if (!counted_) {
          try {
            shard_->count_pending_past_limit_locked();
            counted_ = true;
          } catch (...) {
          }
        }
        shard_->schedule_nothrow_locked(*this, shard_->next_tick_time_locked());
      }
    }
    deferred_completion* c = end_firing();
    if (c) post_or_destroy(c, !shut_down);
  }

  // Ends a firing: gives back its ref (freeing the state if it was the last) and returns
  // the completion that waited for the firings, if this was the last of them. The state
  // may be gone on return.
  [[nodiscard]] deferred_completion* end_firing() noexcept {
    deferred_completion* c = nullptr;
    bool last;
    {
      auto guard = shard_->lock();
      assert(firings_ > 0);
      if (--firings_ == 0) c = std::exchange(deferred_, nullptr);
      last = drop_ref_locked();
    }
    // A waiting completion holds the handler's ref: never the last one out here then.
    assert(!(last && c));
    if (last) dealloc_(this);
    return c;
  }

  // Runs `c` after an exception has left (a handler is never invoked while one unwinds):
  // posted to the emission's executor; destroyed if `post` is false or the post fails.
  // `ex` is a copy: the state may be freed by then.
  static void post_or_destroy(deferred_completion* c, const net::any_io_executor& ex,
                              bool post) noexcept {
    if (post) {
      try {
        net::post(ex, posted_completion(c));
        return;
      } catch (...) {
      }
    }
    c->run(c, false);
  }
  void post_or_destroy(deferred_completion* c, bool post) noexcept {
    // The completion holds the handler's ref: the state, and io_ex_, are still here.
    post_or_destroy(c, io_ex_, post);
  }

  // On the emission's executor: emits unless the operation completed first. Consumes
  // the firing ref.
  void emit_now() {
    bool emit;
    {
      auto guard = shard_->lock();
      emit = !done_;
    }
    if (emit) {
      emit_and_end_firing(type_);
    } else if (deferred_completion* c = end_firing()) {
      c->run(c, true);
    }
  }

  // Emits `t` on the signal, then ends the firing and runs the completion that waited
  // for it, if any (the operation may have completed inside the emission, from its
  // cancellation handler). If a cancellation handler threw, that completion is posted to
  // the emission's executor instead, to run after the exception has left: never invoked
  // while an exception unwinds, nor lost (only if the post itself fails is it destroyed,
  // which ends the deadline). The firing ends even then: another firing's completion
  // may be waiting for it, and the ref must be given back.
  void emit_and_end_firing(net::cancellation_type t) {
    struct end_on_throw {
      deadline_state* s;
      ~end_on_throw() {
        if (!s) return;
        const net::any_io_executor ex = s->io_ex_; // s may be freed by end_firing
        if (deferred_completion* c = s->end_firing()) post_or_destroy(c, ex, true);
      }
    } guard{this};
    signal.emit(t);
    guard.s = nullptr;
    // The state may be gone after end_firing: only locals from then on.
    if (deferred_completion* c = end_firing()) c->run(c, true);
  }

  wheel_shard* shard_;
  net::any_io_executor io_ex_;      // where emissions run: the handler's associated executor,
                                    // or the operation's I/O executor (emission_executor)
  net::cancellation_type type_;     // what they emit
  dealloc_func dealloc_;
  unsigned refs_ = 1;                       // under the lock: the initiation's, to start with
  unsigned firings_ = 0;                    // under the lock: firings under way (see the top)
  deferred_completion* deferred_ = nullptr; // under the lock: the completion that waits for them
  bool done_ = false;                       // under the lock: the operation completed
  bool counted_ = false;                    // under the lock: counted in pending
};

// The state allocated from the handler's allocator, which it keeps to free itself.
template <class Alloc>
class deadline_state_impl final : public deadline_state {
public:
  using alloc_type =
      typename std::allocator_traits<Alloc>::template rebind_alloc<deadline_state_impl>;

  static deadline_state* create(const Alloc& a, wheel_shard& shard,
                                net::any_io_executor&& io_ex,
                                net::cancellation_type type) {
    alloc_type alloc(a);
    deadline_state_impl* p = std::allocator_traits<alloc_type>::allocate(alloc, 1);
    ::new (static_cast<void*>(p)) deadline_state_impl(alloc, shard, std::move(io_ex), type);
    return p;
  }

private:
  deadline_state_impl(const alloc_type& a, wheel_shard& shard,
                      net::any_io_executor&& io_ex, net::cancellation_type type)
      : deadline_state(shard, std::move(io_ex), type, &deadline_state_impl::destroy),
        alloc_(a) {}

  static void destroy(deadline_state* base) noexcept {
    auto* self = static_cast<deadline_state_impl*>(base);
    alloc_type alloc(self->alloc_);
    self->~deadline_state_impl();
    std::allocator_traits<alloc_type>::deallocate(alloc, self, 1);
  }

  alloc_type alloc_;
};

} // namespace asio_wheel::detail

#endif
