// basic_delay_queue<T>: elements that become available after a delay (unpaid orders,
// cache entries, retries), taken asynchronously in expiry order.
//
// push(value, delay) puts an element on the context's wheel and returns a key; erase
// and reset act on it through the key in O(1). When the delay has passed the element
// expires: async_take completes with the earliest expired element (ties in push order),
// several pending takes are served in the order they were started, and a take started
// after elements expired completes as if by post, never inside async_take. An element
// pushed or reset with its delay passed (its tick reached; expiries round up to the
// wheel's tick) has expired at once, at its place among the expired; but while
// elements that came due wait for a step to hand them over (after a step that
// expiry_batch stopped, or, in manual mode, an advance() to a new tick), it waits
// behind them, and a take started then waits for that step too, which serves it in
// order.
//
// Keys: copyable, comparable handles carrying the push's number and the queue's identity.
// A key whose element was taken or erased, or that comes from another queue (even a
// destroyed one), is stale: erase and reset return false for it, never undefined.
//
// cancel() and destruction complete pending takes with operation_aborted (with a
// value-initialised T); per-operation cancellation works too. Elements still in the
// queue are destroyed with it. T may be move-only; it must be nothrow move
// constructible (a take moves its element out as it completes) and, for async_take,
// default constructible (what an aborted take passes). No element is moved or destroyed
// under the wheel's lock unless T is trivially copyable: T's move constructor and
// destructor may use the wheel (an element may hold a timer with a wait pending).
//
// Costs: push O(1) with one allocation until the queue has recycled nodes (nodes are
// kept for reuse until the queue is destroyed: memory follows the peak size); erase,
// reset O(1) while scheduled, O(1) or O(log n) once expired; an expiry O(1) on the
// wheel plus its place among the expired, by (expiry, push order), and a take of an
// expired element the same: O(1) for elements that expire in that order, O(log n) for
// those of one tick that come out of it (the wheel keeps no order inside a tick). Each
// expiry counts against wheel_options::expiry_batch. Memory, at the peak size: a node
// per element, and room for its key twice among the expired (the sorted run and the
// heap, 24 bytes each), reserved by push so that an expiry never allocates.
// async_take: one allocation from the handler's allocator. A take or erase of an
// element that is not trivially copyable takes the wheel's lock twice (see above).
//
// Moves carry the elements, the pending takes and the keys (see the move constructor).
//
// Thread safety: as basic_timer (one object not used from two threads at once). The
// queue must be destroyed before its execution context.
#ifndef ASIO_WHEEL_DELAY_QUEUE_HPP
#define ASIO_WHEEL_DELAY_QUEUE_HPP

#include <asio_wheel/detail/delay_queue_state.hpp>
#include <asio_wheel/detail/handler_op.hpp>
#include <asio_wheel/detail/wheel_shard.hpp>

#include <asio_wheel/detail/config.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

namespace asio_wheel {

template <class T, class Executor = net::any_io_executor>
class basic_delay_queue {
  static_assert(std::is_nothrow_destructible_v<T>,
                "delay_queue elements are destroyed where an exception could not be "
                "reported (the queue's destructor, a recycled node): T's destructor must "
                "not throw");
  // The move alone: is_nothrow_move_constructible would also test the destructor.
  static_assert(noexcept(::new (static_cast<void*>(nullptr)) T(std::declval<T&&>())),
                "delay_queue elements are moved to a take on its completion, where an "
                "exception could not be reported: T's move constructor must not throw");
  using state_type = detail::delay_queue_state<T>;
  using node = detail::delay_node<T>;
  using node_state = typename node::state_type;

public:
  using executor_type = Executor;
  using value_type = T;
  using clock_type = std::chrono::steady_clock;
  using duration = clock_type::duration;
  using time_point = clock_type::time_point;

  // The queue type when rebound to another executor.
  template <class OtherExecutor>
  struct rebind_executor {
    using other = basic_delay_queue<T, OtherExecutor>;
  };

  // Names one pushed element. A default-constructed key is stale for every queue.
  class key {
  public:
    key() noexcept = default;

