// W11, the bare wheel: detail::wheel alone, without clock, lock, executor or handler,
// so that its own cost per entry can be set beside the published figures of other wheel
// libraries (glommio about 43 ns arm / 26 ns cancel; bitwheel 25 / 14 ns p50).
//
// Per repetition, on a default-geometry wheel (256 slots, 4 levels) and N entries
// (wheel_entry objects in one array, as an I/O object embeds its node):
//   insert  N inserts at deadlines uniform in [1, 60000] ticks (1 ms ticks: 1 s to 60 s,
//           W1's range), in array order, the wheel filling up to N pending;
//   cancel  the N removes, in a random order (a cancel hits a cold node);
//   expire  the same N inserted again (untimed), then advance to the last deadline and
//           pop every entry off the due list, cascading included, per entry: as a shard
//           step does, at most 1024 (expiry_batch's default) made due at a time, each
//           batch popped while the slot walk left it in cache;
//   expire_all  the same, made due all at once, then popped (the cost of a second
//           pass over evicted entries, which the bounded advance avoids).
//   walk_floor  no wheel: the same N entries linked into slot_chains lists in a random
//           order, each read once through its links, the lists in turn (as a slot's
//           walk takes its chains): what one pass over chained entries costs at the
//           least on this machine, its cache misses with that many in flight. expire
//           makes two such passes for most entries (deadlines past 256 ticks cascade
//           from level 1 once), so this row is what its target is up against.
//   chase_floor  no wheel: the same N entries linked into one list in that random order,
//           read once through its links: one miss at a time, this machine's latency
//           for a random read among N entries, which walk_floor's eight chains divide.
//   array_floor  no wheel either: the same N entries read once through an array of
//           their addresses, in the same random order, each asked for (prefetched)
//           16 entries before it is read. A walk that knows where its entries are
//           before it reads them is not held to one miss per list in flight: this is
//           what a pass would cost if slots held arrays of pointers, not lists.
//   touch_floor  no wheel: the same N entries, in that random order, each read and
//           written once (its deadline raised by one), nothing linking one to the next:
//           as many misses in flight as the core allows.
//   touch_clock_floor  the same with one read of the library's clock (upper_clock::now,
//           what every reset_after and expires_after does) per entry, folded into what
//           is written: whether a clock read lets the misses around it overlap. On the
//           Intel VMs of this project it does not (measured: the misses then come one
//           at a time): W2 at 1M, a clock read and a random timer per op, paid this
//           until timer_state asked for the timer before the read (below).
//   prefetch_clock_floor  touch_clock_floor with each entry prefetched before the clock
//           read, as timer_state does before a relative deadline's read: a clock read
//           waits for the loads before it, not for prefetches, so each entry's miss
//           overlaps the read, and one miss is in flight at a time, not less. This is
//           W2 reset_after's floor at 1M: the timer is known only when the reset is
//           called, and the next reset's clock read waits for this one's loads.
//   unlink_floor  no wheel: the same N entries linked, in array order, into 2048 lists
//           picked at random (about the chains that the wheel's insert fills with these
//           deadlines: 235 level-1 slots of slot_chains each), then each unlinked in the
//           cancel order: what taking a node out of a doubly-linked list costs here, with
//           nothing else to do. The node and its two neighbours are three random lines,
//           and the neighbours are known only once the node has been read. This is
//           cancel's floor: the wheel's remove is that unlink plus checks of the node's
//           own fields.
//   unlink_where_floor  the same, each entry's `where` written too: the three stores
//           that a wheel's cancel cannot do without (the neighbours' links, and where
//           the entry is; its own links are left as they were, see list_hook), with
//           none of its checks. A store waits in the
//           core's store buffer, in order, until its line arrives, so each one after
//           the neighbours' leaves room for fewer cancels in flight (see wheel::remove):
//           this row and unlink_floor show what that one store costs here.
// "insert+cancel" is the sum of the two medians. Every entry must come out of expire,
// and none before its deadline tick, or the run fails. --variant PHASE times that phase
// alone (scripts/bench --callgrind counts its instructions per entry).
#ifndef ASIO_WHEEL_BENCH_BARE_WHEEL_HPP
#define ASIO_WHEEL_BENCH_BARE_WHEEL_HPP

#include "bench_common.hpp"

#include <asio_wheel/detail/upper_clock.hpp>
#include <asio_wheel/detail/wheel.hpp>

#include <algorithm>
#include <memory>
#include <numeric>

