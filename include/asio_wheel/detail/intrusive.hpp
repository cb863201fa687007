// The two intrusive containers the library is built on: the wheel's slot lists and
// the FIFO of operations. Nodes embed their links, so linking allocates nothing and a
// node can leave its list in O(1) knowing only itself.
//
// They are our own, not Boost.Intrusive's, because standalone mode must need no Boost
// header; each does only what the library asks of it.
#ifndef ASIO_WHEEL_DETAIL_INTRUSIVE_HPP
#define ASIO_WHEEL_DETAIL_INTRUSIVE_HPP

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <iterator>

namespace asio_wheel::detail {

// A forward iterator over the nodes T of a list or queue, linked by Hook::next(). A
// list ends at its sentinel; a queue, a ring, ends after `last` (its tail), where the
// iterator becomes null.
template <class T, class Hook>
class node_iterator {
public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  using pointer = T*;
  using reference = T&;

  node_iterator() noexcept : at_(nullptr), last_(nullptr) {}
  explicit node_iterator(Hook* at, const Hook* last = nullptr) noexcept
      : at_(at), last_(last) {}
  T& operator*() const noexcept { return static_cast<T&>(*at_); }
  T* operator->() const noexcept { return &**this; }
  node_iterator& operator++() noexcept {
    at_ = at_ == last_ ? nullptr : at_->next();
    return *this;
  }
  node_iterator operator++(int) noexcept {
    node_iterator before = *this;
    ++*this;
    return before;
  }
  friend bool operator==(node_iterator a, node_iterator b) noexcept { return a.at_ == b.at_; }
  friend bool operator!=(node_iterator a, node_iterator b) noexcept { return a.at_ != b.at_; }

private:
  Hook* at_;
  const Hook* last_;
};

// ---- list: circular, doubly linked, with a sentinel ----

// The links of a list node. They mean something only while the node is in a list, and
// its owner keeps track of whether it is (the wheel: wheel_entry::where): a node that
// leaves a list keeps its old links. Clearing them was a fourth store in a cancel of a
// cold entry, and a cancel's stores wait in the core's store buffer, in order, until
// their lines arrive (the entry's and its two neighbours'): a store fewer leaves room
// for more cancels in flight (see wheel::remove). The same in every build, so that a
// debug program's inline code and a release library agree on what a node holds.
//
// So no node unlinks itself when destroyed: its owner takes it out of its list first
// (the wheel asserts so), and a list's sentinel goes with its list.
class list_hook {
public:
  list_hook() noexcept = default;
  list_hook(const list_hook&) = delete;
  list_hook& operator=(const list_hook&) = delete;

  // Whether this linked node is the only one in its list (both links are the sentinel).
  bool alone() const noexcept { return prev_ == next_; }
  list_hook* next() const noexcept { return next_; }

  // Takes this linked node out of its list. O(1): two stores, both to its neighbours.
  void unlink() noexcept {
    prev_->next_ = next_;
    next_->prev_ = prev_;
  }

  // This node leaves a chain that intrusive_list::take_all took out of its list, and
  // returns the node after it (null after `last`, the chain's last node). The chain is
  // walked this way from its first node, and nothing else touches it meanwhile. Nothing
  // is written: the neighbours leave the chain themselves.
  list_hook* leave_chain(const list_hook* last) noexcept {
    return this == last ? nullptr : next_;
  }

  // `to` (unlinked) takes this node's place in its list; this node leaves it.
  void replace_with(list_hook& to) noexcept {
    to.prev_ = prev_;
    to.next_ = next_;
    prev_->next_ = &to;
    next_->prev_ = &to;
  }

private:
  template <class>
  friend class intrusive_list;
  template <class, class>
  friend class node_iterator;

  // Links this (unlinked) node in before `pos`.
  void link_before(list_hook& pos) noexcept {
    prev_ = pos.prev_;
    next_ = &pos;
    pos.prev_->next_ = this;
    pos.prev_ = this;
  }

  list_hook* prev_ = nullptr;
  list_hook* next_ = nullptr;
};

// A list of T, where T derives from list_hook. Not copyable or movable: nodes point at
// its sentinel.
template <class T>
class intrusive_list {
public:
  using iterator = node_iterator<T, list_hook>;

  intrusive_list() noexcept { head_.prev_ = head_.next_ = &head_; }
  intrusive_list(const intrusive_list&) = delete;
  intrusive_list& operator=(const intrusive_list&) = delete;
  ~intrusive_list() { clear(); }

  bool empty() const noexcept { return head_.next_ == &head_; }
  iterator begin() noexcept { return iterator(head_.next_); }
  iterator end() noexcept { return iterator(&head_); }
  T& front() noexcept {
    assert(!empty());
    return static_cast<T&>(*head_.next_);
  }

  void push_back(T& node) noexcept { static_cast<list_hook&>(node).link_before(head_); }
  // The node that push_back writes besides the new one (the last, or the sentinel): to
  // prefetch it before a link.
  const void* back_hook() const noexcept { return head_.prev_; }

