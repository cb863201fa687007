// The timing wheel itself: a plain data structure that knows nothing of clocks,
// executors or Asio. Time is a tick count handed in by the caller.
//
// Geometry. `levels` levels of `slots` slots (slots = 2^b). A tick count t is read
// as base-`slots` digits: digit L of t is (t >> L*b) & (slots-1). Level L holds
// entries whose deadline first differs from `now` in digit L, in the slot named by
// that digit, so a level-L slot spans slots^L ticks. With the defaults (1 ms tick,
// 256 slots, 4 levels):
//
//   level   slot width   level span
//     0         1 ms       256 ms
//     1       256 ms        65.5 s
//     2        65.5 s       4.66 h
//     3        4.66 h       49.7 days   (top: rounds beyond this)
//
// When `now` reaches the first tick of an occupied slot, the slot comes due: each
// entry either expires (deadline <= now) or is re-placed relative to the new `now`,
// which always lands it on a lower level (cascading), or for the top level back in
// the same slot when its deadline is a later rotation away. The top level thus keeps
// Netty's rounds (levels == 1 is Netty's hashed wheel), but a top slot does not come
// due every rotation: it comes due at the start of the slot in the rotation of its
// earliest deadline (top_due_, derived from the deadlines, a lower bound that entries
// leaving never raise), and the wheel's next top-level tick is the least of those
// (top_next_). So an entry rotations away costs no visit, and no wake-up, before its
// own rotation: advancing a year with one far entry visits it once, not once a rotation.
//
// Never early: a deadline is a tick count rounded up by the caller, and an entry only
// expires when the wheel has reached its deadline tick.
//
// Lazy reset (tokio's rule, widened): a new deadline only overwrites `deadline` as long
// as the entry's slot comes due no later than it (always so for a later deadline); the
// entry is re-placed when the slot comes up. Only a deadline before the slot's start
// relinks it, and so does never_tick, which moves the entry to the never list: a
// deadline that never comes must cost no wake-up, however it was set.
//
// Finding work: each level keeps an occupancy bitmap, so the next tick at which any
// slot comes due is a few word scans away; empty ticks cost nothing.
//
// Chains. A slot is not one list but `slot_chains` lists (chains), and links go to
// them in turn. A list walk cannot read an entry before the one ahead of it has told it
// where it is, so walking one list of cold entries waits out one cache miss per entry;
// a slot's walk takes an entry from each chain in turn, and the misses of the chains
// overlap. Entries of one slot that come due at one tick leave in no particular order
// among themselves (the due order is by tick; ties have none).
//
// Whose turn. An entry that a walk re-places (a cascade) takes its new slot's own turn
// (slot_turn_), so that a slot filled by cascades, as most level-0 slots are, holds its
// n entries n / slot_chains to a chain, give or take one (removals aside): its walk
// takes as few rounds as it can, and its chains end in its last two rounds, which the
// branch that sees a chain's end predicts far better than ends anywhere. With one turn
// for the whole wheel, a slot's chains were as uneven as chance made them (W11's
// level-0 slots: about 17 entries, some chains empty and some of four or five) and its
// walk as long as its longest chain (W11 expire at 1M: 7-11% slower, taking turns in
// one process). New entries, linked from the staging array, take one turn for the
// whole wheel (new_turn_), whose next chain is known before the entry's slot: the link
// asks for the chain's tail first, and a slot's turn would put a load before that (10
// more instructions an insert, W11 insert 8.3 -> 9.1 ns).
//
// Staging (Netty's wheel queues new timeouts too, for the same reason). An entry bound
// for a slot is not linked at once: it waits, unplaced, in a small array (staged_), and
// the whole array is linked into the slots when it is full, before now() moves
// (advance_to) and by link_staged(). Linking writes the entry's neighbour, another
// entry, a cache miss when the slots hold many; a wait cancelled before then (the
// common case: a timeout reset or cancelled by the request that came in time) leaves
// the array again without touching any other entry, and the ones that stay are linked
// with the lines of their neighbours asked for first, so that those misses overlap.
// A staged entry counts as slotted, and next_slot_tick() sees it.
//
// Warming the next cascade. Most entries come down from level 1: at each rotation of
// level 0 the next level-1 slot is walked, its entries cold, one miss per chain at a
// time. While level 0's slots of the rotation before are walked, one cursor per chain
// of that level-1 slot moves one entry on per walk and asks for the next entry's line,
// so that the cascade finds about half of W11's entries in cache (W11 expire at 1M: 1-6
// ns an entry less, taking turns with the build before in one process). Each step reads
// an entry asked for a walk earlier. A cursor points at an entry of that slot or at its
// chain's end: remove and replace move a cursor off an entry that leaves, and the
// slot's own walk, or clear, drops the cursors.
//
// Why lists, not arrays of entry addresses. An array walk knows each address before it
// reads the entry, so its misses are not limited to one per chain (W11's array_floor
// against walk_floor). But an array grows, so a cascade inside a driver step could fail
// to allocate, and an O(1) remove needs each entry to know its cell, which moves when
// the array is compacted. A prototype with arrays (W11's workload, beside this wheel in
// one process, 2026-11-25) expired in 36 ns against 50 but cancelled in 29 against 18:
// arrays alone do not buy the expire target, and lists link without allocating.
#ifndef ASIO_WHEEL_DETAIL_WHEEL_HPP
#define ASIO_WHEEL_DETAIL_WHEEL_HPP

