// asio_wheel::basic_timed_stream on the manual clock: timeouts of reads, writes and both
// (Beast's basic_stream rule: the deadline an operation started with), what follows a
// timeout, cancel/close/per-operation cancellation, the one wheel entry and its reuse,
// races between a completion and the deadline (on a scripted next layer whose
// completions the test orders), composed operations, completion tokens and associated
// characteristics, lifetimes, and a multi-threaded run (TSan in scripts/test). Beast's
// http, websocket and ssl over the stream are in test_timed_stream_beast.cpp.
#define BOOST_TEST_MODULE timed_stream
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "counting_allocator.hpp"
#include "manual_clock.hpp"

#include <asio_wheel/cancel_after.hpp>
#include <asio_wheel/timed_stream.hpp>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

using namespace std::chrono_literals;

namespace {

using asio_wheel_test::aborted;
using socket_type = asio::local::stream_protocol::socket;
using local_stream = asio_wheel::basic_timed_stream<socket_type>;

#ifdef ASIO_WHEEL_STANDALONE
constexpr auto timed_out_condition = std::errc::timed_out;
#else
constexpr auto timed_out_condition = boost::system::errc::timed_out;
#endif

const error_code timeout = asio_wheel::error::timeout;

// What a read or write handler saw, and how often it ran.
struct outcome {
  int calls = 0;
  error_code ec;
  std::size_t n = 0;
  auto handler() {
    return [this](error_code e, std::size_t k) {
      ++calls;
      ec = e;
      n = k;
    };
  }
};

// A manual-clock context with a timed stream and its connected peer.
struct fixture : asio_wheel_test::manual_context {
  local_stream s{io};
  socket_type peer{io};
  std::array<char, 64> in{};

  fixture() { asio::local::connect_pair(s.socket(), peer); }

  std::size_t pending() const { return svc.stats().pending; }

  void read(outcome& o) { s.async_read_some(asio::buffer(in), o.handler()); }
};

// Writes into `sock` without blocking until its send buffer (and the peer's receive
// buffer) are full, so that the next write stays pending while the peer does not read.
std::size_t fill_send_buffer(socket_type& sock) {
  sock.non_blocking(true);
  std::vector<char> chunk(64 * 1024, 'x');
  std::size_t total = 0;
  for (;;) {
    error_code ec;
    const std::size_t n = sock.write_some(asio::buffer(chunk), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) break;
    BOOST_REQUIRE(!ec);
    total += n;
  }
  sock.non_blocking(false);
  return total;
}

// ---- a next layer whose operations complete only when the test says so ----

// One stored operation: its handler, completed later as if by post.
struct stored_op {
  virtual ~stored_op() = default;
  virtual void complete(error_code ec, std::size_t n) = 0;
};

template <class Handler>
struct stored_op_impl final : stored_op {
  Handler handler;
  asio::any_io_executor ex;
  stored_op_impl(Handler h, asio::any_io_executor e) : handler(std::move(h)), ex(std::move(e)) {}
  void complete(error_code ec, std::size_t n) override {
    asio::post(ex, [h = std::move(handler), ec, n]() mutable { std::move(h)(ec, n); });
  }
};

struct scripted_stream {
  using executor_type = asio::any_io_executor;

  explicit scripted_stream(asio::any_io_executor e) : ex(std::move(e)) {}

  executor_type get_executor() { return ex; }

  template <class Buffers, class Handler>
  void async_read_some(const Buffers&, Handler&& h) {
    ++reads_started;
    if (throw_on_read) throw std::runtime_error("next layer"); // the handler not taken
    read = std::make_unique<stored_op_impl<std::decay_t<Handler>>>(std::forward<Handler>(h), ex);
  }
  template <class Buffers, class Handler>
  void async_write_some(const Buffers&, Handler&& h) {
    ++writes_started;
    write = std::make_unique<stored_op_impl<std::decay_t<Handler>>>(std::forward<Handler>(h), ex);
  }

  // Queues the completion of the pending read/write (it runs at the next poll).
  void complete_read(std::size_t n, error_code ec = {}) { std::exchange(read, nullptr)->complete(ec, n); }
  void complete_write(std::size_t n, error_code ec = {}) { std::exchange(write, nullptr)->complete(ec, n); }

  void cancel(error_code& ec) {
    ec = {};
    if (read) complete_read(0, asio::error::operation_aborted);
    if (write) complete_write(0, asio::error::operation_aborted);
  }
  void close(error_code& ec) {
    ++closes;
    cancel(ec);
  }

  asio::any_io_executor ex;
  std::unique_ptr<stored_op> read, write;
  int reads_started = 0, writes_started = 0, closes = 0;
  bool throw_on_read = false;
};

using scripted_timed_stream = asio_wheel::basic_timed_stream<scripted_stream>;

// The stream on a strand: the wheel hands the wait's completion to the strand, where it
// queues behind whatever the strand already has, so a completion and the deadline can
// be ordered either way after the wait has been handed over.
struct scripted_fixture : asio_wheel_test::manual_context {
  scripted_timed_stream s{asio::any_io_executor(asio::make_strand(io))};
  std::array<char, 8> buf{};
  scripted_stream& next() { return s.next_layer(); }
  std::size_t pending() const { return svc.stats().pending; }
};

} // namespace

// ---- the error code ----

BOOST_AUTO_TEST_CASE(timeout_is_an_asio_wheel_error_whose_condition_is_timed_out) {
  error_code ec = asio_wheel::error::timeout;
  BOOST_TEST(ec.category().name() == std::string("asio_wheel"));
  BOOST_TEST(&ec.category() == &asio_wheel::error::category());
  BOOST_TEST(!ec.message().empty());
  BOOST_TEST(ec.message() != error_code(asio_wheel::error::too_many_timers).message());
  BOOST_TEST((ec == timed_out_condition));
  BOOST_TEST((ec.default_error_condition() == make_error_condition(timed_out_condition)));
  // The other code keeps a condition of its own.
  const error_code too_many = asio_wheel::error::too_many_timers;
  BOOST_TEST(!(too_many == timed_out_condition));
  BOOST_TEST((too_many.default_error_condition().category() == asio_wheel::error::category()));
}