  // Empties the list without writing to its nodes: returns its first node (null if it
  // was empty) and its last in `last`. The nodes form a chain that each leaves by
  // list_hook::leave_chain, from the first on; what is left is given back by put_back.
  list_hook* take_all(list_hook*& last) noexcept {
    if (empty()) {
      last = nullptr;
      return nullptr;
    }
    list_hook* first = head_.next_;
    last = head_.prev_;
    head_.prev_ = head_.next_ = &head_;
    return first;
  }
  // Makes the rest of a chain that take_all took, first .. last, the whole (empty) list.
  void put_back(list_hook& first, list_hook& last) noexcept {
    assert(empty());
    head_.next_ = &first;
    first.prev_ = &head_;
    last.next_ = &head_;
    head_.prev_ = &last;
  }
  void pop_front() noexcept { head_.next_->unlink(); }

  // Unlinks every node, then calls f(T*) on it.
  template <class F>
  void clear_and_dispose(F f) {
    while (!empty()) {
      T& node = front();
      pop_front();
      f(&node);
    }
  }

  void clear() noexcept {
    clear_and_dispose([](T*) {});
  }

private:
  list_hook head_; // the sentinel: never a T
};

// ---- queue: circular, singly linked, held by its tail ----

// The link of a queue node; its owner keeps track of which queue holds it.
//
// The link is a pointer with three low bits of the node's own beside it (nodes are
// 8-aligned, so a pointer to one has them clear): the owner's tag, which the queue
// carries along and never reads. An operation keeps its result and where it lives
// there, and is 16 bytes instead of 24.
class queue_hook {
public:
  static constexpr std::uintptr_t tag_mask = 7;

  queue_hook() noexcept = default;
  queue_hook(const queue_hook&) = delete;
  queue_hook& operator=(const queue_hook&) = delete;

  queue_hook* next() const noexcept { return reinterpret_cast<queue_hook*>(link_ & ~tag_mask); }
  unsigned tag() const noexcept { return static_cast<unsigned>(link_ & tag_mask); }
  void set_tag(unsigned t) noexcept {
    assert(t <= tag_mask);
    link_ = (link_ & ~tag_mask) | t;
  }

private:
  template <class>
  friend class intrusive_queue;

  void set_next(queue_hook* n) noexcept {
    assert((reinterpret_cast<std::uintptr_t>(n) & tag_mask) == 0);
    link_ = reinterpret_cast<std::uintptr_t>(n) | (link_ & tag_mask);
  }

  std::uintptr_t link_ = 0; // the next node, | the tag
};

// A FIFO of T, where T derives from queue_hook: O(1) push_back, pop_front and splicing
// a whole queue at either end. Removing a node from the middle walks the queue.
//
// One pointer, the tail, whose next is the head (the queue is a ring): every wait_list
// embeds one, so a pending wait pays 8 bytes for its queue rather than 16.
// Invariant: empty iff tail_ is null; otherwise following next() from tail_ visits every
// node once and comes back to tail_.
template <class T>
class intrusive_queue {
public:
  using iterator = node_iterator<T, queue_hook>;

  intrusive_queue() noexcept = default;
  intrusive_queue(const intrusive_queue&) = delete;
  intrusive_queue& operator=(const intrusive_queue&) = delete;

  bool empty() const noexcept { return tail_ == nullptr; }
  // Whether it holds exactly one node.
  bool single() const noexcept { return tail_ != nullptr && tail_->next() == tail_; }
  iterator begin() noexcept { return iterator(tail_ ? tail_->next() : nullptr, tail_); }
  iterator end() noexcept { return iterator(nullptr, tail_); }
  T& front() noexcept {
    assert(!empty());
    return static_cast<T&>(*tail_->next());
  }

  void push_back(T& node) noexcept {
    queue_hook& n = node;
    if (tail_) {
      n.set_next(tail_->next());
      tail_->set_next(&n);
    } else {
      n.set_next(&n);
    }
    tail_ = &n;
  }

  void pop_front() noexcept {
    assert(!empty());
    queue_hook* head = tail_->next();
    if (head == tail_)
      tail_ = nullptr;
    else
      tail_->set_next(head->next());
  }

  // Moves every node of `other` to the end of this queue, in order.
  void append(intrusive_queue& other) noexcept {
    if (other.empty()) return;
    if (tail_) {
      queue_hook* head = tail_->next();
      tail_->set_next(other.tail_->next());
      other.tail_->set_next(head);
    }
    tail_ = other.tail_;
    other.tail_ = nullptr;
  }

  // Moves every node of `other` to the front of this queue, in order.
  void prepend(intrusive_queue& other) noexcept {
    other.append(*this);
    swap(other);
  }

  // Removes `node`, which this queue holds. O(position).
  void remove(T& node) noexcept {
    queue_hook* target = &node;
    queue_hook* prev = tail_;
    while (prev->next() != target) {
      prev = prev->next();
      assert(prev != tail_); // came round: `node` is not in this queue
    }
    if (prev == target) { // the only node
      tail_ = nullptr;
      return;
    }
    prev->set_next(target->next());
    if (tail_ == target) tail_ = prev;
  }

  // Forgets every node (they keep stale links, harmless: a node is re-linked before use).
  void clear() noexcept { tail_ = nullptr; }

  void swap(intrusive_queue& other) noexcept {
    queue_hook* t = tail_;
    tail_ = other.tail_;
    other.tail_ = t;
  }

  // How many nodes: O(n), for the rare caller that needs it.
  std::size_t count() const noexcept {
    if (!tail_) return 0;
    std::size_t n = 1;
    for (const queue_hook* at = tail_->next(); at != tail_; at = at->next()) ++n;
    return n;
  }

private:
  queue_hook* tail_ = nullptr;
};

} // namespace asio_wheel::detail

#endif
