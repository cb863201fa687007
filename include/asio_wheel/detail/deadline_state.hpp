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
// the signal on the operation's I/O executor (inline when that is the wheel context's
// plain executor, else through dispatch). Under the shard's lock the emitter checks
// `done` and marks `emitting`; the completing handler sets `done` and, if an emission
// is under way on another thread, waits for it to end before the user's handler runs.
// So an emission never starts after the operation completed, never overlaps the
// user's handler, and never touches freed memory; the handler itself is invoked
// exactly once, by the operation. An operation may also complete inside the emission,
// on the emitting thread (its cancellation handler completes it): then its handler
// waits, moved out to memory of its own (a deferred_completion), until the emission has
// ended and given back its ref, so that the state, allocated with the handler's
// allocator, is freed before the handler runs, as Asio requires of an operation's
// memory (and the handler may free that allocator's arena).
#ifndef ASIO_WHEEL_DETAIL_DEADLINE_STATE_HPP
#define ASIO_WHEEL_DETAIL_DEADLINE_STATE_HPP

#include <asio_wheel/detail/handler_op.hpp>
#include <asio_wheel/detail/wheel_clock.hpp>
#include <asio_wheel/detail/wheel_op.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <asio_wheel/detail/config.hpp>

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <memory>
#include <thread>
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
        try {
          counted_ = shard_->count_pending_locked();
        } catch (...) {
          counted_ = false; // as if refused
        }
        shard_->schedule_nothrow_locked(*this, counted_ ? t : steady_time::min());
        shard_->settle_moot_locked();
      }
      last = drop_ref_locked();
    }
    if (last) dealloc_(this);
  }

  // Whether the calling thread is inside this deadline's emission: the operation
  // completes from its own cancellation handler. Costs one load when it is not: this
  // thread's own store of emitting_ is what it would see.
  bool emitting_here() const noexcept {
    if (!emitting_.load(std::memory_order_relaxed)) return false;
    auto guard = shard_->lock();
    return emitting_.load(std::memory_order_relaxed) && emitter_ == std::this_thread::get_id();
  }
  // Inside the emission (emitting_here()): `c` runs once the emission has ended. The
  // emitting thread's own field: no lock.
  void defer_completion(deferred_completion& c) noexcept {
    assert(deferred_ == nullptr);
    deferred_ = &c;
  }

  // The operation completed (or its handler was destroyed): takes the entry off the
  // wheel, waits out an emission running on another thread, drops the handler's ref.
  // With `may_settle_later`, and when this thread runs the shard's context (which then
  // outlives the caller's next steps), what the shard does on being left idle waits:
  // returns the shard, whose settle_idle() the caller must then call. Else nullptr.
  wheel_shard* finish(bool may_settle_later = false) noexcept {
    bool wait = false, last = false;
    wheel_shard* settle = nullptr;
    {
      auto guard = shard_->lock();
      done_ = true;
      if (!shard_->shut_down_locked()) {
        if (may_settle_later && shard_->context_runs_here_locked()) settle = shard_;
        if (settle) {
          shard_->unschedule_settling_later_locked(*this);
          settle_count_locked(op_result::aborted, wheel_shard::idle_action::settle_later);
        } else {
          shard_->unschedule_locked(*this);
          settle_count_locked(op_result::aborted);
        }
      }
      wait = emitting_.load(std::memory_order_relaxed) && emitter_ != std::this_thread::get_id();
      // While an emission runs its firing ref keeps the state; ours must too, until
      // the wait below has read emitting_ for the last time.
      if (!wait) last = drop_ref_locked();
    }
    if (wait) {
      while (emitting_.load(std::memory_order_acquire)) std::this_thread::yield();
      release();
    } else if (last) {
      dealloc_(this);
    }
    return settle;
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
  void give_back_unrun() noexcept {
    bool last;
    {
      auto guard = shard_->lock();
      if (!done_ && !shard_->shut_down_locked() && !linked())
        shard_->schedule_nothrow_locked(*this, shard_->next_tick_time_locked());
      last = drop_ref_locked();
    }
    if (last) dealloc_(this);
  }

  // On the operation's I/O executor: emits unless the operation completed first.
  // Consumes the firing ref.
  void emit_now() {
    bool emit = false, last = false;
    {
      auto guard = shard_->lock();
      if (!done_) {
        emit = true;
        emitter_ = std::this_thread::get_id();
        emitting_.store(true, std::memory_order_relaxed);
      } else {
        last = drop_ref_locked();
      }
    }
    if (emit) {
      // A completion that happened inside the emission (defer_completion) runs after
      // it, once the firing ref is given back: its own ref is then the state's last.
      // If a cancellation handler threw, it is posted to the I/O executor instead, to
      // run after the exception has left the step: a handler is never invoked while an
      // exception unwinds, nor lost (only if the post itself fails is it destroyed,
      // which ends the deadline).
      struct deferred_run {
        deadline_state* s;
        deferred_completion* c = nullptr;
        ~deferred_run() {
          if (!c) return;
          // s is live: the deferred completion holds the handler's ref.
          try {
            net::post(s->io_ex_, posted_completion(c));
          } catch (...) {
            c->run(c, false);
          }
        }
      } later{this};
      {
        // The emission ends even if a cancellation handler throws: a completion on
        // another thread waits for it (finish), and the firing ref must be given back.
        struct end_emission {
          deadline_state* s;
          deferred_completion*& later;
          ~end_emission() {
            later = std::exchange(s->deferred_, nullptr);
            s->emitting_.store(false, std::memory_order_release);
            s->release();
          }
        } end{this, later.c};
        signal.emit(type_);
      }
      // The state may be gone here: only locals from now on.
      if (deferred_completion* c = std::exchange(later.c, nullptr)) c->run(c, true);
    } else if (last) {
      dealloc_(this);
    }
  }

  wheel_shard* shard_;
  net::any_io_executor io_ex_;      // where emissions run
  net::cancellation_type type_;     // what they emit
  dealloc_func dealloc_;
  unsigned refs_ = 1;                       // under the lock: the initiation's, to start with
  std::atomic<bool> emitting_{false};       // set under the lock, cleared after emit
  std::thread::id emitter_;                 // under the lock: the emitting thread
  deferred_completion* deferred_ = nullptr; // the emitting thread's: see defer_completion
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