// ---- timeouts ----

BOOST_AUTO_TEST_CASE(read_times_out_at_its_deadline_not_before_and_closes_the_next_layer) {
  fixture f;
  f.s.expires_after(50ms);
  outcome o;
  f.read(o);
  BOOST_TEST(f.pending() == 1u); // one wheel entry
  f.advance(49ms);
  BOOST_TEST(o.calls == 0);
  BOOST_TEST(f.s.socket().is_open());
  f.advance(1ms);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(o.ec == timeout);
  BOOST_TEST((o.ec == timed_out_condition));
  BOOST_TEST(o.n == 0u);
  BOOST_TEST(!f.s.socket().is_open());
  BOOST_TEST(f.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(data_before_the_deadline_completes_the_read_and_releases_the_wait) {
  fixture f;
  f.s.expires_after(50ms);
  outcome o;
  f.read(o);
  asio::write(f.peer, asio::buffer("hello", 5));
  f.settle();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(!o.ec);
  BOOST_TEST(o.n == 5u);
  BOOST_TEST(f.pending() == 0u); // nothing in flight: the wait is gone, no work is left
  f.advance(1h);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(f.s.socket().is_open());
}

BOOST_AUTO_TEST_CASE(write_times_out_when_the_peer_does_not_read) {
  fixture f;
  const std::size_t filled = fill_send_buffer(f.s.socket());
  BOOST_TEST(filled > 0u);
  f.s.expires_after(2s);
  std::vector<char> big(1 << 20, 'y');
  outcome w;
  f.s.async_write_some(asio::buffer(big), w.handler());
  f.advance(1999ms);
  BOOST_TEST(w.calls == 0);
  f.advance(1ms);
  BOOST_TEST(w.calls == 1);
  BOOST_TEST(w.ec == timeout);
  BOOST_TEST(!f.s.socket().is_open());
}

BOOST_AUTO_TEST_CASE(read_and_write_in_flight_share_one_wheel_entry_and_time_out_together) {
  fixture f;
  fill_send_buffer(f.s.socket());
  f.s.expires_after(100ms);
  outcome r, w;
  f.read(r);
  std::vector<char> big(1 << 20, 'y');
  f.s.async_write_some(asio::buffer(big), w.handler());
  BOOST_TEST(f.pending() == 1u);
  f.advance(100ms);
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(w.calls == 1);
  BOOST_TEST(r.ec == timeout);
  BOOST_TEST(w.ec == timeout);
  BOOST_TEST(f.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(the_earlier_deadline_times_out_both_directions) {
  fixture f;
  fill_send_buffer(f.s.socket());
  f.s.expires_after(10ms);
  outcome r, w;
  f.read(r);                  // deadline 10 ms
  f.s.expires_after(1h);      // for the write only
  std::vector<char> big(1 << 20, 'y');
  f.s.async_write_some(asio::buffer(big), w.handler());
  BOOST_TEST(f.pending() == 1u);
  f.advance(10ms);
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(w.calls == 1);
  BOOST_TEST(r.ec == timeout);
  BOOST_TEST(w.ec == timeout); // the stream timed out, not just the read
}

BOOST_AUTO_TEST_CASE(a_later_deadline_takes_over_when_the_earlier_operation_completes) {
  fixture f;
  fill_send_buffer(f.s.socket());
  f.s.expires_after(10ms);
  outcome r, w;
  f.read(r);
  f.s.expires_after(50ms);
  std::vector<char> big(1 << 20, 'y');
  f.s.async_write_some(asio::buffer(big), w.handler());
  asio::write(f.peer, asio::buffer("x", 1));
  f.settle();
  BOOST_TEST(r.calls == 1);
  BOOST_TEST(!r.ec);
  BOOST_TEST(f.pending() == 1u); // the same entry, moved to the write's deadline
  f.advance(10ms);
  BOOST_TEST(w.calls == 0);
  f.advance(39ms);
  BOOST_TEST(w.calls == 0);
  f.advance(1ms);
  BOOST_TEST(w.calls == 1);
  BOOST_TEST(w.ec == timeout);
}

BOOST_AUTO_TEST_CASE(a_new_expiry_does_not_move_an_operation_in_flight) {
  fixture f;
  f.s.expires_after(10ms);
  outcome o;
  f.read(o);
  f.s.expires_after(1h); // applies to operations started later
  f.advance(10ms);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(o.ec == timeout);

  fixture g;
  g.s.expires_after(10ms);
  outcome p;
  g.read(p);
  g.s.expires_never(); // nor does never
  g.advance(10ms);
  BOOST_TEST(p.calls == 1);
  BOOST_TEST(p.ec == timeout);
}

BOOST_AUTO_TEST_CASE(expires_never_means_no_deadline_and_no_wheel_entry) {
  fixture f;
  f.s.expires_after(10ms);
  f.s.expires_never();
  BOOST_TEST((f.s.expiry() == std::chrono::steady_clock::time_point::max()));
  outcome o;
  f.read(o);
  BOOST_TEST(f.pending() == 0u);
  f.advance(24h);
  BOOST_TEST(o.calls == 0);
  asio::write(f.peer, asio::buffer("x", 1));
  f.settle();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(!o.ec);
}

BOOST_AUTO_TEST_CASE(expires_at_and_out_of_range_durations) {
  fixture f;
  f.s.expires_at(f.svc.now() + 5ms);
  outcome o;
  f.read(o);
  f.advance(5ms);
  BOOST_TEST(o.ec == timeout);

  fixture g;
  g.s.expires_after(std::chrono::steady_clock::duration::max()); // saturates to never
  BOOST_TEST((g.s.expiry() == std::chrono::steady_clock::time_point::max()));
  outcome p;
  g.read(p);
  BOOST_TEST(g.pending() == 0u);
  g.advance(1h);
  BOOST_TEST(p.calls == 0);
  g.s.cancel();
  g.settle();
  BOOST_TEST(p.ec == aborted);

  fixture h;
  h.s.expires_after(std::chrono::steady_clock::duration::min()); // long passed
  outcome q;
  h.read(q);
  BOOST_TEST(q.calls == 0);
  h.settle();
  BOOST_TEST(q.ec == timeout);
}

// ---- after a timeout ----

BOOST_AUTO_TEST_CASE(operations_after_a_timeout_fail_until_a_new_expiry_is_set) {
  fixture f;
  f.s.expires_after(10ms);
  outcome first;
  f.read(first);
  f.advance(10ms);
  BOOST_TEST(first.ec == timeout);

  outcome r, w;
  f.read(r);
  f.s.async_write_some(asio::buffer("x", 1), w.handler());
  BOOST_TEST(r.calls == 0); // never inside the initiating function
  BOOST_TEST(w.calls == 0);
  f.settle();
  BOOST_TEST(r.ec == timeout);
  BOOST_TEST(w.ec == timeout);
  BOOST_TEST(r.n == 0u);

  // A new expiry lets operations through again: to the next layer, closed by the
  // timeout, which says so itself.
  f.s.expires_after(1s);
  outcome again;
  f.read(again);
  f.settle();
  BOOST_TEST(again.calls == 1);
  BOOST_TEST(again.ec);
  BOOST_TEST(again.ec != timeout);
}

BOOST_AUTO_TEST_CASE(an_expiry_that_passed_while_idle_times_out_the_next_operation) {
  fixture f;
  f.s.expires_after(10ms);
  f.advance(20ms);
  BOOST_TEST(f.s.socket().is_open()); // nothing is watched while nothing is in flight
  BOOST_TEST(f.pending() == 0u);
  outcome o;
  asio::write(f.peer, asio::buffer("x", 1)); // even with data ready
  f.read(o);
  BOOST_TEST(o.calls == 0);
  f.settle();
  BOOST_TEST(o.ec == timeout);
  BOOST_TEST(!f.s.socket().is_open());
}

// ---- cancel, close, per-operation cancellation ----

BOOST_AUTO_TEST_CASE(cancel_aborts_both_directions_and_keeps_the_stream_usable) {
  fixture f;
  fill_send_buffer(f.s.socket());
  f.s.expires_after(1s);
  outcome r, w;
  f.read(r);
  std::vector<char> big(1 << 20, 'y');
  f.s.async_write_some(asio::buffer(big), w.handler());
  f.s.cancel();
  BOOST_TEST(r.calls == 0);
  f.settle();
  BOOST_TEST(r.ec == aborted);
  BOOST_TEST(w.ec == aborted);
  BOOST_TEST(f.s.socket().is_open());
  BOOST_TEST(f.pending() == 0u);

  outcome again;
  f.read(again);
  asio::write(f.peer, asio::buffer("x", 1));
  f.settle();
  BOOST_TEST(!again.ec);
  f.advance(1s); // the old deadline still applies to reads: this one completed in time
  BOOST_TEST(again.calls == 1);
}

BOOST_AUTO_TEST_CASE(close_during_a_pending_read_aborts_it_not_a_timeout) {
  fixture f;
  f.s.expires_after(1s);
  outcome o;
  f.read(o);
  f.s.close();
  f.settle();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(o.ec == aborted);
  BOOST_TEST(!f.s.socket().is_open());
  BOOST_TEST(f.pending() == 0u);
  f.advance(1s);
  BOOST_TEST(o.calls == 1);
}

BOOST_AUTO_TEST_CASE(per_operation_cancellation_cancels_that_operation_only) {
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                    asio::cancellation_type::total}) {
    fixture f;
    fill_send_buffer(f.s.socket());
    f.s.expires_after(1s);
    asio::cancellation_signal sig;
    outcome r, w;
    f.s.async_read_some(asio::buffer(f.in), asio::bind_cancellation_slot(sig.slot(), r.handler()));
    std::vector<char> big(1 << 20, 'y');
    f.s.async_write_some(asio::buffer(big), w.handler());
    sig.emit(type);
    f.settle();
    BOOST_TEST(r.calls == 1);
    BOOST_TEST(r.ec == aborted);
    BOOST_TEST(w.calls == 0);
    BOOST_TEST(f.s.socket().is_open());
    BOOST_TEST(f.pending() == 1u); // the write's deadline
    f.advance(1s);
    BOOST_TEST(w.calls == 1);
    BOOST_TEST(w.ec == timeout);
  }
}

// ---- one operation per direction ----

// A read whose handler is destroyed without running (bound to a thread pool that was
// stopped, and then destroyed with the completion queued): its direction is free again
// and the wait released, as after a completion. Before, every later read failed with
// already_started, the wait stayed pending (holding run() on the steady clock), and its
// deadline then closed a stream with nothing in flight (an outside review, session 47).
BOOST_AUTO_TEST_CASE(a_read_whose_handler_is_destroyed_unrun_frees_its_direction) {
  fixture f;
  f.s.expires_after(2s);
  auto pool = std::make_unique<asio::thread_pool>(1);
  pool->stop();
  int calls = 0;
  f.s.async_read_some(asio::buffer(f.in),
                      asio::bind_executor(*pool, [&calls](error_code, std::size_t) { ++calls; }));
  asio::write(f.peer, asio::buffer("x", 1));
  f.settle();   // the read completes: its handler is queued on the stopped pool
  pool.reset(); // and destroyed there unrun
  BOOST_TEST(calls == 0);
  BOOST_TEST(f.pending() == 0u); // the wait released
  outcome later;
  f.read(later);
  asio::write(f.peer, asio::buffer("y", 1));
  f.settle();
  BOOST_TEST(later.calls == 1);
  BOOST_TEST(!later.ec);
  BOOST_TEST(later.n == 1u);
  f.advance(1h);
  BOOST_TEST(f.s.socket().is_open()); // nothing in flight timed out
}

// A next layer that throws from its read before taking the handler: the read throws to
// its caller, and the wrapped handler, destroyed unrun, frees the direction (once) and
// releases the wait, so the next read starts.
BOOST_AUTO_TEST_CASE(a_next_layer_that_throws_leaves_the_direction_free) {
  scripted_fixture f;
  f.s.expires_after(1s);
  f.next().throw_on_read = true;
  outcome thrown;
  BOOST_CHECK_THROW(f.s.async_read_some(asio::buffer(f.buf), thrown.handler()), std::runtime_error);
  f.next().throw_on_read = false;
  f.settle();
  BOOST_TEST(thrown.calls == 0);
  BOOST_TEST(f.pending() == 0u);
  outcome later;
  f.s.async_read_some(asio::buffer(f.buf), later.handler());
  BOOST_TEST(f.next().reads_started == 2);
  f.next().complete_read(3);
  f.settle();
  BOOST_TEST(later.calls == 1);
  BOOST_TEST(!later.ec);
  BOOST_TEST(later.n == 3u);
}

BOOST_AUTO_TEST_CASE(a_second_operation_of_one_direction_fails_and_a_zero_byte_one_succeeds) {
  fixture f;
  f.s.expires_after(1s);
  outcome first, second, empty;
  f.read(first);
  std::array<char, 4> other{};
  f.s.async_read_some(asio::buffer(other), second.handler());
  f.s.async_read_some(asio::mutable_buffer(), empty.handler());
  BOOST_TEST(second.calls == 0);
  BOOST_TEST(empty.calls == 0);
  f.settle();
  BOOST_TEST(second.ec == asio::error::already_started);
  BOOST_TEST(empty.calls == 1);
  BOOST_TEST(!empty.ec);
  BOOST_TEST(empty.n == 0u);
  BOOST_TEST(first.calls == 0); // undisturbed
  asio::write(f.peer, asio::buffer("abc", 3));
  f.settle();
  BOOST_TEST(!first.ec);
  BOOST_TEST(first.n == 3u);
}

// A zero-byte operation takes no direction, whether or not one is in flight: an SSL
// stream issues one (an empty write) and then its real read. Before, the zero-byte read
// went to the next layer as the direction's operation, and the read after it failed
// with already_started.
BOOST_AUTO_TEST_CASE(a_zero_byte_operation_leaves_its_direction_free) {
  fixture f;
  f.s.expires_after(1s);
  outcome empty_read, empty_write, real;
  f.s.async_read_some(asio::mutable_buffer(), empty_read.handler());
  f.s.async_write_some(asio::const_buffer(), empty_write.handler());
  f.read(real);
  BOOST_TEST(empty_read.calls == 0); // never inside the initiating function
  f.settle();
  BOOST_TEST(empty_read.calls == 1);
  BOOST_TEST(!empty_read.ec);
  BOOST_TEST(empty_write.calls == 1);
  BOOST_TEST(!empty_write.ec);
  BOOST_TEST(real.calls == 0);
  asio::write(f.peer, asio::buffer("abc", 3));
  f.settle();
  BOOST_TEST(real.calls == 1);
  BOOST_TEST(!real.ec);
  BOOST_TEST(real.n == 3u);
  // Once the stream has timed out, a zero-byte operation reports it as any other does.
  outcome late_real, late_empty;
  f.read(late_real);
  f.advance(1s);
  f.s.async_read_some(asio::mutable_buffer(), late_empty.handler());
  f.settle();
  BOOST_TEST(late_real.ec == timeout);
  BOOST_TEST(late_empty.calls == 1);
  BOOST_TEST(late_empty.ec == timeout);
}

// ---- races between a completion and the deadline (scripted next layer) ----

// The deadline's wait is handed over to the strand, and the read's completion is queued
// there ahead of it: the read wins, and its handler re-arms and reads again. The wait,
// handed over for the old deadline (reset_at no longer reaches it), must not time out
// the new read.
BOOST_AUTO_TEST_CASE(a_rearm_racing_the_completion_is_not_timed_out_by_the_old_deadline) {
  scripted_fixture f;
  f.s.expires_after(10ms);
  outcome second;
  int first_calls = 0;
  error_code first_ec;
  f.s.async_read_some(asio::buffer(f.buf), [&](error_code ec, std::size_t) {
    ++first_calls;
    first_ec = ec;
    f.s.expires_after(10ms); // from the virtual time now: 20 ms
    f.s.async_read_some(asio::buffer(f.buf), second.handler());
  });
  f.svc.advance(10ms);       // the deadline came: the wheel's step is queued
  f.next().complete_read(3); // the read's completion, queued to the strand
  f.io.restart();
  f.io.poll_one();           // the step: hands the wait to the strand, behind the read
  BOOST_TEST(f.svc.stats().expired == 1u); // handed over: the race is on
  f.settle();
  BOOST_TEST(first_calls == 1);
  BOOST_TEST(!first_ec);
  BOOST_TEST(second.calls == 0);
  BOOST_TEST(f.next().closes == 0);
  BOOST_TEST(f.pending() == 1u); // waiting again, for the second read's deadline
  f.advance(9ms);
  BOOST_TEST(second.calls == 0);
  f.advance(1ms);
  BOOST_TEST(second.calls == 1);
  BOOST_TEST(second.ec == timeout);
  BOOST_TEST(f.next().closes == 1);
}

// Before the wait is handed over, moving the deadline still reaches it: the read's
// completion runs first and re-arms, and no wait completes for the old deadline.
BOOST_AUTO_TEST_CASE(a_rearm_before_the_handover_moves_the_wait_itself) {
  scripted_fixture f;
  f.s.expires_after(10ms);
  outcome second;
  f.s.async_read_some(asio::buffer(f.buf), [&](error_code, std::size_t) {
    f.s.expires_after(10ms);
    f.s.async_read_some(asio::buffer(f.buf), second.handler());
  });
  f.next().complete_read(3); // queued before the wheel's step
  f.svc.advance(10ms);
  f.settle();
  BOOST_TEST(f.svc.stats().expired == 0u);
  BOOST_TEST(f.pending() == 1u);
  f.advance(10ms);
  BOOST_TEST(second.ec == timeout);
}

// The deadline's wait is handed over first; the next layer's completion (with data) is
// queued behind it: the stream times out, and the completion reports the timeout with
// its byte count (Beast's rule).
BOOST_AUTO_TEST_CASE(a_deadline_handed_over_before_the_completion_turns_it_into_timeout) {
  scripted_fixture f;
  f.s.expires_after(10ms);
  outcome o;
  f.s.async_read_some(asio::buffer(f.buf), o.handler());
  f.svc.advance(10ms);
  asio::post(f.s.get_executor(), [] {}); // keeps the strand busy: what comes next queues
  f.io.restart();
  f.io.poll_one();           // the step: the wait goes to the strand
  BOOST_TEST(f.svc.stats().expired == 1u);
  f.next().complete_read(5); // behind the wait
  f.settle();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(o.ec == timeout);
  BOOST_TEST(o.n == 5u);
  BOOST_TEST(f.next().closes == 1);
}

// The wait for the read's deadline is handed over after the read completed and the
// write, with a later deadline, is the only operation in flight: the handler finds
// nothing due and waits again.
BOOST_AUTO_TEST_CASE(a_wait_handed_over_for_a_deadline_nobody_has_any_more_waits_again) {
  scripted_fixture f;
  f.s.expires_after(10ms);
  outcome r, w;
  f.s.async_read_some(asio::buffer(f.buf), r.handler());
  f.s.expires_after(30ms);
  f.s.async_write_some(asio::buffer(f.buf), w.handler());
  f.svc.advance(10ms);
  f.next().complete_read(1); // to the strand, ahead of the wait
  f.io.restart();
  f.io.poll_one();
  BOOST_TEST(f.svc.stats().expired == 1u);
  f.settle();
  BOOST_TEST(!r.ec);
  BOOST_TEST(w.calls == 0);
  BOOST_TEST(f.next().closes == 0);
  BOOST_TEST(f.pending() == 1u);
  f.advance(19ms);
  BOOST_TEST(w.calls == 0);
  f.advance(1ms);
  BOOST_TEST(w.ec == timeout);
}

// Operations chained from their completion handlers (as a composed read does) keep the
// one wait: no wait is cancelled or started in between; it is released at the end.
BOOST_AUTO_TEST_CASE(operations_chained_from_handlers_share_one_wait) {
  scripted_fixture f;
  int remaining = 100;
  int completions = 0;
  std::function<void(error_code, std::size_t)> step = [&](error_code ec, std::size_t) {
    BOOST_TEST(!ec);
    ++completions;
    if (--remaining == 0) return;
    f.s.expires_after(1s);
    if (remaining % 2) {
      f.s.async_read_some(asio::buffer(f.buf), step);
    } else {
      f.s.async_write_some(asio::buffer(f.buf), step);
    }
  };
  f.s.expires_after(1s);
  f.s.async_read_some(asio::buffer(f.buf), step);
  const auto before = f.svc.stats();
  while (completions < 100) {
    BOOST_TEST(f.pending() == 1u);
    if (f.next().read) {
      f.next().complete_read(1);
    } else {
      f.next().complete_write(1);
    }
    f.advance(1ms); // virtual time moves on, so each step really moves the deadline
  }
  const auto after = f.svc.stats();
  BOOST_TEST(f.pending() == 0u);
  BOOST_TEST(after.cancelled - before.cancelled == 1u); // released once, at the end
  BOOST_TEST(after.expired == before.expired);
  BOOST_TEST(f.next().reads_started + f.next().writes_started == 100);
}

// ---- composed operations ----

BOOST_AUTO_TEST_CASE(works_with_net_async_read_and_async_write) {
  fixture f;
  f.s.expires_after(1s);
  std::array<char, 100> all{};
  outcome o;
  asio::async_read(f.s, asio::buffer(all), o.handler());
  asio::write(f.peer, asio::buffer(std::string(40, 'a')));
  f.settle();
  BOOST_TEST(o.calls == 0);
  asio::write(f.peer, asio::buffer(std::string(60, 'b')));
  f.settle();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(!o.ec);
  BOOST_TEST(o.n == 100u);

  // A reading peer drains a large write.
  std::vector<char> big(1 << 20, 'z');
  outcome w;
  asio::async_write(f.s, asio::buffer(big), w.handler());
  std::vector<char> sink(big.size());
  f.peer.non_blocking(true);
  while (w.calls == 0) {
    f.settle();
    error_code ec;
    f.peer.read_some(asio::buffer(sink), ec); // would_block when drained for now
  }
  BOOST_TEST(!w.ec);
  BOOST_TEST(w.n == big.size());
}

BOOST_AUTO_TEST_CASE(async_read_times_out_with_the_bytes_it_had) {
  fixture f;
  f.s.expires_after(100ms);
  std::array<char, 100> all{};
  outcome o;
  asio::async_read(f.s, asio::buffer(all), o.handler());
  asio::write(f.peer, asio::buffer(std::string(40, 'a')));
  f.settle();
  f.advance(100ms);
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(o.ec == timeout);
  BOOST_TEST(o.n == 40u);
}

// ---- completion tokens and associated characteristics ----

BOOST_AUTO_TEST_CASE(works_with_futures_deferred_as_tuple_and_cancel_after) {
  fixture f;
  asio::write(f.peer, asio::buffer("abcd", 4));
  std::future<std::size_t> fut = f.s.async_read_some(asio::buffer(f.in), asio::use_future);
  f.settle();
  BOOST_TEST(fut.get() == 4u);

  f.s.expires_after(5ms);
  auto deferred_read = f.s.async_read_some(asio::buffer(f.in), asio::deferred);
  outcome d;
  std::move(deferred_read)(d.handler()); // launched now, with the expiry in force now
  f.advance(5ms);
  BOOST_TEST(d.ec == timeout);

  fixture g;
  std::tuple<error_code, std::size_t> t;
  bool done = false;
  g.s.async_read_some(asio::buffer(g.in), asio::as_tuple([&](std::tuple<error_code, std::size_t> r) {
                        t = r;
                        done = true;
                      }));
  g.s.cancel();
  g.settle();
  BOOST_TEST(done);
  BOOST_TEST(std::get<0>(t) == aborted);

  // The initiation names the stream's executor, so cancel_after finds the wheel.
  fixture h;
  outcome c;
  h.s.async_read_some(asio::buffer(h.in), asio_wheel::cancel_after(7ms, c.handler()));
  h.advance(7ms);
  BOOST_TEST(c.ec == aborted);
  BOOST_TEST(h.s.socket().is_open()); // per-operation cancellation, not a timeout
}

#if ASIO_WHEEL_TEST_COROUTINES
BOOST_AUTO_TEST_CASE(works_in_coroutines) {
  fixture f;
  int step = 0;
  asio::co_spawn(
      f.io,
      [&]() -> asio::awaitable<void> {
        f.s.expires_after(10ms);
        std::size_t n = co_await f.s.async_read_some(asio::buffer(f.in), asio::use_awaitable);
        step = n == 2 ? 1 : -1;
        auto [ec, m] = co_await f.s.async_read_some(asio::buffer(f.in),
                                                    asio::as_tuple(asio::use_awaitable));
        step = ec == asio_wheel::error::timeout && m == 0 ? 2 : -2;
      },
      asio::detached);
  f.settle();
  asio::write(f.peer, asio::buffer("xy", 2));
  f.settle();
  BOOST_TEST(step == 1);
  f.advance(10ms);
  BOOST_TEST(step == 2);
}
#endif

using asio_wheel_test::counting_allocator;

BOOST_AUTO_TEST_CASE(handlers_keep_their_executor_and_allocator) {
  fixture f;
  auto strand = asio::make_strand(f.io);
  bool in_strand = false;
  f.s.expires_after(10ms);
  f.s.async_read_some(asio::buffer(f.in), asio::bind_executor(strand, [&](error_code, std::size_t) {
                        in_strand = strand.running_in_this_thread();
                      }));
  f.advance(10ms);
  BOOST_TEST(in_strand);

  // An immediate completion (after the timeout) too.
  bool late_in_strand = false;
  f.s.async_read_some(asio::buffer(f.in), asio::bind_executor(strand, [&](error_code, std::size_t) {
                        late_in_strand = strand.running_in_this_thread();
                      }));
  f.settle();
  BOOST_TEST(late_in_strand);

  // The next layer's operation is allocated from the handler's allocator.
  fixture g;
  int live = 0; // blocks the allocator has out
  outcome o;
  g.s.async_read_some(asio::buffer(g.in),
                      asio::bind_allocator(counting_allocator<int>(&live), o.handler()));
  BOOST_TEST(live > 0);
  asio::write(g.peer, asio::buffer("x", 1));
  g.settle();
  BOOST_TEST(o.calls == 1);
}

BOOST_AUTO_TEST_CASE(a_stream_on_a_strand_completes_everything_on_it) {
  fixture f;
  auto strand = asio::make_strand(f.io);
  local_stream s(strand);
  socket_type peer(f.io);
  asio::local::connect_pair(s.socket(), peer);
  bool read_in_strand = false, late_in_strand = false;
  s.expires_after(10ms);
  s.async_read_some(asio::buffer(f.in), [&](error_code ec, std::size_t) {
    read_in_strand = strand.running_in_this_thread() && ec == asio_wheel::error::timeout;
  });
  f.advance(10ms);
  BOOST_TEST(read_in_strand);
  s.async_read_some(asio::buffer(f.in), [&](error_code, std::size_t) {
    late_in_strand = strand.running_in_this_thread();
  });
  f.settle();
  BOOST_TEST(late_in_strand);
}

// ---- construction, moves, lifetimes ----

BOOST_AUTO_TEST_CASE(constructs_from_executor_context_or_a_socket_and_moves) {
  fixture f;
  static_assert(std::is_same_v<asio_wheel::timed_stream::next_layer_type, asio::ip::tcp::socket>);
  static_assert(std::is_same_v<asio_wheel::timed_stream::executor_type, asio::any_io_executor>);
  asio_wheel::timed_stream t1(f.io);
  asio_wheel::timed_stream t2(f.io.get_executor());
  asio_wheel::timed_stream t3(asio::ip::tcp::socket(f.io));
  BOOST_TEST(!t1.socket().is_open());
  BOOST_TEST((t2.get_executor() == asio::any_io_executor(f.io.get_executor())));
  BOOST_TEST(&t3.socket() == &t3.next_layer());
  BOOST_TEST(&t3.lowest_layer() == &t3.next_layer());

  // A move takes the next layer and the expiry; the moved-from stream is closed, has no
  // expiry and still works as an object.
  f.s.expires_after(10ms);
  local_stream moved(std::move(f.s));
  BOOST_TEST(moved.socket().is_open());
  BOOST_TEST(!f.s.socket().is_open());
  BOOST_TEST((f.s.expiry() == std::chrono::steady_clock::time_point::max()));
  outcome o;
  moved.async_read_some(asio::buffer(f.in), o.handler());
  asio::write(f.peer, asio::buffer("ok", 2));
  f.settle();
  BOOST_TEST(!o.ec);
  BOOST_TEST(o.n == 2u);
  outcome late;
  moved.async_read_some(asio::buffer(f.in), late.handler());
  f.advance(10ms);
  BOOST_TEST(late.ec == timeout);
}

// An operation in flight when its stream is moved goes on with the next layer, without
// a deadline: the moved-from stream's deadline would close only what is left in it.
// Before, that deadline still passed for the read, closed nothing, and the read, which
// then got its data, reported timeout.
BOOST_AUTO_TEST_CASE(an_operation_in_flight_across_a_move_loses_its_deadline_not_its_data) {
  fixture f;
  f.s.expires_after(10ms);
  outcome o;
  f.read(o);
  local_stream moved(std::move(f.s));
  f.advance(20ms);
  BOOST_TEST(o.calls == 0);
  BOOST_TEST(moved.socket().is_open());
  BOOST_TEST(f.pending() == 0u); // the moved-from stream's wait is gone
  asio::write(f.peer, asio::buffer("hi", 2));
  f.settle();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(!o.ec);
  BOOST_TEST(o.n == 2u);
  // The expiry moved over: the next read on the new stream times out at once.
  outcome next;
  moved.async_read_some(asio::buffer(f.in), next.handler());
  f.settle();
  BOOST_TEST(next.ec == timeout);
}

// rebind_executor and the converting move: what as_default_on needs (it did not compile).
BOOST_AUTO_TEST_CASE(rebind_executor_and_as_default_on) {
  fixture f;
  using strand_executor = asio::strand<asio::any_io_executor>;
  using strand_stream = local_stream::rebind_executor<strand_executor>::other;
  static_assert(std::is_same_v<strand_stream, asio_wheel::basic_timed_stream<socket_type, strand_executor>>);
  using deferred_stream = asio::deferred_t::as_default_on_t<local_stream>;

  f.s.expires_after(10ms);
  deferred_stream d(std::move(f.s));
  BOOST_TEST(d.socket().is_open());
  BOOST_TEST(!f.s.socket().is_open());
  BOOST_TEST((d.expiry() == f.svc.now() + 10ms));
  auto op = d.async_read_some(asio::buffer(f.in)); // the default token: deferred
  BOOST_TEST(f.pending() == 0u);                   // nothing started yet
  outcome o;
  std::move(op)(o.handler());
  asio::write(f.peer, asio::buffer("ok", 2));
  f.settle();
  BOOST_TEST(o.n == 2u);

  strand_stream s(std::move(d)); // and back from the rebound one, onto a strand
  BOOST_TEST(!d.socket().is_open());
  bool in_strand = false;
  outcome late;
  s.async_read_some(asio::buffer(f.in), [&](error_code ec, std::size_t n) {
    in_strand = s.get_executor().running_in_this_thread();
    late.handler()(ec, n);
  });
  f.advance(10ms); // the expiry came along both moves
  BOOST_TEST(late.ec == timeout);
  BOOST_TEST(in_strand);
}

// A move keeps the stream's executor. It made a new one from the socket's: a stream on a
// strand came out on a new strand, so its timeouts ran beside the handlers still bound
// to the first one (TSan: a race on the stream's state), unlike Asio's and Beast's
// moves, which keep theirs.
BOOST_AUTO_TEST_CASE(a_move_keeps_the_streams_strand) {
  fixture f;
  using strand_stream =
      local_stream::rebind_executor<asio::strand<asio::any_io_executor>>::other;
  strand_stream first(std::move(f.s));
  const auto strand = first.get_executor();
  strand_stream moved(std::move(first));
  BOOST_TEST((moved.get_executor() == strand));
  // Converted to the default executor type, it wraps that same strand.
  local_stream plain(std::move(moved));
  BOOST_REQUIRE((plain.get_executor().target<asio::strand<asio::any_io_executor>>() != nullptr));
  BOOST_TEST((*plain.get_executor().target<asio::strand<asio::any_io_executor>>() == strand));
}

// A timed-out stream fails its operations with timeout until a new expiry is set; a
// move is no new expiry. It cleared the timeout, so the next operation reached the
// closed socket (bad_descriptor) whenever the expiry was still ahead, as it is when it
// was set again while the operation that timed out was in flight.
BOOST_AUTO_TEST_CASE(a_move_keeps_a_timeout) {
  fixture f;
  f.s.expires_after(10ms);
  outcome first;
  f.s.async_read_some(asio::buffer(f.in), first.handler());
  f.advance(5ms);
  f.s.expires_after(100ms); // for the next operations: the read in flight keeps 10 ms
  f.advance(5ms);
  BOOST_TEST(first.ec == timeout);
  local_stream moved(std::move(f.s));
  outcome next;
  moved.async_read_some(asio::buffer(f.in), next.handler());
  f.settle();
  BOOST_TEST(next.ec == timeout);
  // A new expiry clears it, as before the move.
  moved.expires_after(10ms);
  BOOST_TEST((moved.expiry() == f.svc.now() + 10ms));
}

BOOST_AUTO_TEST_CASE(over_tcp_on_loopback) {
  asio_wheel_test::manual_context f;
  asio::ip::tcp::acceptor acceptor(f.io, {asio::ip::address_v4::loopback(), 0});
  asio_wheel::timed_stream server(f.io);
  asio::ip::tcp::socket client(f.io);
  client.connect(acceptor.local_endpoint());
  acceptor.accept(server.socket());
  server.expires_after(30s);
  std::array<char, 16> in{};
  outcome r, late;
  server.async_read_some(asio::buffer(in), r.handler());
  asio::write(client, asio::buffer("GET", 3));
  f.settle();
  BOOST_TEST(!r.ec);
  BOOST_TEST(r.n == 3u);
  server.async_read_some(asio::buffer(in), late.handler()); // deadline: 30 s from the start
  f.advance(30s);
  BOOST_TEST(late.ec == timeout);
  std::array<char, 1> c{};
  error_code ec;
  client.read_some(asio::buffer(c), ec); // the server closed: the client sees EOF
  BOOST_TEST(ec == asio::error::eof);
}

BOOST_AUTO_TEST_CASE(a_stream_destroyed_with_operations_in_flight_aborts_them) {
  asio_wheel_test::manual_context f;
  socket_type peer(f.io);
  outcome o;
  std::array<char, 1> in{};
  {
    local_stream s(f.io);
    asio::local::connect_pair(s.socket(), peer);
    s.expires_after(1s);
    s.async_read_some(asio::buffer(in), o.handler());
    BOOST_TEST(f.svc.stats().pending == 1u);
  }
  f.settle();
  BOOST_TEST(o.calls == 1);
  BOOST_TEST(o.ec == aborted);
  BOOST_TEST(f.svc.stats().pending == 0u);
  f.advance(1s);
  BOOST_TEST(o.calls == 1);
}

namespace {
// A server-style session, owned only by its pending handlers.
struct session : std::enable_shared_from_this<session> {
  local_stream s;
  std::array<char, 16> in{};
  int* destroyed;
  session(asio::io_context& io, int* d) : s(io), destroyed(d) {}
  ~session() { ++*destroyed; }
  void read() {
    s.expires_after(1h);
    s.async_read_some(asio::buffer(in), [self = shared_from_this()](error_code ec, std::size_t) {
      if (!ec) self->read();
    });
  }
};
} // namespace

BOOST_AUTO_TEST_CASE(context_destroyed_with_sessions_in_flight_frees_everything) {
  int destroyed = 0;
  {
    asio::io_context io;
    asio_wheel::install(io, asio_wheel_test::manual_options());
    socket_type peer1(io), peer2(io);
    for (socket_type* peer : {&peer1, &peer2}) {
      auto s = std::make_shared<session>(io, &destroyed);
      asio::local::connect_pair(s->s.socket(), *peer);
      s->read();
    }
    io.poll();
    BOOST_TEST(destroyed == 0);
  }
  BOOST_TEST(destroyed == 2); // and nothing leaked (LeakSanitizer in scripts/test)
}

// ---- threads ----

// Streams on strands, two threads running the context, the clock advanced from a third:
// each operation completes exactly once and as predicted (TSan in scripts/test). The
// test waits for completions by counting, never by time.
BOOST_AUTO_TEST_CASE(streams_on_strands_with_two_threads) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  constexpr int streams = 64;
#else
  constexpr int streams = 256;
#endif
  asio::io_context io;
  auto& svc = asio_wheel::install(io, asio_wheel_test::manual_options());
  auto guard = asio::make_work_guard(io);

  struct conn {
    local_stream s;
    socket_type peer;
    std::array<char, 8> in{};
    outcome first, second;
    conn(asio::io_context& io) : s(asio::make_strand(io)), peer(io) {}
  };
  std::vector<std::unique_ptr<conn>> conns;
  for (int i = 0; i < streams; ++i) {
    conns.push_back(std::make_unique<conn>(io));
    asio::local::connect_pair(conns.back()->s.socket(), conns.back()->peer);
  }

  std::mutex m;
  std::condition_variable cv;
  int started = 0, firsts = 0, seconds = 0;
  auto bump = [&](int& counter) {
    std::lock_guard<std::mutex> lock(m);
    ++counter;
    cv.notify_all();
  };
  auto wait_for = [&](int& counter, int target) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return counter >= target; });
  };

  std::vector<std::thread> runners;
  for (int t = 0; t < 2; ++t) runners.emplace_back([&] { io.run(); });

  // Every stream starts a read with a 100 ms deadline, on its strand. At 50 ms the even
  // ones get data, re-arm and read again (that read times out at 150 ms); the odd ones
  // get no data and time out at 100 ms.
  for (int i = 0; i < streams; ++i) {
    conn& c = *conns[i];
    asio::post(c.s.get_executor(), [&, i] {
      c.s.expires_after(100ms);
      c.s.async_read_some(asio::buffer(c.in), [&, i](error_code ec, std::size_t n) {
        c.first.ec = ec;
        c.first.n = n;
        ++c.first.calls;
        if (i % 2 == 0 && !ec) {
          c.s.expires_after(100ms);
          c.s.async_read_some(asio::buffer(c.in), [&](error_code ec2, std::size_t) {
            c.second.ec = ec2;
            ++c.second.calls;
            bump(seconds);
          });
        }
        bump(firsts);
      });
      bump(started);
    });
  }
  wait_for(started, streams);
  svc.advance(50ms);
  for (int i = 0; i < streams; i += 2) asio::write(conns[i]->peer, asio::buffer("d", 1));
  wait_for(firsts, streams / 2);
  svc.advance(50ms);
  wait_for(firsts, streams);
  {
    std::lock_guard<std::mutex> lock(m);
    BOOST_TEST(seconds == 0);
  }
  svc.advance(50ms);
  wait_for(seconds, streams / 2);

  guard.reset();
  for (auto& t : runners) t.join();
  for (int i = 0; i < streams; ++i) {
    conn& c = *conns[i];
    BOOST_TEST(c.first.calls == 1);
    if (i % 2 == 0) {
      BOOST_TEST(!c.first.ec);
      BOOST_TEST(c.second.calls == 1);
      BOOST_TEST(c.second.ec == timeout);
    } else {
      BOOST_TEST(c.first.ec == timeout);
      BOOST_TEST(c.second.calls == 0);
    }
  }
  BOOST_TEST(svc.stats().pending == 0u);
}
