// The wheel alone: ticks in, due entries out. No clock, no Asio.
#define BOOST_TEST_MODULE wheel
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"

#include <asio_wheel/detail/wheel.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <vector>

using asio_wheel::detail::never_tick;
using asio_wheel::detail::tick_t;
using asio_wheel::detail::wheel;
using asio_wheel::detail::wheel_entry;

namespace {

struct node : wheel_entry {
  int id = 0;
};

// How many entries sit in slots or are staged, counted one by one: the number behind
// the wheel's has_slotted(), which keeps no count of entries.
std::size_t slotted_count(wheel& w) {
  std::size_t n = 0;
  w.for_each([&n](wheel_entry& e) { n += e.in_slot() || e.is_staged(); });
  return n;
}

// Advances to `to` and returns the ids that came due, in order.
std::vector<int> advance(wheel& w, tick_t to) {
  w.advance_to(to);
  std::vector<int> ids;
  while (wheel_entry* e = w.pop_due()) ids.push_back(static_cast<node*>(e)->id);
  return ids;
}

// Steps one tick at a time and records the tick at which each id came due.
std::map<int, tick_t> run_ticks(wheel& w, tick_t until) {
  std::map<int, tick_t> fired;
  for (tick_t t = w.now() + 1; t <= until; ++t)
    for (int id : advance(w, t)) fired[id] = t;
  return fired;
}

// Links nodes[i], id -1 - i, at tick first + i: a level-0 slot walked at each of those
// ticks (ids below 0, apart from a test's own).
void one_a_tick(wheel& w, std::vector<node>& nodes, tick_t first) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].id = -1 - static_cast<int>(i);
    w.insert(nodes[i], first + i);
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(entry_fires_exactly_at_its_tick_on_every_level) {
  // 16 slots, 3 levels: spans 16, 256, 4096 ticks; deadlines on each level, across
  // rotations and past the top span (rounds).
  wheel w(16, 3);
  std::vector<tick_t> deadlines = {1, 2, 15, 16, 17, 31, 255, 256, 257, 4095, 4096, 4097, 10000, 65537};
  std::vector<node> nodes(deadlines.size());
  for (std::size_t i = 0; i < deadlines.size(); ++i) {
    nodes[i].id = static_cast<int>(i);
    w.insert(nodes[i], deadlines[i]);
  }
  auto fired = run_ticks(w, 70000);
  BOOST_TEST(fired.size() == deadlines.size());
  for (std::size_t i = 0; i < deadlines.size(); ++i)
    BOOST_TEST(fired[static_cast<int>(i)] == deadlines[i]);
  BOOST_TEST(!w.has_slotted());
  BOOST_TEST(w.next_slot_tick() == never_tick);
}

BOOST_AUTO_TEST_CASE(single_level_is_a_netty_wheel_with_rounds) {
  wheel w(8, 1);
  std::vector<node> nodes(5);
  std::vector<tick_t> deadlines = {3, 8, 11, 64, 1000};
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].id = static_cast<int>(i);
    w.insert(nodes[i], deadlines[i]);
  }
  auto fired = run_ticks(w, 1100);
  for (std::size_t i = 0; i < nodes.size(); ++i)
    BOOST_TEST(fired[static_cast<int>(i)] == deadlines[i]);
}

BOOST_AUTO_TEST_CASE(jumping_far_ahead_fires_everything_in_deadline_order) {
  wheel w(16, 2);
  std::vector<node> nodes(6);
  std::vector<tick_t> deadlines = {500, 3, 40, 17, 300, 9000};
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].id = static_cast<int>(i);
    w.insert(nodes[i], deadlines[i]);
  }
  BOOST_TEST(advance(w, 100000) == (std::vector<int>{1, 3, 2, 4, 0, 5}), boost::test_tools::per_element());
  BOOST_TEST(w.now() == 100000u);
}

