#include <asio_wheel/detail/bits.hpp>
#include <asio_wheel/detail/cold.hpp>
#include <asio_wheel/detail/prefetch.hpp>
#include <asio_wheel/detail/wheel.hpp>

#include <algorithm>
#include <iterator>

namespace asio_wheel::detail {

namespace {

constexpr unsigned word_bits = 64;

static_assert(has_single_bit(wheel::slot_chains), "a chain number modulo slot_chains is a mask");

// Ticks at or above 2^shift: shifting by 64 is undefined, so spans that reach the top
// of the tick range are handled as "no higher digits".
constexpr tick_t high_part(tick_t t, unsigned shift) noexcept {
  return shift >= 64 ? 0 : (t >> shift) << shift;
}

} // namespace

wheel::wheel(std::size_t slots, std::size_t levels)
    : slots_(slots),
      levels_(levels),
      shift_(static_cast<unsigned>(countr_zero(slots))),
      top_base_(static_cast<std::uint32_t>((levels - 1) * slots)),
      // (levels - 1) * shift_ <= 64 - shift_ < 64: the shift is defined.
      top_low_mask_((tick_t{1} << ((levels - 1) * shift_)) - 1),
      slots_lists_(new slot_lists[slots * levels]),
      bits_((slots * levels + word_bits - 1) / word_bits, 0),
      slot_turn_(new slot_turn[slots * levels]()),
      top_due_(new tick_t[slots]) {
  assert(slots * levels <= std::size_t{1} << 20); // slot indices stay below staged_first
  static_assert(stage_capacity <= wheel_entry::due_ring_first - wheel_entry::staged_first);
  std::fill(top_due_.get(), top_due_.get() + slots, never_tick);
  for (unsigned bit = 0; bit < 64; ++bit) {
    const std::size_t level = std::min<std::size_t>(bit / shift_, levels - 1);
    level_of_bit_[bit] = {static_cast<std::uint8_t>(level), static_cast<std::uint8_t>(level * shift_),
                          static_cast<std::uint32_t>(level * slots)};
  }
}

const wheel::level_of_bit& wheel::by_highest_bit(tick_t deadline) const noexcept {
  // The highest base-`slots` digit in which the deadline differs from now.
  const tick_t diff = (now_ ^ deadline) | (slots_ - 1);
  return level_of_bit_[63 - countl_zero(diff)];
}

std::size_t wheel::level_for(tick_t deadline) const noexcept { return by_highest_bit(deadline).level; }

std::uint32_t wheel::slot_index(std::size_t level, tick_t deadline) const noexcept {
  const tick_t slot = (deadline >> (level * shift_)) & (slots_ - 1);
  return static_cast<std::uint32_t>(level * slots_ + slot);
}

std::uint32_t wheel::slot_for(tick_t deadline) const noexcept {
  // Most entries that a slot's walk re-places differ from now_ in the lowest digit only
  // (a level-1 slot cascading): their slot is that digit on level 0.
  if ((deadline ^ now_) < slots_) return static_cast<std::uint32_t>(deadline & (slots_ - 1));
  const level_of_bit& at = by_highest_bit(deadline);
  return at.first + static_cast<std::uint32_t>((deadline >> at.shift) & (slots_ - 1));
}

bool wheel::slot_empty(std::uint32_t index) const noexcept {
  const entry_list* c = chains(index);
  for (std::size_t k = 0; k < slot_chains; ++k)
    if (!c[k].empty()) return false;
  return true;
}

inline void wheel::link(wheel_entry& e, std::uint32_t index, tick_t deadline,
                        std::uint32_t chain) noexcept {
  // Slot = f(deadline, now): later, only the lazy rule lets the deadline move on.
  assert(deadline > now_ && index == slot_index(level_for(deadline), deadline));
  if (is_top(index)) note_top_link(index, deadline);
  link_below_top(e, index, chain);
}

inline void wheel::link_below_top(wheel_entry& e, std::uint32_t index,
                                  std::uint32_t chain) noexcept {
  assert(chain < slot_chains);
  chains(index)[chain].push_back(e);
  e.where = index;
  set_occupied(index);
}

void wheel::note_top_link(std::uint32_t index, tick_t deadline) noexcept {
  const tick_t start = top_slot_start(deadline);
  assert(start > now_); // the deadline differs from now in the top digit or above
  tick_t& due = top_due_[index - top_base_];
  assert(occupied(index) || due == never_tick);
  due = std::min(due, start);
  top_next_ = std::min(top_next_, start);
}

void wheel::place_unslotted(wheel_entry& e, tick_t deadline) {
  assert(!e.linked() && (deadline == never_tick || deadline <= now_));
  if (deadline == never_tick) {
    never_.push_back(e);
    e.where = wheel_entry::in_never;
  } else {
    append_due(e);
  }
}

void wheel::remove_due(wheel_entry& e) noexcept {
  if (e.in_due_ring()) {
    assert(due_ring_[due_cell_of(e)] == &e);
    due_ring_[due_cell_of(e)] = nullptr; // pop_due steps over it
  } else {
    e.unlink();
  }
  e.where = wheel_entry::unlinked;
  // The last due entry gone: what is left of the ring is null cells, and it starts over.
  if (--due_count_ == 0) due_ring_used_ = 0;
}

void wheel::unstage(wheel_entry& e) noexcept {
  // The last cell's entry moves into e's: it was staged last, so its line is likely
  // still in cache.
  const std::size_t cell = cell_of(e);
  assert(cell < staged_count_ && staged_[cell] == &e);
  put_in_cell(*staged_[--staged_count_], cell);
  e.where = wheel_entry::unlinked;
}

void wheel::link_staged() noexcept {
  // Each entry's slot, and the line that its link writes besides its own (the chain's
  // last entry), asked for before the first link: the misses overlap instead of
  // following one another. The counts are locals: the links' stores could alias the
  // members (see due_appender). The i-th entry goes to chain new_turn_ + i (see
  // "Whose turn" in wheel.hpp).
  const std::size_t count = staged_count_;
  const std::uint32_t first_chain = new_turn_;
  std::uint32_t index[stage_capacity];
  tick_t deadline[stage_capacity];
  for (std::size_t i = 0; i < count; ++i) {
    const tick_t d = staged_[i]->deadline_tick(); // read once: an owner may raise it
    assert(d != never_tick && d > now_);
    deadline[i] = d;
    index[i] = slot_for(d);
    prefetch(chains(index[i])[(first_chain + i) % slot_chains].back_hook());
  }
  for (std::size_t i = 0; i < count; ++i) {
    const auto chain = (first_chain + static_cast<std::uint32_t>(i)) % slot_chains;
    link(*staged_[i], index[i], deadline[i], chain);
  }
  new_turn_ = first_chain + static_cast<std::uint32_t>(count);
  staged_count_ = 0;
}

tick_t wheel::slot_start(tick_t deadline) const noexcept {
  // Above the digit of its level, the deadline agrees with now_ (level_for), so its slot
  // starts where the lower digits are zero; for the top level that is top_slot_start.
  return high_part(deadline, static_cast<unsigned>(level_for(deadline)) * shift_);
}

void wheel::forget_resume_if_nothing_left() noexcept {
  // The unfinished tick resumes in the slots at now_, from resume_level_ down. Once
  // removals have emptied them all, there is nothing to resume, and the state must go:
  // next_slot_tick would keep naming the tick, which has passed (a driver armed for it,
  // a wake-up for nothing, and stats().next_wakeup in the past), and a delay queue would
  // hold back takes that could complete at once (tick_unfinished).
  for (std::size_t level = 0; level <= resume_level_; ++level)
    if (occupied(slot_index(level, now_))) return;
  resume_level_ = no_resume;
  resume_chain_ = 0;
}

// Out of line and cold: inlined, it made remove_rest save registers on every path (W1's
// cancels come through it: 3 to 7 instructions each), for a rare case.
ASIO_WHEEL_COLD void wheel::after_slot_emptied(bool made_top_next) noexcept {
  if (made_top_next) recompute_top_next();
  if (resume_level_ != no_resume) forget_resume_if_nothing_left();
}

void wheel::remove_rest(wheel_entry& e) noexcept {
  if (!e.linked()) return;
  if (e.is_staged()) {
    unstage(e);
    return;
  }
  if (e.is_due()) {
    remove_due(e);
    return;
  }
  const bool slotted = e.in_slot();
  const std::uint32_t index = e.where;
  if (index == warm_index_) move_warm_cursors(e, std::next(entry_list::iterator(&e)));
  const bool empties_chain = e.alone(); // only then can the slot become empty
  e.unlink();
  e.where = wheel_entry::unlinked;
  if (slotted && empties_chain && slot_empty(index)) {
    // top_next_ may stay a lower bound, but not when the slot that made it is gone:
    // an empty or stale top would cost a wake-up for nothing.
    const bool made_next = is_top(index) && top_due_[index - top_base_] == top_next_;
    mark_empty(index);
    // One call, last: remove_rest keeps nothing live across a call.
    if (made_next || resume_level_ != no_resume) after_slot_emptied(made_next);
  }
}

void wheel::reschedule_slow(wheel_entry& e, tick_t deadline) {
  // Lazy rule: an entry may stay in any slot that comes due no later than its
  // deadline; it is re-placed when the slot comes up. That holds for every later
  // deadline, and for earlier ones down to the slot's start; never_tick leaves. A staged
  // entry has no slot yet: any deadline that would stage it again stays.
  if (e.is_staged() && deadline != never_tick && deadline > now_) {
    e.deadline.store(deadline, std::memory_order_relaxed);
    return;
  }
  if (e.in_slot() && deadline != never_tick &&
      deadline >= slot_due(e.where / slots_, e.where % slots_)) {
    e.deadline.store(deadline, std::memory_order_relaxed);
    return;
  }
  remove(e);
  insert(e, deadline);
}

void wheel::replace(wheel_entry& from, wheel_entry& to) noexcept {
  to.deadline.store(from.deadline_tick(), std::memory_order_relaxed);
  to.where = from.where;
  if (!from.linked()) return;
  if (from.is_staged()) {
    put_in_cell(to, cell_of(from));
    from.where = wheel_entry::unlinked;
    return;
  }
  if (from.in_due_ring()) {
    due_ring_[due_cell_of(from)] = &to;
    from.where = wheel_entry::unlinked;
    return;
  }
  if (from.where == warm_index_) move_warm_cursors(from, entry_list::iterator(&to));
  from.replace_with(to);
  from.where = wheel_entry::unlinked;
}

void wheel::move_warm_cursors(wheel_entry& from, entry_list::iterator to) noexcept {
  assert(from.where == warm_index_ && from.in_slot());
  const entry_list::iterator at(&from);
  for (auto& cursor : warm_)
    if (cursor == at) cursor = to;
}

void wheel::warm_next_cascade(tick_t t) noexcept {
  // Level 1 below the top only: a top-level slot keeps the entries of later rounds, and
  // its walk is rarer than a rotation.
  if (levels_ < 3) return;
  const tick_t rotation_end = t | (slots_ - 1);
  if (rotation_end == never_tick) return;
  const std::uint32_t index = slot_index(1, rotation_end + 1);
  entry_list* const chain = chains(index);
  if (index != warm_index_) {
    warm_index_ = index;
    for (std::size_t k = 0; k < slot_chains; ++k) {
      warm_[k] = chain[k].begin();
      if (warm_[k] != chain[k].end()) prefetch(&*warm_[k]);
    }
    return;
  }
  for (std::size_t k = 0; k < slot_chains; ++k) {
    if (warm_[k] == chain[k].end()) continue;
    assert(warm_[k]->where == index); // an entry of the warmed slot, never a stale one
    if (++warm_[k] != chain[k].end()) prefetch(&*warm_[k]);
  }
}

std::size_t wheel::find_occupied(std::size_t level, std::size_t from) const noexcept {
  if (from >= slots_) return slots_;
  // The level's bits are [base, base + slots_) of bits_; with fewer than 64 slots a word
  // holds several levels, hence the check against the end.
  const std::size_t base = level * slots_, end = base + slots_;
  std::size_t w = (base + from) / word_bits;
  std::uint64_t word = bits_[w] & (~std::uint64_t{0} << ((base + from) % word_bits));
  for (;;) {
    if (word != 0) {
      const std::size_t found = w * word_bits + countr_zero(word);
      return found < end ? found - base : slots_;
    }
    if (++w * word_bits >= end) return slots_;
    word = bits_[w];
  }
}

tick_t wheel::slot_due(std::size_t level, std::size_t slot) const noexcept {
  // The top level comes due by the rotation of its earliest deadline.
  if (level + 1 == levels_) return top_due_[slot];
  const unsigned low = static_cast<unsigned>(level) * shift_;
  const unsigned high = low + shift_;
  const std::size_t current = (now_ >> low) & (slots_ - 1);
  // An unfinished tick's slot is due now: its processing resumes there.
  if (slot == current && resume_level_ != no_resume && level <= resume_level_) return now_;
  // Below the top, occupied slots otherwise lie ahead of the current digit in the
  // current rotation: an entry is placed where its deadline differs from now.
  assert(slot > current);
  return high_part(now_, high) | (tick_t{slot} << low);
}

tick_t wheel::next_slot_tick() const noexcept {
  // Nothing in the slots or staged: no slot comes due, and no scan of the bitmaps needs
  // to say so. A step that runs a chain of operations completing at once (chained
  // takes) asks this once per round with the slots empty (S2: 200 instructions a take).
  // An unfinished tick keeps the entry it stopped at in its slot, so its slot is occupied;
  // and the top slot that made top_next_ recomputes it when it empties.
  if (!has_slotted()) {
    assert(resume_level_ == no_resume && staged_count_ == 0 && top_next_ == never_tick);
    return never_tick;
  }
  if (resume_level_ != no_resume) return now_; // the unfinished tick comes first
  tick_t best = top_next_;
  for (std::size_t level = 0; level + 1 < levels_; ++level) {
    const std::size_t current = (now_ >> (level * shift_)) & (slots_ - 1);
    const std::size_t slot = find_occupied(level, current + 1);
    if (slot < slots_) {
      best = std::min(best, slot_due(level, slot));
      // A slot of this level comes due before the level's rotation ends, and a slot of a
      // higher level (below the top) only at the start of one of its slots, which is also
      // the end of a rotation of this level: none of them can come first.
      break;
    }
  }
  for (std::size_t i = 0; i < staged_count_; ++i)
    best = std::min(best, slot_start(staged_[i]->deadline_tick()));
  return best;
}

bool wheel::process_slot(std::size_t level, tick_t t, std::size_t due_limit) {
  const std::uint32_t index = slot_index(level, t);
  if (!is_top(index)) return drain_slot(index, t, due_limit);
  assert(index != warm_index_); // only a slot below the top is warmed
  entry_list* const chain = chains(index);
  // One cursor per chain; the chains take turns (see "Chains" in wheel.hpp), and the
  // line of a chain's next entry is asked for as soon as the walk knows where it is.
  // A turn is one entry that leaves the slot; an entry that stays (a top-level round
  // not yet come) takes none, so that the order in which entries leave does not
  // depend on where a due_limit stopped the walk: it resumes with the chain whose turn
  // it was (resume_chain_), and walks past the ones that stayed again.
  entry_list::iterator at[slot_chains] = {};
  std::size_t walking = 0; // chains whose cursor has not reached the end
  for (std::size_t k = 0; k < slot_chains; ++k) {
    at[k] = chain[k].begin();
    if (at[k] != chain[k].end()) {
      prefetch(&*at[k]);
      ++walking;
    }
  }
  tick_t stays_until = never_tick; // top level: when the entries that stay come due
  bool finished = true;
  std::size_t k = resume_chain_; // whose turn it is
  resume_chain_ = 0;
  while (walking != 0) {
    if (at[k] == chain[k].end()) {
      k = (k + 1) % slot_chains;
      continue;
    }
    wheel_entry& e = *at[k];
    // Read once: its owner may raise it meanwhile (wheel::raise), and every decision
    // below must be about one value.
    const tick_t deadline = e.deadline_tick();
    if (deadline <= t && due_count_ >= due_limit) {
      finished = false; // the rest stays in the slot, for the tick's resumption
      resume_chain_ = k;
      break;
    }
    if (++at[k] == chain[k].end())
      --walking;
    else
      prefetch(&*at[k]);
    assert(deadline != never_tick); // such entries live on the never list
    assert(e.where == index);       // who owns the node: this slot
    // The lazy rule's invariant: a slot comes due no later than its entries' deadlines
    // (for the top level: no later than the start of their rotation's slot).
    assert(is_top(index) ? top_slot_start(deadline) >= t : deadline >= t);
    if (deadline <= t) {
      e.unlink();
      append_due(e);
      k = (k + 1) % slot_chains;
    } else {
      // Re-placed relative to now == t: a lower level, or this very slot for a top
      // level entry whose round has not come yet (it then stays where it is).
      const std::uint32_t target = slot_for(deadline);
      if (target != index) {
        e.unlink();
        link(e, target, deadline, take_turn(target)); // from slot to slot
        k = (k + 1) % slot_chains;
      } else {
        stays_until = std::min(stays_until, top_slot_start(deadline));
      }
    }
  }
  if (slot_empty(index)) {
    mark_empty(index);
  } else if (is_top(index)) {
    top_due_[index - top_base_] = finished ? stays_until : t; // unfinished: due again at t
  }
  return finished;
}

bool wheel::drain_slot(std::uint32_t index, tick_t t, std::size_t due_limit) {
  // Below the top, a slot that comes due at t holds deadlines from t up to the end of its
  // span, so every entry leaves it: due at t, or to a lower level (re-placed relative to
  // now == t, it differs from t in a lower digit). So each chain is taken out whole and
  // its entries leave it one by one without unlinking: no store into the next entry,
  // whose line the walk has only just asked for (W11 expire at 1M: 51 -> 46 ns). The
  // chains take turns as in process_slot, and a due_limit stop gives the rest back.
  entry_list* const chain = chains(index);
  if (index == warm_index_) warm_index_ = no_warm; // its entries all leave the chains
  list_hook* at[slot_chains];
  list_hook* last[slot_chains];
  // The chains that still hold entries, a bit each: the turns go round those, with no
  // step (and no branch to mispredict) for an empty chain; most level-0 slots hold a
  // few entries in their eight chains.
  static_assert(slot_chains <= 16, "a chain is a bit of `holding`");
  unsigned holding = 0;
  for (std::size_t k = 0; k < slot_chains; ++k) {
    at[k] = chain[k].take_all(last[k]);
    if (at[k] != nullptr) {
      prefetch(at[k]);
      holding |= 1u << k;
    }
  }
  // The walk's counts stay in locals until it ends (see due_appender).
  due_appender due(*this);
  const std::size_t due_room = due_count_ < due_limit ? due_limit - due_count_ : 0;
  assert(now_ == t);
  const tick_t low_digit = slots_ - 1;
  // The turns go in rounds over the chains that hold entries; the first round starts
  // with the chain whose turn it was when a due_limit stopped the walk.
  unsigned round = holding >> resume_chain_ << resume_chain_;
  resume_chain_ = 0;
  bool finished = true;
  while (holding != 0) {
    if (round == 0) round = holding;
    const unsigned k = countr_zero(round);
    round &= round - 1;
    wheel_entry& e = static_cast<wheel_entry&>(*at[k]);
    const tick_t deadline = e.deadline_tick(); // read once, as in process_slot
    if (deadline <= t && due.appended() == due_room) {
      finished = false;
      resume_chain_ = k;
      break;
    }
    at[k] = e.leave_chain(last[k]);
    if (at[k] != nullptr)
      prefetch(at[k]);
    else
      holding &= ~(1u << k);
    assert(deadline != never_tick && deadline >= t && e.where == index);
    if (deadline <= t) {
      due.append(e);
    } else if ((deadline ^ t) <= low_digit) {
      // From slot to slot, and most often, as for every entry of a level-1 slot, to
      // the level-0 slot of the deadline's lowest digit: link's work without its
      // top-level check, since level 0 is below the top here.
      const auto target = static_cast<std::uint32_t>(deadline & low_digit);
      link_below_top(e, target, take_turn(target));
    } else {
      const std::uint32_t target = slot_for(deadline);
      assert(target != index);
      link(e, target, deadline, take_turn(target));
    }
  }
  due.commit();
  // Every entry that left went to another slot or the due list, so the slot is empty
  // unless the walk stopped, with the entry it stopped at (and its chain's rest) left.
  if (finished) {
    assert(slot_empty(index));
    mark_empty(index);
  } else {
    for (std::size_t c = 0; c < slot_chains; ++c)
      if (at[c] != nullptr) chain[c].put_back(*at[c], *last[c]);
  }
  return finished;
}

bool wheel::process_top(tick_t t, std::size_t due_limit) {
  const std::uint32_t index = slot_index(levels_ - 1, t);
  // top_next_ is a lower bound: the slot at t may have emptied, or hold only entries
  // of later rotations (whose entry that made the bound left).
  bool finished = true;
  if ((t & top_low_mask_) == 0 && occupied(index) && top_due_[index - top_base_] <= t)
    finished = process_slot(levels_ - 1, t, due_limit);
  recompute_top_next();
  return finished;
}

bool wheel::process_tick(tick_t t, std::size_t first_level, std::size_t due_limit) {
  // Every level whose slot starts at t comes due; higher levels first, so that what
  // they cascade down with deadline t expires in this same tick.
  for (std::size_t level = first_level + 1; level-- > 0;) {
    bool finished = true;
    if (level + 1 == levels_) {
      if (t >= top_next_) finished = process_top(t, due_limit);
    } else {
      const unsigned low = static_cast<unsigned>(level) * shift_;
      if (low != 0 && (t & ((tick_t{1} << low) - 1)) != 0) continue;
      if (occupied(slot_index(level, t))) finished = process_slot(level, t, due_limit);
    }
    if (!finished) {
      resume_level_ = level;
      return false;
    }
  }
  resume_level_ = no_resume;
  resume_chain_ = 0;
  return true;
}

void wheel::recompute_top_next() noexcept {
  top_next_ = never_tick;
  const std::size_t top = levels_ - 1;
  for (std::size_t slot = find_occupied(top, 0); slot < slots_; slot = find_occupied(top, slot + 1))
    top_next_ = std::min(top_next_, top_due_[slot]);
}

bool wheel::advance_to(tick_t to, std::size_t due_limit) {
  link_staged(); // placed relative to the now_ they came at, which is about to move
  if (resume_level_ != no_resume && !process_tick(now_, resume_level_, due_limit)) return false;
  while (now_ < to) {
    if (due_count_ >= due_limit) return false;
    // Nothing in the slots: no tick up to `to` has work (next_slot_tick would say never).
    if (!has_slotted()) {
      now_ = to;
      return true;
    }
    // The common step: the next occupied level-0 slot of the current rotation. It comes
    // due before any slot of a level above, and only it starts at its tick (next_slot_tick
    // and process_tick say why), unless the top level is level 0 or top_next_ is no later.
    if (levels_ > 1) {
      assert(staged_count_ == 0); // linked above, and a walk links directly
      const tick_t digit_mask = slots_ - 1;
      const std::size_t slot = find_occupied(0, (now_ & digit_mask) + 1);
      const tick_t t = (now_ & ~digit_mask) | slot;
      if (slot < slots_ && t < top_next_ && t <= to) {
        now_ = t;
        if (!drain_slot(static_cast<std::uint32_t>(slot), t, due_limit)) {
          resume_level_ = 0;
          return false;
        }
        warm_next_cascade(t);
        continue;
      }
    }
    const tick_t t = next_slot_tick();
    if (t > to) {
      now_ = to;
      return true;
    }
    assert(t > now_);
    now_ = t;
    if (!process_tick(t, levels_ - 1, due_limit)) return false;
  }
  return true;
}

void wheel::clear() noexcept {
  auto mark = [](wheel_entry* e) { e->where = wheel_entry::unlinked; };
  for (std::size_t i = 0; i < slots_ * levels_; ++i)
    for (auto& chain : slots_lists_[i].chains) chain.clear_and_dispose(mark);
  for (std::size_t i = 0; i < staged_count_; ++i) mark(staged_[i]);
  staged_count_ = 0;
  auto mark_entry = [&mark](wheel_entry& e) { mark(&e); };
  for_each_in_due_ring(mark_entry);
  due_ring_head_ = due_ring_used_ = 0;
  due_overflow_.clear_and_dispose(mark);
  never_.clear_and_dispose(mark);
  std::fill(bits_.begin(), bits_.end(), 0);
  occupied_slots_ = 0;
  std::fill(top_due_.get(), top_due_.get() + slots_, never_tick);
  top_next_ = never_tick;
  due_count_ = 0;
  resume_level_ = no_resume;
  resume_chain_ = 0;
  warm_index_ = no_warm;
}

} // namespace asio_wheel::detail