namespace bench {

inline void w11_run(bench_run& b) {
  namespace d = asio_wheel::detail;
  if (!b.cfg.want_wheel()) return;
  const std::size_t n = b.p.w4_n; // 1M in a full run, 100k with --quick
  const d::tick_t max_tick = 60000;
  auto rng = make_rng("W11", n, 0);
  std::uniform_int_distribution<d::tick_t> deadline_dist(1, max_tick);
  std::vector<d::tick_t> deadlines(n);
  for (auto& t : deadlines) t = deadline_dist(rng);
  std::vector<std::uint32_t> cancel_order(n);
  std::iota(cancel_order.begin(), cancel_order.end(), 0u);
  std::shuffle(cancel_order.begin(), cancel_order.end(), rng);

  // A phase is timed when its variant is wanted (--variant, for callgrind: only that
  // phase inside bench_timed_region); the insert and cancel phases run all the same, untimed,
  // since the ones after them need their state. The other phases are skipped.
  auto phase = [&](const char* variant, std::vector<double>& into, auto&& f) {
    if (b.cfg.want_variant(variant))
      into.push_back(time_ns(f) / double(n));
    else
      f();
  };
  std::vector<double> insert_ns, cancel_ns, expire_ns, expire_all_ns, walk_ns, chase_ns, array_ns;
  std::vector<double> touch_ns, touch_clock_ns, prefetch_clock_ns, unlink_ns, unlink_where_ns;
  for (int rep = 0; rep < b.p.reps; ++rep) {
    auto entries = std::make_unique<d::wheel_entry[]>(n);
    d::wheel w(256, 4);
    phase("insert", insert_ns, [&] {
      for (std::size_t i = 0; i < n; ++i) w.insert(entries[i], deadlines[i]);
    });
    phase("cancel", cancel_ns, [&] {
      for (std::uint32_t i : cancel_order) w.remove(entries[i]);
    });
    for (const std::size_t batch : {std::size_t(1024), std::size_t(-1)}) {
      const char* variant = batch == 1024 ? "expire" : "expire_all";
      if (!b.cfg.want_variant(variant)) continue;
      // A fresh wheel for expire_all (the first one stands at max_tick), filled untimed.
      d::wheel fresh(256, 4);
      d::wheel& x = batch == 1024 ? w : fresh;
      for (std::size_t i = 0; i < n; ++i) x.insert(entries[i], deadlines[i]);
      std::size_t expired = 0, early = 0;
      phase(variant, batch == 1024 ? expire_ns : expire_all_ns, [&] {
        // Counted in locals: through the captured references, each count's store could
        // alias the wheel's counts, and the inlined pops would reload them every entry.
        std::size_t popped = 0, popped_early = 0;
        for (bool reached = false; !reached;) {
          reached = x.advance_to(max_tick, batch);
          while (d::wheel_entry* e = x.pop_due()) {
            popped_early += e->deadline_tick() > x.now();
            ++popped;
          }
        }
        expired = popped;
        early = popped_early;
      });
      if (expired != n)
        b.fail.add("W11: " + std::to_string(expired) + " of " + std::to_string(n) + " entries expired");
      if (early != 0) b.fail.add("W11: " + std::to_string(early) + " entries expired early");
    }
    if (b.cfg.want_variant("walk_floor")) {
      constexpr std::size_t k = d::wheel::slot_chains;
      d::entry_list lists[k];
      for (std::size_t i = 0; i < n; ++i) lists[i % k].push_back(entries[cancel_order[i]]);
      d::tick_t sum = 0;
      phase("walk_floor", walk_ns, [&] {
        d::entry_list::iterator at[k];
        std::size_t walking = 0;
        for (std::size_t c = 0; c < k; ++c)
          if ((at[c] = lists[c].begin()) != lists[c].end()) ++walking;
        while (walking != 0)
          for (std::size_t c = 0; c < k; ++c) {
            if (at[c] == lists[c].end()) continue;
            sum += at[c]->deadline_tick();
            if (++at[c] == lists[c].end()) --walking;
          }
      });
      for (auto& l : lists) l.clear();
      // Every deadline is at least 1: the sum proves each entry was read (and keeps
      // the reads from being optimised away).
      if (sum < n) b.fail.add("W11: the floor walk read " + std::to_string(sum) + " < N");
    }
    if (b.cfg.want_variant("chase_floor")) {
      d::entry_list list;
      for (std::size_t i = 0; i < n; ++i) list.push_back(entries[cancel_order[i]]);
      d::tick_t sum = 0;
      phase("chase_floor", chase_ns, [&] {
        for (auto& e : list) sum += e.deadline_tick();
      });
      list.clear();
      if (sum < n) b.fail.add("W11: the chase read " + std::to_string(sum) + " < N");
    }
    if (b.cfg.want_variant("array_floor")) {
      std::vector<const d::wheel_entry*> cells(n);
      for (std::size_t i = 0; i < n; ++i) cells[i] = &entries[cancel_order[i]];
      constexpr std::size_t ahead = 16;
      d::tick_t sum = 0;
      phase("array_floor", array_ns, [&] {
        for (std::size_t i = 0; i < n; ++i) {
          if (i + ahead < n) __builtin_prefetch(cells[i + ahead]);
          sum += cells[i]->deadline_tick();
        }
      });
      if (sum < n) b.fail.add("W11: the array walk read " + std::to_string(sum) + " < N");
    }
    for (const bool with_where : {false, true}) {
      const char* variant = with_where ? "unlink_where_floor" : "unlink_floor";
      if (!b.cfg.want_variant(variant)) continue;
      constexpr std::size_t list_count = 2048;
      std::vector<d::entry_list> lists(list_count);
      std::uniform_int_distribution<std::size_t> pick(0, list_count - 1);
      for (std::size_t i = 0; i < n; ++i) lists[pick(rng)].push_back(entries[i]);
      phase(variant, with_where ? unlink_where_ns : unlink_ns, [&] {
        if (with_where)
          for (std::uint32_t i : cancel_order) {
            entries[i].unlink();
            entries[i].where = d::wheel_entry::unlinked;
          }
        else
          for (std::uint32_t i : cancel_order) entries[i].unlink();
      });
      std::size_t left = 0;
      for (auto& l : lists) left += !l.empty();
      if (left != 0)
        b.fail.add(std::string("W11: ") + variant + " left " + std::to_string(left) + " lists non-empty");
    }
    if (b.cfg.want_variant("touch_floor"))
      phase("touch_floor", touch_ns, [&] {
        for (std::uint32_t i : cancel_order) {
          d::wheel_entry& e = entries[i];
          e.deadline.store(e.deadline_tick() + 1, std::memory_order_relaxed);
        }
      });
    if (b.cfg.want_variant("touch_clock_floor"))
      phase("touch_clock_floor", touch_clock_ns, [&] {
        for (std::uint32_t i : cancel_order) {
          d::wheel_entry& e = entries[i];
          const auto now = d::upper_clock::now().time_since_epoch().count();
          e.deadline.store(std::max(e.deadline_tick(), static_cast<d::tick_t>(now)),
                           std::memory_order_relaxed);
        }
      });
    if (b.cfg.want_variant("prefetch_clock_floor"))
      phase("prefetch_clock_floor", prefetch_clock_ns, [&] {
        for (std::uint32_t i : cancel_order) {
          d::wheel_entry& e = entries[i];
          __builtin_prefetch(&e, 1);
          const auto now = d::upper_clock::now().time_since_epoch().count();
          e.deadline.store(std::max(e.deadline_tick(), static_cast<d::tick_t>(now)),
                           std::memory_order_relaxed);
        }
      });
  }

  std::vector<row> g;
  auto add = [&](const char* variant, const std::vector<double>& ns, std::string extra) {
    if (ns.empty()) return;
    const summary s = summarize(ns);
    g.push_back({"W11", impl_wheel, variant, n, s.min, s.median, NAN, std::move(extra)});
  };
  add("insert", insert_ns, "");
  add("cancel", cancel_ns, "");
  if (!insert_ns.empty() && !cancel_ns.empty()) {
    const summary ins = summarize(insert_ns), can = summarize(cancel_ns);
    g.push_back({"W11", impl_wheel, "insert+cancel", n, ins.min + can.min,
                 ins.median + can.median, NAN, "target<=30ns"});
  }
  add("expire", expire_ns, "target<=20ns");
  add("expire_all", expire_all_ns, "");
  add("walk_floor", walk_ns, "one_pass_no_wheel;chains=" + std::to_string(d::wheel::slot_chains));
  add("chase_floor", chase_ns, "one_list_no_wheel;one_miss_at_a_time");
  add("touch_floor", touch_ns, "no_wheel;read_and_write_each_entry");
  add("touch_clock_floor", touch_clock_ns, "no_wheel;the_same_plus_a_clock_read_each");
  add("prefetch_clock_floor", prefetch_clock_ns,
      "no_wheel;the_same_each_prefetched_before_its_read");
  add("array_floor", array_ns, "one_pass_no_wheel;addresses_in_an_array");
  add("unlink_floor", unlink_ns, "no_wheel;unlink_from_a_doubly_linked_list");
  add("unlink_where_floor", unlink_where_ns, "no_wheel;the_same_plus_where_written");
  b.out.add_group(std::move(g));
}

} // namespace bench

#endif