    // Equal when they name the same push; ordered by queue, node and push (a
    // total order, so keys can be map keys; it says nothing about expiry).
    friend bool operator==(const key& a, const key& b) noexcept {
      return a.queue_ == b.queue_ && a.node_ == b.node_ && a.seq_ == b.seq_;
    }
    friend bool operator!=(const key& a, const key& b) noexcept { return !(a == b); }
    friend bool operator<(const key& a, const key& b) noexcept {
      if (a.queue_ != b.queue_) return a.queue_ < b.queue_;
      if (a.node_ != b.node_) return std::less<node*>()(a.node_, b.node_);
      return a.seq_ < b.seq_;
    }
    friend bool operator>(const key& a, const key& b) noexcept { return b < a; }
    friend bool operator<=(const key& a, const key& b) noexcept { return !(b < a); }
    friend bool operator>=(const key& a, const key& b) noexcept { return !(a < b); }

  private:
    friend class basic_delay_queue;
    key(node* n, std::uint64_t seq, std::uint64_t queue) noexcept
        : node_(n), seq_(seq), queue_(queue) {}

    node* node_ = nullptr;      // dereferenced only when queue_ names the queue at hand
    std::uint64_t seq_ = 0;     // the push's number in its queue (never reused)
    std::uint64_t queue_ = 0;   // queue identities start at 1
  };

  explicit basic_delay_queue(const executor_type& ex)
      : executor_(ex), state_(detail::shard_for(ex)) {}

  template <class ExecutionContext,
            std::enable_if_t<std::is_convertible_v<ExecutionContext&,
                                                   net::execution_context&>,
                             int> = 0>
  explicit basic_delay_queue(ExecutionContext& ctx)
      : basic_delay_queue(executor_type(ctx.get_executor())) {}

  // The elements, the pending takes and the keys' validity move along with the queue:
  // nothing completes or is posted, and a key of the moved-from queue names its element
  // in this one. The moved-from queue is left empty, as a new one on the same executor
  // (the old keys are stale for it). O(n) in the queue's peak size, under the wheel's
  // lock: each node names its queue. No element is moved.
  basic_delay_queue(basic_delay_queue&& other) noexcept
      : executor_(other.executor_), state_(*other.state_.shard) {
    state_.take_over(other.state_);
  }

  template <class OtherExecutor,
            std::enable_if_t<std::is_convertible_v<const OtherExecutor&, executor_type>, int> = 0>
  basic_delay_queue(basic_delay_queue<T, OtherExecutor>&& other) noexcept
      : executor_(other.executor_), state_(*other.state_.shard) {
    state_.take_over(other.state_);
  }

  // The elements of *this are destroyed and its pending takes complete with
  // operation_aborted, as by its destructor; then other's move over, as above.
  basic_delay_queue& operator=(basic_delay_queue&& other) {
    if (this != &other) {
      state_.clear();
      executor_ = other.executor_;
      state_.take_over(other.state_);
    }
    return *this;
  }

  // As above, from a queue on another executor that converts to ours.
  template <class OtherExecutor,
            std::enable_if_t<std::is_convertible_v<const OtherExecutor&, executor_type>, int> = 0>
  basic_delay_queue& operator=(basic_delay_queue<T, OtherExecutor>&& other) {
    basic_delay_queue tmp(std::move(other));
    return *this = std::move(tmp);
  }

  // Pending takes complete with operation_aborted; remaining elements are destroyed
  // (by the state's destructor).
  ~basic_delay_queue() = default;

  basic_delay_queue(const basic_delay_queue&) = delete;
  basic_delay_queue& operator=(const basic_delay_queue&) = delete;

  executor_type get_executor() noexcept { return executor_; }

