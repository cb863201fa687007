// An operation whose handler takes values after the error_code: the generalisation of
// wait_handler.hpp for signatures void(error_code, Values...).
//
// `Base` says what the operation carries. It derives from wait_op, is constructible
// from a wait_op::func_type, and has `take_values()` returning a std::tuple of the
// values to pass after the error_code (the periodic timer's missed count, a delay
// queue's element). The owner fills them in under the service lock before handing the
// operation over; take_values() is called once, on completion, outside the lock.
//
// Everything else follows wait_handler.hpp: memory from the handler's associated
// allocator (recycling by default), freed before the upcall; inline upcall when the
// handler's executor is the wheel context's plain executor, else dispatch to it with
// outstanding work tracked until then; per-operation cancellation through the owning
// wait_entry.
#ifndef ASIO_WHEEL_DETAIL_HANDLER_OP_HPP
#define ASIO_WHEEL_DETAIL_HANDLER_OP_HPP

#include <asio_wheel/detail/wait_handler.hpp>
#include <asio_wheel/detail/wait_op.hpp>
#include <asio_wheel/wheel_service.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/prefer.hpp>

#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace asio_wheel::detail {

template <class Base, class Handler, class WorkExecutor>
class handler_op final : public Base {
public:
  using slot_type = boost::asio::associated_cancellation_slot_t<Handler>;

  // Allocates through the handler's allocator; connects the cancellation slot to `e`.
  template <class H, class... Work>
  static Base* create(H&& h, wheel_service& svc, wait_entry& e, Work&&... work) {
    auto alloc = rebind_alloc(op_allocator(h));
    handler_op* p = std::allocator_traits<decltype(alloc)>::allocate(alloc, 1);
    try {
      ::new (static_cast<void*>(p)) handler_op(std::forward<H>(h), svc, std::forward<Work>(work)...);
    } catch (...) {
      std::allocator_traits<decltype(alloc)>::deallocate(alloc, p, 1);
      throw;
    }
    p->connect(e);
    return p;
  }

private:
  struct no_work {};
  using work_type = std::conditional_t<std::is_void_v<WorkExecutor>, no_work, WorkExecutor>;
  using action = wait_op::action;

  template <class H, class... Work>
  handler_op(H&& h, wheel_service& svc, Work&&... work)
      : Base(&handler_op::do_func),
        handler_(std::forward<H>(h)),
        service_(&svc),
        work_(std::forward<Work>(work)...) {}

  template <class Alloc>
  static auto rebind_alloc(const Alloc& a) {
    return typename std::allocator_traits<Alloc>::template rebind_alloc<handler_op>(a);
  }

  void connect(wait_entry& e) {
    slot_type slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected())
      slot.template emplace<op_cancellation>(op_cancellation{service_, &e, this});
  }

  static void do_func(wait_op* base, action a, void* arg) {
    auto* self = static_cast<handler_op*>(base);
    if (a == action::rebind) {
      self->connect(*static_cast<wait_entry*>(arg));
      return;
    }
    // Move what the upcall needs out of the op and free its memory first.
    Handler handler(std::move(self->handler_));
    work_type work(std::move(self->work_));
    const boost::system::error_code ec = to_error_code(self->result());
    auto alloc = rebind_alloc(op_allocator(handler));
    if (a != action::complete) {
      self->~handler_op();
      std::allocator_traits<decltype(alloc)>::deallocate(alloc, self, 1);
      return;
    }
    auto values = self->take_values();
    self->~handler_op();
    std::allocator_traits<decltype(alloc)>::deallocate(alloc, self, 1);
    std::apply(
        [&](auto&&... v) {
          if constexpr (std::is_void_v<WorkExecutor>) {
            std::move(handler)(ec, std::move(v)...);
          } else {
            boost::asio::dispatch(std::move(work),
                                  boost::asio::append(std::move(handler), ec, std::move(v)...));
          }
        },
        std::move(values));
  }

  Handler handler_;
  wheel_service* service_;
  [[no_unique_address]] work_type work_;
};

// Creates the operation for `handler` owned by `e`, choosing inline delivery or
// dispatch by the handler's associated executor (defaulting to `io_ex`).
template <class Base, class Handler, class IoExecutor>
Base* make_handler_op(Handler&& handler, wheel_service& svc, wait_entry& e,
                      const IoExecutor& io_ex) {
  using handler_t = std::decay_t<Handler>;
  auto ex = boost::asio::get_associated_executor(handler, io_ex);
  if (runs_inline(ex, svc))
    return handler_op<Base, handler_t, void>::create(std::forward<Handler>(handler), svc, e);
  auto work = boost::asio::prefer(ex, boost::asio::execution::outstanding_work.tracked);
  return handler_op<Base, handler_t, decltype(work)>::create(std::forward<Handler>(handler), svc,
                                                             e, std::move(work));
}

} // namespace asio_wheel::detail

#endif