BOOST_AUTO_TEST_CASE(due_or_past_deadline_goes_to_the_due_list_not_a_processed_slot) {
  // The classic wheel bug: an entry for "now" put in the slot just processed would
  // wait a whole rotation.
  wheel w(16, 1);
  BOOST_TEST(advance(w, 5).empty());
  node now_node, past_node;
  now_node.id = 1;
  past_node.id = 2;
  w.insert(now_node, 5);
  w.insert(past_node, 0);
  BOOST_TEST(w.has_due());
  BOOST_TEST(advance(w, 5) == (std::vector<int>{1, 2}), boost::test_tools::per_element());
  node next;
  next.id = 3;
  w.insert(next, 6);
  BOOST_TEST(advance(w, 6) == std::vector<int>{3}, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(next_slot_tick_skips_empty_ticks) {
  wheel w(16, 3);
  BOOST_TEST(w.next_slot_tick() == never_tick);
  node a;
  w.insert(a, 7);
  BOOST_TEST(w.next_slot_tick() == 7u);
  node b;
  w.insert(b, 300); // level 2 (256-wide slots): its slot starts at 256
  w.remove(a);
  BOOST_TEST(w.next_slot_tick() == 256u);
  w.advance_to(256);
  BOOST_TEST(!w.has_due());
  BOOST_TEST(w.next_slot_tick() == 288u); // cascaded to level 1: slot [288, 304)
  w.advance_to(288);
  BOOST_TEST(w.next_slot_tick() == 300u);
  BOOST_TEST(advance(w, 300).size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_wheel_emptied_of_top_level_entries_says_never_and_then_sees_the_next) {
  // An empty wheel answers next_slot_tick and advance_to without a scan (a step's
  // rounds ask once per operation of a chain). That answer must be what a scan would
  // give: once the top level's entries (rounds away) are gone, its lower bound of their
  // ticks is gone too, and a debug build asserts it; the next entry alone decides.
  wheel w(16, 2); // the top level is level 1: slots 16 ticks wide, rounds of 256
  node far1, far2, near;
  near.id = 3;
  w.insert(far1, 1000); // top slot 14, starting at 992 in its round
  w.insert(far2, 5000); // top slot 8, starting at 4992 in its round
  w.link_staged();
  BOOST_TEST(w.next_slot_tick() == 992u);
  w.remove(far1);
  BOOST_TEST(w.next_slot_tick() == 4992u);
  w.remove(far2);
  BOOST_TEST(!w.has_slotted());
  BOOST_TEST(w.next_slot_tick() == never_tick);
  BOOST_TEST(w.advance_to(600)); // nothing slotted: straight there
  BOOST_TEST(w.now() == 600u);
  w.insert(near, 603);
  BOOST_TEST(w.next_slot_tick() == 603u);
  BOOST_TEST(advance(w, 603) == std::vector<int>{3}, boost::test_tools::per_element());
  BOOST_TEST(w.next_slot_tick() == never_tick);
}

BOOST_AUTO_TEST_CASE(never_entries_cost_no_slot_and_can_be_rescheduled) {
  wheel w(16, 2);
  node n;
  n.id = 9;
  w.insert(n, never_tick);
  BOOST_TEST(!w.has_slotted());
  BOOST_TEST(w.next_slot_tick() == never_tick);
  BOOST_TEST(advance(w, 1u << 20).empty());
  w.reschedule(n, w.now() + 3);
  BOOST_TEST(advance(w, w.now() + 3) == std::vector<int>{9}, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(lazy_reset_to_later_fires_at_the_new_deadline_only) {
  wheel w(16, 3);
  node n;
  n.id = 1;
  w.insert(n, 20);
  w.link_staged(); // in its slot now (see "Staging" in wheel.hpp)
  const auto where = n.where;
  w.reschedule(n, 5000);
  BOOST_TEST(n.where == where); // stayed in its slot: no relink
  auto fired = run_ticks(w, 6000);
  BOOST_TEST(fired.size() == 1u);
  BOOST_TEST(fired[1] == 5000u);
}

BOOST_AUTO_TEST_CASE(reset_to_earlier_but_after_the_slot_start_stays_lazy) {
  wheel w(16, 3);
  node n;
  n.id = 1;
  w.insert(n, 300); // level 2, slot [256, 512)
  w.link_staged();
  const auto where = n.where;
  w.reschedule(n, 280);
  BOOST_TEST(n.where == where);
  w.reschedule(n, 100); // before the slot's start: must relink
  BOOST_TEST(n.where != where);
  auto fired = run_ticks(w, 400);
  BOOST_TEST(fired[1] == 100u);
}

BOOST_AUTO_TEST_CASE(a_staged_entry_waits_unlinked_and_leaves_without_a_link) {
  wheel w(16, 3);
  node n, m;
  n.id = 1;
  m.id = 2;
  w.insert(n, 300); // level 2, slot [256, 512)
  BOOST_TEST(n.is_staged());
  BOOST_TEST(n.linked());
  BOOST_TEST(!n.in_slot());
  BOOST_TEST(w.staged() == 1u);
  BOOST_TEST(slotted_count(w) == 1u);
  BOOST_TEST(w.has_slotted());
  BOOST_TEST(w.next_slot_tick() == 256u); // counted at its slot's start
  w.insert(m, 7);
  BOOST_TEST(w.next_slot_tick() == 7u);
  w.remove(m); // m had the last cell: n keeps its own
  BOOST_TEST(!m.linked());
  BOOST_TEST(n.is_staged());
  BOOST_TEST(w.next_slot_tick() == 256u);
  w.reschedule(n, 40); // earlier, still ahead: staged, placed by the new deadline later
  BOOST_TEST(n.is_staged());
  BOOST_TEST(w.next_slot_tick() == 32u); // level 1, slot [32, 48)
  w.reschedule(n, never_tick);
  BOOST_TEST(!n.is_staged());
  BOOST_TEST(!w.has_slotted());
  BOOST_TEST(w.next_slot_tick() == never_tick);
  w.reschedule(n, 12);
  w.insert(m, 12);
  w.remove(n); // the last cell's entry (m) moves into n's
  BOOST_TEST(m.is_staged());
  BOOST_TEST(w.staged() == 1u);
  BOOST_TEST(run_ticks(w, 20) == (std::map<int, tick_t>{{2, 12}}));
  BOOST_TEST(!w.has_slotted());
}

BOOST_AUTO_TEST_CASE(advancing_links_the_staged_entries_first) {
  // More than the staging array holds, so that it fills and is linked mid-way too.
  wheel w(16, 3);
  std::vector<node> nodes(3 * wheel::stage_capacity + 5);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].id = static_cast<int>(i);
    w.insert(nodes[i], 1 + (i * 37) % 500);
    BOOST_TEST_REQUIRE(w.staged() <= wheel::stage_capacity);
  }
  BOOST_TEST(w.staged() > 0u);
  BOOST_TEST(slotted_count(w) == nodes.size());
  BOOST_TEST(w.has_slotted());
  auto fired = run_ticks(w, 600);
  BOOST_TEST(w.staged() == 0u);
  BOOST_TEST(fired.size() == nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    BOOST_TEST(fired[static_cast<int>(i)] == 1 + (i * 37) % 500);
}

BOOST_AUTO_TEST_CASE(reset_to_earlier_relinks) {
  wheel w(16, 3);
  node n;
  n.id = 1;
  w.insert(n, 4000);
  w.reschedule(n, 30);
  auto fired = run_ticks(w, 5000);
  BOOST_TEST(fired[1] == 30u);
}

BOOST_AUTO_TEST_CASE(a_due_entry_reset_later_leaves_the_due_list) {
  wheel w(16, 2);
  node n;
  n.id = 1;
  w.insert(n, 3);
  w.advance_to(3);
  BOOST_TEST(n.is_due());
  w.reschedule(n, 10);
  BOOST_TEST(!w.has_due());
  auto fired = run_ticks(w, 20);
  BOOST_TEST(fired[1] == 10u);
}

BOOST_AUTO_TEST_CASE(replace_takes_over_the_place) {
  wheel w(16, 2);
  node a, b;
  a.id = 1;
  b.id = 2;
  for (bool staged : {true, false}) {
    w.insert(a, w.now() + 50);
    if (!staged) w.link_staged();
    BOOST_TEST(a.is_staged() == staged);
    w.replace(a, b);
    BOOST_TEST(!a.linked());
    BOOST_TEST(b.linked());
    BOOST_TEST(b.is_staged() == staged);
    const tick_t at = w.now() + 50;
    auto fired = run_ticks(w, at + 10);
    BOOST_TEST(fired.count(1) == 0u);
    BOOST_TEST(fired[2] == at);
  }
}

// The due list is taken in order however its entries leave. Its entries sit in a ring
// of their addresses, where a remove leaves a null cell and a move takes the moved
// entry's cell: the order and the set of entries must not depend on that, before,
// during and after, nor on where in the ring the list starts (the second round).
BOOST_AUTO_TEST_CASE(the_due_list_keeps_its_order_through_removes_and_moves) {
  wheel w(16, 3);
  std::vector<node> nodes(60), spares(60);
  for (int round = 0; round < 2; ++round) {
    const tick_t base = w.now();
    for (int i = 0; i < 40; ++i) {
      nodes[std::size_t(i)].id = spares[std::size_t(i)].id = i;
      w.insert(nodes[std::size_t(i)], base + 1 + tick_t(i)); // one tick each: an order
    }
    // A bounded advance makes exactly 12 due (the count of the due list is right after
    // the last round's remove), then the rest come due behind them.
    BOOST_TEST(!w.advance_to(base + 40, 12));
    std::vector<int> got;
    while (wheel_entry* e = w.pop_due()) got.push_back(static_cast<node*>(e)->id);
    BOOST_TEST(got.size() == 12u);
    BOOST_TEST(w.advance_to(base + 40));
    w.remove(nodes[20]);                 // out of the middle
    w.replace(nodes[30], spares[30]);    // moved in its place
    nodes[50].id = 50;
    w.insert(nodes[50], w.now());        // due at once: after the others
    while (wheel_entry* e = w.pop_due()) got.push_back(static_cast<node*>(e)->id);
    std::vector<int> want;
    for (int i = 0; i < 40; ++i)
      if (i != 20) want.push_back(i);
    want.push_back(50);
    BOOST_TEST(got == want, boost::test_tools::per_element());
    BOOST_TEST(!spares[30].linked());
  }
}

// due_ahead_entry names the entry that pop_due asked for ahead, the one due_ahead pops
// on: a shard asks for the rest of that entry's owner there (ask_for_owner), so an entry
// off by one would be a miss that nothing reports but this test. It is null once fewer
// entries are left in the ring, and for a removed entry's cell.
BOOST_AUTO_TEST_CASE(due_ahead_entry_is_the_entry_due_ahead_pops_on) {
  wheel w(16, 3);
  std::vector<node> nodes(40);
  for (int i = 0; i < 40; ++i) {
    nodes[std::size_t(i)].id = i;
    w.insert(nodes[std::size_t(i)], 5);
  }
  BOOST_TEST(w.advance_to(5));
  std::vector<const wheel_entry*> popped, ahead;
  while (wheel_entry* e = w.pop_due()) {
    popped.push_back(e);
    ahead.push_back(w.due_ahead_entry());
  }
  BOOST_TEST_REQUIRE(popped.size() == 40u);
  const std::size_t d = wheel::due_ahead;
  for (std::size_t i = 0; i < popped.size(); ++i)
    BOOST_TEST((ahead[i] == (i + d < popped.size() ? popped[i + d] : nullptr)), "pop " << i);

  // A removed entry leaves a null cell, which due_ahead_entry names as null.
  for (int i = 0; i < 40; ++i) w.insert(nodes[std::size_t(i)], 10);
  BOOST_TEST(w.advance_to(10));
  BOOST_TEST_REQUIRE(w.pop_due() != nullptr);
  const wheel_entry* named = w.due_ahead_entry();
  BOOST_TEST_REQUIRE(named != nullptr);
  w.remove(nodes[std::size_t(static_cast<const node*>(named)->id)]);
  BOOST_TEST(w.due_ahead_entry() == nullptr);
  std::size_t left = 0;
  while (wheel_entry* e = w.pop_due()) {
    BOOST_TEST(e != named);
    ++left;
  }
  BOOST_TEST(left == 38u);
}

// More entries come due at once than the due ring holds (1024, expiry_batch's default):
// the rest wait in a list behind the ring's, and so does every entry appended while that
// list holds any, even once pops have made room in the ring. Removes and moves in either
// part keep the order; when removes take the last due entry, the list is empty.
BOOST_AUTO_TEST_CASE(the_due_list_keeps_its_order_past_its_ring) {
  wheel w(16, 3);
  const int n = 1100;
  std::vector<node> nodes(n + 2), spares(n);
  for (int i = 0; i < n + 2; ++i) nodes[std::size_t(i)].id = i;
  for (int i = 0; i < n; ++i) {
    spares[std::size_t(i)].id = i;
    w.insert(nodes[std::size_t(i)], tick_t(i) + 1); // one tick each: an order
  }
  BOOST_TEST(w.advance_to(tick_t(n)));
  w.remove(nodes[5]);                       // from the ring
  w.remove(nodes[1050]);                    // from the list behind it
  w.replace(nodes[7], spares[7]);           // moved, in the ring
  w.replace(nodes[1060], spares[1060]);     // moved, in the list
  w.insert(nodes[n], w.now());              // due at once: last
  std::vector<int> got;
  for (int i = 0; i < 500; ++i) got.push_back(static_cast<node*>(w.pop_due())->id);
  w.insert(nodes[n + 1], w.now());          // the ring has room, but the list comes first
  while (wheel_entry* e = w.pop_due()) got.push_back(static_cast<node*>(e)->id);
  std::vector<int> want;
  for (int i = 0; i < n + 2; ++i)
    if (i != 5 && i != 1050) want.push_back(i);
  BOOST_TEST(got == want, boost::test_tools::per_element());
  BOOST_TEST(!w.has_due());
  BOOST_TEST(!spares[7].linked());
  BOOST_TEST(!spares[1060].linked());

  // Removes that take every due entry leave an empty list; later entries come out alone.
  for (int i = 0; i < 3; ++i) w.insert(nodes[std::size_t(i)], w.now());
  for (int i = 0; i < 3; ++i) w.remove(nodes[std::size_t(i)]);
  BOOST_TEST(!w.has_due());
  BOOST_TEST(w.pop_due() == nullptr);
  w.insert(nodes[3], w.now());
  w.insert(nodes[4], w.now());
  got.clear();
  while (wheel_entry* e = w.pop_due()) got.push_back(static_cast<node*>(e)->id);
  BOOST_TEST(got == (std::vector<int>{3, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(full_64_bit_geometry_works) {
  // 2 slots x 64 levels and 65536 slots x 4 levels use every bit of the tick.
  for (auto [slots, levels] : {std::pair<std::size_t, std::size_t>{2, 64}, {65536, 4}}) {
    wheel w(slots, levels);
    node a, b;
    a.id = 1;
    b.id = 2;
    w.insert(a, 1000);
    w.insert(b, tick_t{1} << 40);
    BOOST_TEST(advance(w, 999).empty());
    BOOST_TEST(advance(w, 1000) == std::vector<int>{1}, boost::test_tools::per_element());
    BOOST_TEST(advance(w, (tick_t{1} << 40) - 1).empty());
    BOOST_TEST(advance(w, tick_t{1} << 40) == std::vector<int>{2}, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(randomized_against_a_sorted_model) {
  // Random inserts, removes and reschedules on small wheels, so that rounds and
  // cascades happen all the time; every entry must come due exactly at its deadline.
  for (auto [slots, levels] : {std::pair<std::size_t, std::size_t>{4, 1}, {16, 1}, {4, 3}, {16, 2}, {8, 4}}) {
    std::mt19937_64 rng(slots * 31 + levels);
    wheel w(slots, levels);
    // Each id lives in one of two nodes; a replace moves it to the other (a timer move).
    std::vector<node> nodes(300), spares(300);
    std::vector<node*> holder(nodes.size());
    std::map<int, tick_t> model; // id -> deadline of linked entries
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      nodes[i].id = spares[i].id = static_cast<int>(i);
      holder[i] = &nodes[i];
    }
    for (int step = 0; step < 20000; ++step) {
      const std::size_t i = rng() % nodes.size();
      node& n = *holder[i];
      const tick_t deadline = w.now() + rng() % 3000;
      switch (rng() % 6) {
      case 0:
        if (!n.linked()) {
          w.insert(n, deadline);
          model[n.id] = deadline;
        }
        break;
      case 4: // a burst of inserts: the staging array fills
        for (std::size_t k = 0; k < 40; ++k) {
          node& b = *holder[(i + k) % nodes.size()];
          if (b.linked()) continue;
          const tick_t d = w.now() + 1 + rng() % 3000;
          w.insert(b, d);
          model[b.id] = d;
        }
        break;
      case 5: {
        node& other = holder[i] == &nodes[i] ? spares[i] : nodes[i];
        w.replace(n, other);
        BOOST_REQUIRE(!n.linked());
        BOOST_REQUIRE(other.linked() == (model.count(n.id) == 1));
        holder[i] = &other;
        break;
      }
      case 1:
        w.remove(n);
        model.erase(n.id);
        break;
      case 2:
        if (n.linked()) {
          w.reschedule(n, deadline);
          model[n.id] = deadline;
        }
        break;
      default: {
        const tick_t to = w.now() + rng() % 50;
        w.advance_to(to);
        while (wheel_entry* e = w.pop_due()) {
          const int id = static_cast<node*>(e)->id;
          BOOST_REQUIRE(model.count(id) == 1u);
          BOOST_REQUIRE(model[id] <= to); // never early
          model.erase(id);
        }
        for (auto& [id, d] : model) BOOST_REQUIRE(d > to); // never late
      }
      }
      // The driver would be armed no later than the first deadline (staged ones too).
      if (step % 16 == 0)
        for (auto& [id, d] : model)
          if (d > w.now()) BOOST_REQUIRE(w.next_slot_tick() <= d);
    }
    w.clear(); // an entry leaves the wheel before it is destroyed
  }
}

// A deadline that never comes, set on an entry in a slot: before the fix the lazy rule
// kept it in its slot, which then came due again every top-level rotation (a wake-up
// each time for nothing). It must leave the slots for the never list at once.
BOOST_AUTO_TEST_CASE(rescheduling_to_never_leaves_the_slots_at_once) {
  for (std::size_t levels : {1u, 2u, 4u}) {
    wheel w(16, levels);
    node n;
    n.id = 1;
    w.insert(n, 5);
    BOOST_TEST(w.next_slot_tick() <= 5u);
    w.reschedule(n, never_tick);
    BOOST_TEST(n.linked());
    BOOST_TEST(!n.in_slot());
    BOOST_TEST(!w.has_slotted());
    BOOST_TEST(w.next_slot_tick() == never_tick);
    BOOST_TEST(advance(w, 1u << 24).empty());
    w.reschedule(n, w.now() + 2); // and back, like any never entry
    BOOST_TEST(advance(w, w.now() + 2) == std::vector<int>{1}, boost::test_tools::per_element());
  }
}

// An entry many top-level rotations away comes due at the start of its own rotation's
// slot, not once a rotation: before the fix a wait at time_point::max() with a 1 ns
// tick was visited every 4.3 s of virtual time (232 ms to advance a year).
BOOST_AUTO_TEST_CASE(an_entry_rotations_away_is_visited_only_in_its_own_rotation) {
  wheel w(256, 4); // the top level spans 2^32 ticks
  node far, near;
  far.id = 1;
  near.id = 2;
  const tick_t deadline = (tick_t{1} << 52) + 12345;
  w.insert(far, deadline);
  const tick_t own_slot = deadline & ~((tick_t{1} << 24) - 1);
  BOOST_TEST(w.next_slot_tick() == own_slot);
  w.insert(near, 1000); // a nearer entry comes first (its level-1 slot starts at 768)
  BOOST_TEST(w.next_slot_tick() == 768u);
  BOOST_TEST(advance(w, 1000) == std::vector<int>{2}, boost::test_tools::per_element());
  BOOST_TEST(w.next_slot_tick() == own_slot);
  BOOST_TEST(advance(w, deadline - 1).empty());
  BOOST_TEST(advance(w, deadline) == std::vector<int>{1}, boost::test_tools::per_element());
  // The same on a single level (Netty's rounds): the slot waits for the entry's round.
  wheel netty(16, 1);
  node n;
  n.id = 3;
  netty.insert(n, 16 * 1000 + 3);
  BOOST_TEST(netty.next_slot_tick() == 16u * 1000 + 3);
  netty.clear(); // an entry leaves the wheel before it is destroyed
}

// Several entries in one top-level slot, rounds apart: the slot comes due once for each
// round that holds an entry, and entries leaving never make anything fire early.
BOOST_AUTO_TEST_CASE(a_top_slot_comes_due_for_each_round_it_holds) {
  wheel w(16, 2); // top level: 16 slots of 16 ticks, rotation 256
  std::vector<node> nodes(4);
  const std::vector<tick_t> deadlines = {256 * 3 + 40, 256 * 7 + 41, 256 * 7 + 47, 256 * 20 + 33};
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].id = static_cast<int>(i);
    w.insert(nodes[i], deadlines[i]);
  }
  BOOST_TEST(w.next_slot_tick() == 256u * 3 + 32);
  w.remove(nodes[0]); // the bound stays low: one visit for nothing, then the next round
  BOOST_TEST(advance(w, 256 * 3 + 32).empty());
  BOOST_TEST(w.next_slot_tick() == 256u * 7 + 32);
  auto fired = run_ticks(w, 256 * 21);
  BOOST_TEST(fired.size() == 3u);
  BOOST_TEST(fired[1] == deadlines[1]);
  BOOST_TEST(fired[2] == deadlines[2]);
  BOOST_TEST(fired[3] == deadlines[3]);
}

BOOST_AUTO_TEST_CASE(one_slot_walk_fills_the_ring_and_spills_into_its_list) {
  // One tick's 1500 entries come due in one slot walk: the ring (1024 cells) takes the
  // first ones and its overflow list the rest, in the same walk. Each must come out
  // once, whichever part holds it, and removals from either part must keep the count.
  // Then the same walk bounded, so that it stops inside the slot after the ring is full.
  for (std::size_t bound : {std::size_t(-1), std::size_t(1200)}) {
    wheel w(16, 3);
    const int n = 1500;
    std::vector<node> nodes(n);
    for (int i = 0; i < n; ++i) {
      nodes[std::size_t(i)].id = i;
      w.insert(nodes[std::size_t(i)], 100); // level 2 at first: cascades twice
    }
    bool reached = w.advance_to(100, bound);
    BOOST_TEST(reached == (bound == std::size_t(-1)));
    std::vector<int> in_ring, in_list;
    for (auto& e : nodes)
      if (e.in_due_ring())
        in_ring.push_back(e.id);
      else if (e.is_due())
        in_list.push_back(e.id);
    BOOST_TEST(in_ring.size() == 1024u);
    BOOST_TEST(in_list.size() == std::min<std::size_t>(bound, n) - 1024u);
    w.remove(nodes[std::size_t(in_ring[10])]);
    w.remove(nodes[std::size_t(in_list[10])]);
    std::vector<int> got;
    while (!reached || w.has_due()) {
      while (wheel_entry* e = w.pop_due()) {
        BOOST_TEST_REQUIRE(e->deadline_tick() <= w.now()); // never early
        got.push_back(static_cast<node*>(e)->id);
      }
      if (!reached) reached = w.advance_to(100, bound);
    }
    BOOST_TEST(got.size() == std::size_t(n - 2));
    std::sort(got.begin(), got.end());
    BOOST_TEST((std::adjacent_find(got.begin(), got.end()) == got.end())); // none twice
    BOOST_TEST(!std::binary_search(got.begin(), got.end(), in_ring[10]));
    BOOST_TEST(!std::binary_search(got.begin(), got.end(), in_list[10]));
    BOOST_TEST(!w.has_slotted());
    for (auto& e : nodes) BOOST_TEST_REQUIRE(!e.linked());
  }
}

BOOST_AUTO_TEST_CASE(a_bounded_advance_stops_between_ticks_and_resumes_in_order) {
  // The shard advances at most a step's budget at a time (wheel_shard::run_step). The
  // same entries must come out in the same order, none early, whatever the bound, and
  // removal must keep the due count right while the wheel is behind.
  // Dense deadlines put several entries in a slot, so that bounds stop inside slots
  // (an unfinished tick) on every level, the top's rounds included.
  std::mt19937 rng(11);
  std::vector<node> nodes(3000);
  std::vector<tick_t> deadlines(nodes.size());
  for (tick_t max_deadline : {tick_t(300), tick_t(5000), tick_t(20000)}) {
  std::uniform_int_distribution<tick_t> dist(1, max_deadline);
  for (auto& d : deadlines) d = dist(rng);
  std::vector<int> unbounded_order;
  for (std::size_t limit : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1000)}) {
    wheel w(16, 3);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      nodes[i].id = static_cast<int>(i);
      w.insert(nodes[i], deadlines[i]);
    }
    std::vector<int> order;
    bool reached = false;
    while (!reached) {
      reached = w.advance_to(25000, limit == 0 ? std::size_t(-1) : limit);
      if (!reached && limit != 0) BOOST_TEST_REQUIRE(w.now() < 25000u);
      // Take one less than the bound each round (at least one): the due list is never
      // emptied, so the next call sees it still at or over the bound.
      std::size_t take = limit <= 1 ? std::size_t(-1) : limit - 1;
      while (take-- > 0) {
        wheel_entry* e = w.pop_due();
        if (!e) break;
        BOOST_TEST_REQUIRE(e->deadline_tick() <= w.now()); // never early
        order.push_back(static_cast<node*>(e)->id);
      }
    }
    while (wheel_entry* e = w.pop_due()) order.push_back(static_cast<node*>(e)->id);
    BOOST_TEST(order.size() == nodes.size());
    if (limit == 0)
      unbounded_order = order;
    else
      BOOST_TEST(order == unbounded_order, boost::test_tools::per_element());
  }
  }

  // An entry removed from the due list while the wheel is behind.
  wheel w(16, 3);
  for (std::size_t i = 0; i < 100; ++i) w.insert(nodes[i], 1 + i % 10); // 10 a tick, 1..10
  BOOST_TEST(!w.advance_to(100, 20)); // stops once tick 2 brought the 20th due
  BOOST_TEST(w.now() == 2u);
  w.remove(nodes[0]); // due at 1: leaves the due list
  std::size_t popped = 0;
  while (w.pop_due()) ++popped;
  BOOST_TEST(popped == 19u);
  while (!w.advance_to(100, 20))
    while (w.pop_due()) ++popped;
  while (w.pop_due()) ++popped;
  BOOST_TEST(popped == 99u);
  BOOST_TEST(w.now() == 100u);
}

BOOST_AUTO_TEST_CASE(a_slot_stays_occupied_until_its_last_chain_empties) {
  // A slot is several lists (chains, see wheel.hpp); removing every entry of one chain
  // must not make the slot look empty while another still holds one.
  wheel w(16, 2);
  std::vector<node> nodes(2 * wheel::slot_chains + 1);
  for (auto& n : nodes) w.insert(n, 7);
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    w.remove(nodes[i]);
    BOOST_TEST(w.next_slot_tick() == 7u); // nodes[0] is still there
  }
  BOOST_TEST(slotted_count(w) == 1u);
  BOOST_TEST(w.has_slotted());
  BOOST_TEST(w.advance_to(7));
  BOOST_TEST(w.pop_due() == &nodes[0]);
  BOOST_TEST(w.next_slot_tick() == never_tick);
  // And the other way round: the entry left last is in a chain of its own.
  for (auto& n : nodes) w.insert(n, 9);
  for (std::size_t i = 0; i + 1 < nodes.size(); ++i) w.remove(nodes[i]);
  BOOST_TEST(w.next_slot_tick() == 9u);
  w.remove(nodes.back());
  BOOST_TEST(w.next_slot_tick() == never_tick);
}

BOOST_AUTO_TEST_CASE(linked_slots_stay_occupied_until_their_last_entry_leaves) {
  // The same with the entries linked into their slots' chains, not staged: a remove
  // that leaves others in its chain takes the inline path and touches no count, one
  // that empties a chain checks the slot. Whether anything is slotted, and when the
  // next slot comes due, must follow the last entry of each slot, on every level.
  wheel w(16, 3);
  const tick_t deadlines[] = {7, 40, 300}; // levels 0, 1 and 2 (the top)
  const std::size_t per_slot = 3 * wheel::slot_chains + 1;
  std::vector<node> nodes(3 * per_slot);
  for (std::size_t i = 0; i < nodes.size(); ++i) w.insert(nodes[i], deadlines[i / per_slot]);
  w.link_staged();
  BOOST_TEST(w.staged() == 0u);
  BOOST_TEST(w.has_slotted());
  const tick_t starts[] = {7, 32, 256};              // when each one's slot comes due
  const tick_t next_after[] = {32, 256, never_tick}; // once the slot of each is empty
  for (std::size_t slot = 0; slot < 3; ++slot) {
    // Every entry of the slot but its last, in an order that empties chains on the way.
    for (std::size_t i = per_slot; i-- > 1;) {
      w.remove(nodes[slot * per_slot + i]);
      BOOST_TEST(!nodes[slot * per_slot + i].linked());
      BOOST_TEST(w.next_slot_tick() == starts[slot]);
    }
    BOOST_TEST(w.has_slotted());
    w.remove(nodes[slot * per_slot]);
    BOOST_TEST(w.next_slot_tick() == next_after[slot]);
  }
  BOOST_TEST(!w.has_slotted());
  BOOST_TEST(w.advance_to(1000)); // nothing slotted: straight there
  BOOST_TEST(w.now() == 1000u);
  BOOST_TEST(w.pop_due() == nullptr);
}

BOOST_AUTO_TEST_CASE(entries_of_an_unfinished_tick_can_be_moved_and_removed) {
  wheel w(16, 2);
  std::vector<node> nodes(20);
  for (int i = 0; i < 20; ++i) {
    nodes[i].id = i;
    w.insert(nodes[i], 5);
  }
  BOOST_TEST(!w.advance_to(10, 3)); // stops inside tick 5's slot
  BOOST_TEST(w.now() == 5u);
  BOOST_TEST(w.next_slot_tick() == 5u); // the rest of the tick comes first
  // 0..2 are due; 3..19 still in the slot.
  w.reschedule(nodes[10], 3);  // earlier than the slot: straight to the due list
  w.reschedule(nodes[11], 8);  // later: stays, re-placed when the tick resumes
  w.remove(nodes[12]);
  std::vector<int> ids;
  for (bool reached = false; !reached;) {
    reached = w.advance_to(10, 3);
    while (wheel_entry* e = w.pop_due()) {
      BOOST_TEST_REQUIRE(e->deadline_tick() <= w.now());
      ids.push_back(static_cast<node*>(e)->id);
      if (e == &nodes[11]) BOOST_TEST(w.now() == 8u);
    }
  }
  // 0..2 first (the bound stopped after them), then 10 (straight to the due list), the
  // rest of tick 5 (ties: in no particular order), and 11 at tick 8.
  BOOST_REQUIRE(ids.size() == 19u);
  std::vector<int> first(ids.begin(), ids.begin() + 3);
  std::sort(first.begin(), first.end());
  BOOST_TEST(first == std::vector<int>({0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(ids[3] == 10);
  std::vector<int> rest(ids.begin() + 4, ids.end() - 1), expected;
  std::sort(rest.begin(), rest.end());
  for (int i = 3; i < 20; ++i)
    if (i != 10 && i != 11 && i != 12) expected.push_back(i);
  BOOST_TEST(rest == expected, boost::test_tools::per_element());
  BOOST_TEST(ids.back() == 11);
  BOOST_TEST(!w.has_slotted());
}

// An unfinished tick whose remaining entries are all removed is over: nothing is left to
// resume. It stayed unfinished until the next advance, and next_slot_tick named the past
// tick to a driver (a wake-up for nothing; with nothing else slotted, an assertion).
BOOST_AUTO_TEST_CASE(an_unfinished_tick_whose_rest_is_removed_is_over) {
  for (const bool other_slotted : {false, true}) {
    wheel w(16, 2);
    std::vector<node> nodes(4);
    for (int i = 0; i < 3; ++i) w.insert(nodes[i], 5);
    if (other_slotted) w.insert(nodes[3], 40); // a level-1 slot
    BOOST_TEST(!w.advance_to(10, 1)); // stops inside tick 5's slot
    BOOST_TEST_REQUIRE(w.pop_due() != nullptr);
    BOOST_TEST(w.tick_unfinished());
    int left = 0;
    for (int i = 0; i < 3; ++i)
      if (nodes[i].linked()) {
        w.remove(nodes[i]);
        ++left;
      }
    BOOST_TEST(left == 2);
    BOOST_TEST(!w.tick_unfinished(), "other slotted: " << other_slotted);
    BOOST_TEST(w.next_slot_tick() == (other_slotted ? tick_t{32} : never_tick));
    BOOST_TEST(w.advance_to(40, 1));
    BOOST_TEST(w.pop_due() == (other_slotted ? &nodes[3] : nullptr));
  }
}

BOOST_AUTO_TEST_CASE(entries_of_the_warmed_slot_may_leave_and_move_while_it_is_warmed) {
  // While level 0 walks a rotation, the wheel steps cursors through the level-1 slot
  // that the next rotation cascades, one entry a walk. Those entries are removed,
  // destroyed and moved in memory meanwhile, each on its own allocation, so that a
  // cursor left on one would read freed memory (caught by the sanitizer builds), and
  // the rest must still fire at their ticks. 16 slots, 3 levels: rotations of 16 ticks.
  wheel w(16, 3);
  std::vector<node> every_tick(48);
  one_a_tick(w, every_tick, 1);
  std::vector<std::unique_ptr<node>> warmed(240);
  std::vector<tick_t> deadline(warmed.size());
  std::mt19937 rng(7);
  for (std::size_t i = 0; i < warmed.size(); ++i) {
    warmed[i] = std::make_unique<node>();
    warmed[i]->id = static_cast<int>(i);
    deadline[i] = 32 + static_cast<tick_t>(i % 16); // the level-1 slot of ticks 32-47
    w.insert(*warmed[i], deadline[i]);
  }
  std::vector<std::size_t> order(warmed.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::size_t next = 0;
  std::map<int, tick_t> fired;
  for (tick_t t = 1; t <= 48; ++t) {
    for (int id : advance(w, t)) fired[id] = t;
    // Ticks 17-31 walk level 0 with the slot of 32-47 warmed: each tick, 12 of its
    // entries leave (destroyed) and 4 move to a new allocation.
    for (int k = 0; k < 16 && t >= 17 && t < 32; ++k) {
      const std::size_t i = order[next++];
      if (k < 12) {
        w.remove(*warmed[i]);
        warmed[i].reset();
      } else {
        auto moved = std::make_unique<node>();
        moved->id = warmed[i]->id;
        w.replace(*warmed[i], *moved);
        warmed[i] = std::move(moved);
      }
    }
  }
  BOOST_TEST(next == 240u);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < warmed.size(); ++i) {
    if (!warmed[i]) {
      BOOST_TEST(fired.count(static_cast<int>(i)) == 0u);
      continue;
    }
    ++kept;
    BOOST_TEST(fired[static_cast<int>(i)] == deadline[i]);
  }
  BOOST_TEST(kept == 60u);
  for (std::size_t i = 0; i < every_tick.size(); ++i)
    BOOST_TEST(fired[-1 - static_cast<int>(i)] == static_cast<tick_t>(i + 1));
  BOOST_TEST(!w.has_slotted());
}

BOOST_AUTO_TEST_CASE(a_warmed_slot_comes_round_again_with_new_entries) {
  // The warmed slot (ticks 32-47's) cascades at 32, its entries all due then and
  // destroyed, and no level-0 walk runs until the same level-1 slot is next again, a
  // level-1 rotation later (288-303's): its cursors must have been dropped at 32, or
  // they would step from freed entries. 16 slots, 3 levels.
  wheel w(16, 3);
  std::vector<node> walks(15);
  one_a_tick(w, walks, 17); // level 0 walked at 17-31
  std::vector<std::unique_ptr<node>> at_32(200); // more than the cursors step past
  for (std::size_t i = 0; i < at_32.size(); ++i) {
    at_32[i] = std::make_unique<node>();
    at_32[i]->id = static_cast<int>(i);
    w.insert(*at_32[i], 32);
  }
  auto fired = run_ticks(w, 32);
  BOOST_TEST(fired.size() == 215u);
  for (const auto& e : at_32) BOOST_TEST(fired[e->id] == 32u);
  at_32.clear();
  node late, round_again;
  late.id = 100;
  round_again.id = 101;
  w.insert(late, 280);        // the next level-0 walk, with 288-303's slot next
  w.insert(round_again, 290); // in that slot
  fired = run_ticks(w, 300);
  BOOST_TEST(fired.size() == 2u);
  BOOST_TEST(fired[100] == 280u);
  BOOST_TEST(fired[101] == 290u);
}