  // Adds `value`, to expire after `delay` (a negative one: already expired).
  key push(T value, duration delay) {
    detail::wheel_shard& shard = *state_.shard;
    const time_point expiry = shard.deadline_after(delay);
    node* n = nullptr;
    {
      auto guard = shard.lock();
      if ((n = state_.free_nodes)) state_.free_nodes = n->next_free;
    }
    if (!n) {
      n = new node; // owned by all_nodes, which only this object's methods touch
      n->on_due = &state_type::element_due;
      n->owner = &state_;
      n->next_all = state_.all_nodes;
      state_.all_nodes = n;
    }
    // The node is ours alone while off both lists: replace its moved-from value
    // outside the lock.
    n->value.reset();
    n->value.emplace(std::move(value));
    auto guard = shard.lock();
    // An expiry never allocates. If this throws, nothing is added: the node is only
    // lost to reuse until the queue is destroyed.
    state_.expired.reserve(state_.size + 1);
    n->seq = state_.next_seq++;
    ++state_.size;
    // Added, whatever the executor does: a step or an arming it cannot take now comes
    // with the next call that needs one.
    state_.place_locked(*n, expiry);
    return key(n, n->seq, state_.id);
  }

  // Removes the element and destroys it; false if the key is stale.
  bool erase(key k) {
    node* n = nullptr;
    {
      auto guard = state_.shard->lock();
      if (!(n = find_locked(k))) return false;
      state_.unlink_locked(*n);
      state_.take_out_locked(*n);
      if constexpr (detail::moved_under_lock<T>) state_.recycle_locked(*n);
    }
    if constexpr (!detail::moved_under_lock<T>) {
      // Destroyed outside the lock (its destructor may use the wheel), while the node,
      // leaving, is ours alone; then the node goes back.
      n->value.reset();
      state_type::give_back(*state_.shard, *n);
    }
    return true;
  }

  // The element now expires after `delay` from now, even if it had expired already
  // (and not been taken); false if the key is stale.
  bool reset(key k, duration delay) {
    detail::wheel_shard& shard = *state_.shard;
    const time_point expiry = shard.deadline_after(delay);
    auto guard = shard.lock();
    node* n = find_locked(k);
    if (!n) return false;
    // Out of the expired queue, or off the wheel if it goes straight back in; a
    // scheduled element staying on the wheel moves there (the lazy rule: O(1)).
    if (n->state == node_state::expired || state_.expired_at_once_locked(expiry))
      state_.unlink_locked(*n);
    state_.place_locked(*n, expiry); // as in push
    return true;
  }

  // Elements pushed and not yet taken or erased, expired or not.
  std::size_t size() const {
    auto guard = state_.shard->lock();
    return state_.size;
  }

  // Pending takes complete with operation_aborted; returns how many.
  std::size_t cancel() {
    auto guard = state_.shard->lock();
    return state_.shard->abort_all_locked(state_.takers);
  }

  // Takes the earliest expired element, waiting for one if none has expired.
  // Completion signature void(error_code, T); any completion token.
  template <class Token>
  auto async_take(Token&& token) {
    static_assert(std::is_default_constructible_v<T>,
                  "async_take passes a value-initialised T to aborted takes");
    return net::async_initiate<Token, void(error_code, T)>(
        initiate_async_take(this), token);
  }

private:
  template <class, class>
  friend class basic_delay_queue;

  // The initiation object, with the I/O executor that adapters look for.
  class initiate_async_take {
  public:
    using executor_type = Executor;

    explicit initiate_async_take(basic_delay_queue* self) noexcept : self_(self) {}

    executor_type get_executor() const noexcept { return self_->executor_; }

    template <class TakeHandler>
    void operator()(TakeHandler&& handler) const {
      state_type& q = self_->state_;
      auto* op = detail::make_handler_op<detail::take_op<T>>(
          std::forward<TakeHandler>(handler), *q.shard, q.takers, self_->executor_);
      q.start_take(*op);
    }

  private:
    basic_delay_queue* self_;
  };

  // The live node `k` names, or nullptr if the key is stale (lock held).
  node* find_locked(const key& k) const noexcept {
    return k.queue_ == state_.id ? state_.find_locked(k.node_, k.seq_) : nullptr;
  }

  executor_type executor_;
  state_type state_;
};

// The delay queue on the default executor: what users name.
template <class T>
using delay_queue = basic_delay_queue<T>;

} // namespace asio_wheel

#endif