#include <asio_wheel/detail/intrusive.hpp>
#include <asio_wheel/detail/prefetch.hpp>

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace asio_wheel::detail {

using tick_t = std::uint64_t;

// A deadline that never comes: such entries wait in a list of their own, outside the
// slots, so they cost no wake-up ever.
inline constexpr tick_t never_tick = std::numeric_limits<tick_t>::max();

// A node of the wheel. Owners embed it (the timer object, a delay-queue element...).
struct wheel_entry : list_hook {
  // Where the entry is: a slot index (level * slots + slot, below 2^20), a cell of the
  // staging array (staged_first + cell, see "Staging" in wheel), a cell of the due ring
  // (due_ring_first + cell, see "The due list" in wheel), or one of below. In that
  // order, so that "in a slot or staged" and "due" (ring or list) are one comparison
  // each: a shard asks both on every wait it starts.
  static constexpr std::uint32_t staged_first = 0xFFFF0000u;
  static constexpr std::uint32_t due_ring_first = 0xFFFF0100u; // staging cells below 2^8
  static constexpr std::uint32_t in_due = 0xFFFFFFFDu;         // the due ring's overflow list
  static constexpr std::uint32_t due_ring_end = in_due;
  static constexpr std::uint32_t in_never = 0xFFFFFFFEu;
  static constexpr std::uint32_t unlinked = 0xFFFFFFFFu;

  // The tick at which it expires, written by the owner (through insert, reschedule,
  // raise). An owner may raise it without its shard's lock (wheel::raise), while a step
  // reads it: a later deadline keeps the lazy rule's invariant in any place the entry
  // may be, so the wheel reads it once per decision (deadline_tick) and acts on what it
  // read. Relaxed: it publishes nothing else.
  std::atomic<tick_t> deadline{0};
  std::uint32_t where = unlinked;
  // Free for the owner's use (the wheel never reads it): it sits in what would be the
  // struct's padding, so a flag there costs an owner no bytes. Atomic because an owner
  // may read a flag outside its lock (see timer_state's inline operation).
  std::atomic<std::uint8_t> owner_bits{0};
  // The last padding byte, also the owner's: for what only the owner's own thread (or
  // whatever serializes calls on the owner) reads and writes, never a step. Plain, so
  // that using it costs no atomic instruction.
  std::uint8_t owner_thread_byte = 0;
  // Also the owner's, also in padding: a shard's wait_list keeps the index of its shard
  // here (wheel_shard::at), two bytes where a pointer would cost eight. Atomic because
  // a cancellation handler may read it on any thread (wheel_shard::cancel_op); relaxed
  // loads and stores cost no more than plain ones.
  std::atomic<std::uint16_t> owner_index{0};

  // The owner takes it off the wheel first: a slot's list, the due ring or the never
  // list holds its address, and a list hook does not unlink itself (see list_hook).
  ~wheel_entry() { assert(!linked()); }
  wheel_entry() = default;
  wheel_entry(const wheel_entry&) = delete;
  wheel_entry& operator=(const wheel_entry&) = delete;

  tick_t deadline_tick() const noexcept { return deadline.load(std::memory_order_relaxed); }
  bool linked() const noexcept { return where != unlinked; }
  bool is_due() const noexcept { return where >= due_ring_first && where <= in_due; }
  bool in_due_ring() const noexcept { return where >= due_ring_first && where < due_ring_end; }
  bool in_slot() const noexcept { return where < staged_first; }
  bool is_staged() const noexcept { return where >= staged_first && where < due_ring_first; }
};

// Links (16), deadline (8), where (4), the owner's bytes and index (4): every timer,
// element and deadline embeds one.
static_assert(sizeof(void*) != 8 || sizeof(wheel_entry) == 32,
              "a wheel entry is 32 bytes on 64-bit platforms");

using entry_list = intrusive_list<wheel_entry>;

class wheel {
public:
  // The largest number of slots per level we accept: beyond this the slot arrays stop
  // being a cache-friendly structure and only waste memory.
  static constexpr std::size_t max_slots = std::size_t{1} << 20;

  // Preconditions (checked by the caller, see install()): slots a power of two in
  // [2, max_slots], 1 <= levels, levels * log2(slots) <= 64.
  wheel(std::size_t slots, std::size_t levels);

  wheel(const wheel&) = delete;
  wheel& operator=(const wheel&) = delete;

  // The last tick processed. Every entry with deadline <= now() is in the due list,
  // but while a tick is unfinished (see advance_to), where those due at now() may
  // still be in its slots.
  tick_t now() const noexcept { return now_; }

  // Links an unlinked entry. deadline <= now() goes straight to the due list, and
  // never_tick to the never list.
  void insert(wheel_entry& e, tick_t deadline) {
    e.deadline.store(deadline, std::memory_order_relaxed);
    place(e, deadline);
  }
  // Links an unlinked entry at its own deadline, read once, and returns that deadline:
  // if its owner raises it meanwhile (raise), the entry sits where the earlier one put
  // it, as the lazy rule allows.
  tick_t relink(wheel_entry& e) {
    const tick_t deadline = e.deadline_tick();
    place(e, deadline);
    return deadline;
  }

  // Unlinks a linked entry; no effect on an unlinked one. O(1), but for emptying the
  // top-level slot that comes due first: then a scan of the top level's bitmap and
  // occupied slots finds the next one (entries that far away are rarely cancelled).
  // Inline for the common case, an entry in a slot whose chain keeps other entries and
  // that the warming cursors do not walk: its unlink and `where`, and no other store.
  // A cancel of a cold entry misses on it and on its two neighbours, and its stores
  // wait in the core's store buffer, in order, until those lines arrive: each further
  // store (a count, a call's return address) leaves room for fewer cancels in flight.
  // W11 cancel at 1M on an AMD EPYC VM, six turns each, median of the per-turn minimums:
  // 28.8 ns out of line with a count (six stores), 26.0 inline (five), 21.0 without the
  // count (four); has_slotted() says why no count is needed. The entry's own links are
  // not cleared either (see list_hook): three stores, 21.7 ns against 23.1 for four
  // (five turns each in one session, two hours apart; minimums 20.3-23.5 and 22.8-24.1).
  void remove(wheel_entry& e) noexcept {
    if (e.in_slot() && e.where != warm_index_ && !e.alone()) {
      e.unlink();
      e.where = wheel_entry::unlinked;
      return;
    }
    remove_rest(e);
  }

  // Moves a linked entry to a new deadline, by the lazy rule. The common case is inline:
  // an entry in a slot gets a later, finite deadline. Its slot comes due no later than
  // its current deadline, hence no later than the new one: it stays, one store.
  void reschedule(wheel_entry& e, tick_t deadline) {
    assert(e.linked());
    if (e.where < wheel_entry::due_ring_first && deadline >= e.deadline_tick() &&
        deadline != never_tick) { // in a slot, or staged (placed by its deadline later)
      e.deadline.store(deadline, std::memory_order_relaxed);
      return;
    }
    reschedule_slow(e, deadline);
  }

  // The one change the owner may make without the lock that guards the wheel: a later
  // finite deadline (>= the current one if the entry is linked), wherever the entry is.
  // In a slot the lazy rule keeps it there; in the due list it is taken as due all the
  // same, and its owner, on taking it, sees that it is not and relinks it (relink);
  // unlinked, it is overwritten by the next insert. Owner-only: one thread raises.
  static void raise(wheel_entry& e, tick_t later) noexcept {
    assert(later != never_tick);
    e.deadline.store(later, std::memory_order_relaxed);
  }

  // Moves relinks `to` into the place of `from` (the owner object moved in memory).
  void replace(wheel_entry& from, wheel_entry& to) noexcept;

  // Advances now() to `to`, visiting only ticks at which a slot comes due, and
  // appends every entry that expires to the due list, in deadline order. With a
  // due_limit, it stops early once the due list holds that many, even inside a slot:
  // the caller takes them while the slot walk left them in cache (a storm's entries
  // are then read from memory once, not once to make them due and again, evicted, to
  // take them), and calls again, which first finishes the unfinished tick. Returns
  // whether now() reached `to`.
  bool advance_to(tick_t to, std::size_t due_limit = std::numeric_limits<std::size_t>::max());

  // The first tick after now() at which a slot comes due, or never_tick if the slots
  // are empty. Ignores the due list: see has_due(). A staged entry counts at the start
  // of the slot it will be linked into.
  tick_t next_slot_tick() const noexcept;

  // Links every staged entry into its slot (see "Staging" at the top).
  void link_staged() noexcept;
  // How many entries are staged.
  std::size_t staged() const noexcept { return staged_count_; }

  bool has_due() const noexcept { return due_count_ != 0; }
  // Whether advance_to's due_limit stopped inside the tick now() stands at: entries
  // due at now() may still be in its slots, to come due after what the due list holds.
  bool tick_unfinished() const noexcept { return resume_level_ != no_resume; }
  // How far ahead a pop asks for an entry's line: that of the entry due_ahead pops on.
  static constexpr std::size_t due_ahead = 8;
  static_assert(due_ahead >= 1);
  // After a pop the ring's head is the next pop's cell, so the entry due_ahead pops on
  // is this many cells past it (pop_due and due_ahead_entry).
  static constexpr std::size_t ahead_cells = due_ahead - 1;
  // The oldest due entry, unlinked; nullptr if none.
  // Inline: a shard's step calls it once per expiring entry. From the ring, it asks for
  // the line of due_ahead_entry() (see "The due list" below).
  wheel_entry* pop_due() noexcept {
    while (due_ring_used_ != 0) {
      wheel_entry* const e = due_ring_[due_ring_head_];
      due_ring_head_ = (due_ring_head_ + 1) % due_ring_cells;
      --due_ring_used_;
      if (e == nullptr) continue; // its entry was removed
      // A prefetch does not fault: the cell may hold null (a removed entry).
      if (ahead_cells < due_ring_used_)
        prefetch(due_ring_[(due_ring_head_ + ahead_cells) % due_ring_cells]);
      e->where = wheel_entry::unlinked;
      --due_count_;
      return e;
    }
    if (due_overflow_.empty()) return nullptr;
    wheel_entry& e = due_overflow_.front();
    due_overflow_.pop_front();
    e.where = wheel_entry::unlinked;
    --due_count_;
    return &e;
  }
  // Puts `e`, which the last pop_due returned, back at the front of the due list, for an
  // owner that completed only part of what it owes (wheel_shard::complete_due_locked).
  // Nothing may have been appended or popped since: the ring's cell before its head,
  // the one that pop left (or, if it came from the overflow list, a cell of an empty
  // ring), is free, and the ring's entries come before the overflow list's.
  void unpop_due(wheel_entry& e) noexcept {
    assert(!e.linked() && due_ring_used_ < due_ring_cells);
    due_ring_head_ = (due_ring_head_ + due_ring_cells - 1) % due_ring_cells;
    due_ring_[due_ring_head_] = &e;
    ++due_ring_used_;
    e.where = wheel_entry::due_ring_first + static_cast<std::uint32_t>(due_ring_head_);
    ++due_count_;
  }
  // The entry whose line the last pop_due asked for, the one due_ahead pops after it, or
  // null (not in the ring, or removed). A caller that reads more of a popped entry's
  // owner than the entry's line asks for the rest of it here, as far ahead.
  const wheel_entry* due_ahead_entry() const noexcept {
    return ahead_cells < due_ring_used_ ? due_ring_[(due_ring_head_ + ahead_cells) % due_ring_cells]
                                        : nullptr;
  }

  // Visits every linked entry (slots, due list, never list); `f` must not relink.
  template <class F>
  void for_each(F f) {
    for (std::size_t i = 0; i < slots_ * levels_; ++i)
      for (auto& chain : slots_lists_[i].chains)
        for (auto& e : chain) f(e);
    for (std::size_t i = 0; i < staged_count_; ++i) f(*staged_[i]);
    for_each_in_due_ring(f);
    for (auto& e : due_overflow_) f(e);
    for (auto& e : never_) f(e);
  }

  // Unlinks every entry (at shutdown).
  void clear() noexcept;

  // Whether any entry sits in a slot or is staged (the driver is needed only while one
  // does). Known from the slots' occupancy, not from a count of entries, which every
  // insert and cancel would have to store to (see remove).
  bool has_slotted() const noexcept { return occupied_slots_ != 0 || staged_count_ != 0; }

  std::size_t slots() const noexcept { return slots_; }
  std::size_t levels() const noexcept { return levels_; }

  // The lists per slot (see "Chains" at the top). Eight keep that many misses in
  // flight (measured, W3 at 1M: one list 370 ms, four 210, eight 165); a slot's
  // sentinels fill two cache lines, 128 KiB for the default 256 x 4 slots.
  static constexpr std::size_t slot_chains = 8;
  // A slot's turn (see "Whose turn" at the top): a count taken mod slot_chains. A byte:
  // 2^8 is a multiple of slot_chains, so the count wraps onto the same turns.
  using slot_turn = std::uint8_t;
  static_assert((std::size_t{std::numeric_limits<slot_turn>::max()} + 1) % slot_chains == 0);
  // The memory of one slot, allocated with the wheel: its chains' sentinels and its turn
  // (slot_turn_), 129 bytes on 64-bit platforms.
  static constexpr std::size_t slot_bytes = slot_chains * sizeof(entry_list) + sizeof(slot_turn);
  // The staging array's cells (see "Staging" at the top): enough to link a burst of
  // arrivals with their misses overlapped, few enough that the staged entries are still
  // in cache when they are linked. Below 2^8: a cell is named by where's low byte.
  static constexpr std::size_t stage_capacity = 32;

private:
  void reschedule_slow(wheel_entry& e, tick_t deadline);
  // remove for every case that its inline part leaves: staged, due, never, an entry
  // alone in its chain (its slot may empty), or one of the warmed slot.
  void remove_rest(wheel_entry& e) noexcept;
  // After remove_rest emptied a slot: recomputes top_next_ if that slot made it, and
  // ends an unfinished tick whose slots have all emptied (see the definition).
  void after_slot_emptied(bool made_top_next) noexcept;
  void forget_resume_if_nothing_left() noexcept;
  // Links an unlinked entry for `deadline` (its deadline as read once).
  void place(wheel_entry& e, tick_t deadline) {
    assert(!e.linked());
    if (deadline > now_ && deadline != never_tick)
      stage(e); // the common case, inline: a slot's deadline
    else
      place_unslotted(e, deadline);
  }
  // place for a deadline due at once (the due list) or never_tick (the never list).
  void place_unslotted(wheel_entry& e, tick_t deadline);
  // Puts an unlinked entry bound for a slot into the staging array; takes it out.
  void stage(wheel_entry& e) noexcept {
    if (staged_count_ == stage_capacity) link_staged();
    put_in_cell(e, staged_count_++);
  }
  void unstage(wheel_entry& e) noexcept;
  // The staging cell that a staged entry's `where` names; makes `e` the one in `cell`.
  static std::size_t cell_of(const wheel_entry& e) noexcept {
    return e.where - wheel_entry::staged_first;
  }
  void put_in_cell(wheel_entry& e, std::size_t cell) noexcept {
    staged_[cell] = &e;
    e.where = wheel_entry::staged_first + static_cast<std::uint32_t>(cell);
  }
  // Appends entries, out of their lists, to the due list (see "The due list" below), in
  // the order of the calls. It keeps its counts until commit(), which the owner calls once
  // before the wheel is used otherwise: a slot's walk appends once per expiring entry and
  // links others in between, and the compiler, unable to tell those stores from the
  // wheel's members, would reload the members for every entry.
  class due_appender {
  public:
    explicit due_appender(wheel& w) noexcept
        : w_(w),
          // The ring's free cells take appends while the overflow list is empty: its
          // entries come after the ring's.
          ring_room_(w.due_overflow_.empty() ? due_ring_cells - w.due_ring_used_ : 0),
          ring_end_(w.due_ring_head_ + w.due_ring_used_) {}
    due_appender(const due_appender&) = delete;
    due_appender& operator=(const due_appender&) = delete;
    ~due_appender() { assert(committed_); }

    // How many this appender has appended.
    std::size_t appended() const noexcept { return appended_; }
    void append(wheel_entry& e) noexcept {
      if (appended_ < ring_room_) {
        const std::size_t cell = (ring_end_ + appended_) % due_ring_cells;
        w_.due_ring_[cell] = &e;
        e.where = wheel_entry::due_ring_first + static_cast<std::uint32_t>(cell);
      } else {
        w_.due_overflow_.push_back(e);
        e.where = wheel_entry::in_due;
      }
      ++appended_;
    }
    // Writes the counts back: the due list's, not the slots' (the caller's to adjust).
    void commit() noexcept {
      assert(!committed_);
      w_.due_ring_used_ += appended_ < ring_room_ ? appended_ : ring_room_;
      w_.due_count_ += appended_;
#ifndef NDEBUG
      committed_ = true;
#endif
    }

  private:
    wheel& w_;
    const std::size_t ring_room_; // free ring cells (none while the overflow list is not empty)
    const std::size_t ring_end_;  // the first free cell, mod due_ring_cells
    std::size_t appended_ = 0;
#ifndef NDEBUG
    bool committed_ = false;
#endif
  };
  // Appends one entry, out of its list, to the due list.
  void append_due(wheel_entry& e) noexcept {
    due_appender due(*this);
    due.append(e);
    due.commit();
  }
  // Takes a due entry out of the due list.
  void remove_due(wheel_entry& e) noexcept;
  // Visits the entries in the due ring, oldest first (a removed entry's null cell is none).
  template <class F>
  void for_each_in_due_ring(F& f) const {
    for (std::size_t i = 0; i < due_ring_used_; ++i)
      if (wheel_entry* e = due_ring_[(due_ring_head_ + i) % due_ring_cells]) f(*e);
  }
  // The due ring's cell that an entry in it has.
  static std::size_t due_cell_of(const wheel_entry& e) noexcept {
    return e.where - wheel_entry::due_ring_first;
  }
  // The first tick of the slot that `deadline` goes to (relative to now_).
  tick_t slot_start(tick_t deadline) const noexcept;
  std::size_t level_for(tick_t deadline) const noexcept;
  bool is_top(std::uint32_t index) const noexcept { return index >= top_base_; }
  // The first tick of the top-level slot that holds `deadline`, in its own rotation.
  tick_t top_slot_start(tick_t deadline) const noexcept { return deadline & ~top_low_mask_; }
  // Processes the top-level slot that starts at t if its rotation has come, then
  // recomputes top_next_.
  bool process_top(tick_t t, std::size_t due_limit);
  void recompute_top_next() noexcept;
  std::uint32_t slot_index(std::size_t level, tick_t deadline) const noexcept;
  // The slot that `deadline` (> now_, finite) goes to: slot_index(level_for(d), d).
  std::uint32_t slot_for(tick_t deadline) const noexcept;
  // Links `e` into slot `index`, the one for `deadline` (its deadline as read).
  // It goes to chain number `chain` (< slot_chains; see "Whose turn" at the top).
  void link(wheel_entry& e, std::uint32_t index, tick_t deadline, std::uint32_t chain) noexcept;
  // The chain of slot `index` that a re-placed entry goes to now; the next takes the next.
  std::uint32_t take_turn(std::uint32_t index) noexcept {
    return slot_turn_[index]++ % slot_chains;
  }
  // link's part below the top level: the chain, `where` and the occupancy bit. For a
  // slot known not to be on the top level (level 0 while a slot walk runs).
  void link_below_top(wheel_entry& e, std::uint32_t index, std::uint32_t chain) noexcept;
  // After a walk of level 0 at t: the cursors of the level-1 slot that the next rotation
  // cascades step one entry on (or start at its chains' first entries).
  void warm_next_cascade(tick_t t) noexcept;
  // A cursor at `from`, an entry of the warmed slot about to leave it, goes to `to`: the
  // entry after it in its chain (or the chain's end) when it is removed, the entry that
  // takes its place when it is moved (replace).
  void move_warm_cursors(wheel_entry& from, entry_list::iterator to) noexcept;
  // The chains of slot `index`: slot_chains lists.
  entry_list* chains(std::uint32_t index) const noexcept { return slots_lists_[index].chains; }
  bool slot_empty(std::uint32_t index) const noexcept;
  // Processes the slot of `level` at t; false if due_limit stopped it with entries
  // left (then they stay, and the tick is unfinished).
  bool process_slot(std::size_t level, tick_t t, std::size_t due_limit);
  // process_slot for a slot below the top, every entry of which leaves it.
  bool drain_slot(std::uint32_t index, tick_t t, std::size_t due_limit);
  // Processes the slots at t from first_level down; false if one was left unfinished
  // (resume_level_ then names it).
  bool process_tick(tick_t t, std::size_t first_level, std::size_t due_limit);
  // The tick at which an occupied slot next comes due.
  tick_t slot_due(std::size_t level, std::size_t slot) const noexcept;
  // The occupancy bit of slot `index` (level * slots + slot): set iff non-empty. Bit
  // `index` of bits_, so that a link finds its word without knowing the level.
  // occupied_slots_ counts the bits set.
  bool occupied(std::uint32_t index) const noexcept {
    return (bits_[index / 64] >> (index % 64)) & 1;
  }
  // A link into slot `index`. Most links find the bit set already (a slot holds many
  // entries), and then store nothing.
  void set_occupied(std::uint32_t index) noexcept {
    std::uint64_t& word = bits_[index / 64];
    const std::uint64_t bit = std::uint64_t{1} << (index % 64);
    if ((word & bit) == 0) {
      word |= bit;
      ++occupied_slots_;
    }
  }
  // Slot `index` has become empty: its occupancy bit goes, and a top slot's due tick
  // becomes never_tick (see top_due_).
  void mark_empty(std::uint32_t index) noexcept {
    assert(occupied(index));
    bits_[index / 64] &= ~(std::uint64_t{1} << (index % 64));
    --occupied_slots_;
    if (is_top(index)) top_due_[index - top_base_] = never_tick;
  }
  // First occupied slot >= from on `level`, or slots_ if none.
  std::size_t find_occupied(std::size_t level, std::size_t from) const noexcept;
  // link's part for a top-level slot: its due tick and top_next_.
  void note_top_link(std::uint32_t index, tick_t deadline) noexcept;

  std::size_t slots_;
  std::size_t levels_;
  unsigned shift_;           // log2(slots)
  // Where a deadline goes, by the highest bit in which it differs from now_: its level
  // (bit / shift_, capped at the top level), that level's digit's shift (level * shift_)
  // and first slot index (level * slots_). Loads, where a link would otherwise divide by
  // a run-time shift_ and multiply twice.
  struct level_of_bit {
    std::uint8_t level;
    std::uint8_t shift;
    std::uint32_t first;
  };
  level_of_bit level_of_bit_[64];
  // The entry for `deadline` (> now_) in level_of_bit_.
  const level_of_bit& by_highest_bit(tick_t deadline) const noexcept;
  std::uint32_t top_base_;   // (levels - 1) * slots: the top level's first list index
  tick_t top_low_mask_;      // the tick bits below the top level's digit
  tick_t now_ = 0;
  std::size_t due_count_ = 0;  // the due list's length (its entries, in ring and list)
  // An unfinished tick (advance_to's due_limit stopped inside a slot): now_ is that
  // tick, and the slots at now_ from this level down are still to process. Until then
  // entries due at now_ may still sit in those slots; next_slot_tick() is now_.
  static constexpr std::size_t no_resume = std::numeric_limits<std::size_t>::max();
  std::size_t resume_level_ = no_resume;
  std::size_t resume_chain_ = 0; // and the chain whose turn it was (process_slot)
  // A slot's chains, cache-line aligned: a link, an unlink that empties a chain and a
  // slot's walk read their sentinels.
  struct alignas(64) slot_lists {
    entry_list chains[slot_chains];
  };
  static_assert(sizeof(slot_lists) == slot_chains * sizeof(entry_list),
                "a slot's lists are its chains' sentinels, nothing more");
  std::unique_ptr<slot_lists[]> slots_lists_; // levels * slots
  std::vector<std::uint64_t> bits_;      // bit `index` set <=> slot `index` non-empty
  std::size_t occupied_slots_ = 0;       // the bits set in bits_
  // The turns (see "Whose turn" at the top), counts taken mod slot_chains: per slot, for
  // the entries a walk re-places into it, and the whole wheel's, for new entries (2^32
  // is a multiple of slot_chains too).
  std::unique_ptr<slot_turn[]> slot_turn_; // levels * slots
  std::uint32_t new_turn_ = 0;
  // Warming (see "Warming the next cascade" at the top): the level-1 slot whose chains
  // the cursors walk, or no_warm; each cursor is at an entry of chain k or its end.
  static constexpr std::uint32_t no_warm = 0xFFFFFFFFu;
  std::uint32_t warm_index_ = no_warm;
  entry_list::iterator warm_[slot_chains];
  // Entries bound for a slot, not linked yet: cells [0, staged_count_), each entry's
  // `where` naming its cell. All have a finite deadline > now_, which has not moved
  // since they came.
  wheel_entry* staged_[stage_capacity];
  std::size_t staged_count_ = 0;
  // Per top-level slot, while occupied: a lower bound of the tick at which it must be
  // processed, top_slot_start() of its earliest deadline (entries leaving do not raise
  // it); never_tick while empty, so that a link only takes the least. top_next_: their
  // least over the occupied slots, recomputed when the slot that holds it empties or is
  // processed.
  std::unique_ptr<tick_t[]> top_due_;
  tick_t top_next_ = never_tick;
  entry_list never_;

  // The due list. Mostly a ring of the due entries' addresses: appending writes a cell
  // and the entry's `where`, not three links in entries and a sentinel, and a pop reads
  // the address of the entry due_ahead on and asks for its line, so that the pops' cache
  // misses overlap instead of each waiting for the line of the entry before (a list is
  // a chase; W11 at 1M: 12 ns a pop). A shard asks for the rest of its owner's lines
  // (due_ahead_entry). Entries appended while the ring is full go to
  // due_overflow_, a list, and so do all appends while that list holds any: the ring's
  // entries come before the list's, and the order of appends is kept. An entry removed
  // from the ring leaves null in its cell, which a pop steps over; an entry moved in
  // memory (replace) takes its cell. due_ring_cells is expiry_batch's default, what a
  // step makes due at a time (advance_to's due_limit).
  static constexpr std::size_t due_ring_cells = 1024;
  static_assert(due_ring_cells <= wheel_entry::due_ring_end - wheel_entry::due_ring_first);
  wheel_entry* due_ring_[due_ring_cells];
  std::size_t due_ring_head_ = 0; // the oldest cell
  std::size_t due_ring_used_ = 0; // cells in use from the head on (null ones included)
  entry_list due_overflow_;
};

} // namespace asio_wheel::detail

#endif
