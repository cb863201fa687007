// asio_wheel_bench: the workloads W1..W9 and W11 of BENCHMARKS.md, and S2 (issue 13), asio_wheel::timer and
// boost::asio::steady_timer side by side in one process.
//
// Rules every workload follows:
//  - Random inputs come from fixed-seed generators and are made before the timed region.
//  - The timed region holds all the work a user pays for: aborted handlers that a cancel
//    posts are run inside it (the context is polled every 1024 ops and once at the end).
//  - Every wait started is accounted for: at the end each workload cancels what is left,
//    runs the context, and compares completions with starts. A shortfall is a lost
//    handler; a success before the expiry is an early fire. Either makes the exit status 1.
//  - Single-threaded io_context (concurrency hint 1) unless the workload says otherwise.
//  - The process's own threads: glibc's mutexes (steady_timer's, through Asio) and the
//    shard's lock skip their atomic instructions while the process has one thread, and
//    once a second thread has been created they never do again. W3, W8 and W9 create
//    threads (a watchdog, workers), so W1, W2 and W7 run before them: every W1 and W2
//    row, 10M included, is then measured in the same state. --threaded measures the
//    other state, a process with threads (as most servers are), for every workload.
//
// It compares with boost::asio::steady_timer, so standalone builds leave it out
// (bench/CMakeLists.txt reads this marker):
// asio_wheel: requires Boost
#include "bare_wheel.hpp"
#include "chained_take.hpp"
#include "churn.hpp"
#include "deadline.hpp"
#include "fire.hpp"
#include "memory.hpp"

#include <boost/version.hpp>

#include <filesystem>
#include <future>

namespace bench {
namespace {

// ---------------------------------------------------------------------------------------

void print_preamble(bench_run& b) {
  // Asio's own version too: its headers may be newer than the rest of Boost (the test
  // matrix's Boost.Asio 1.90 over Debian's Boost 1.81).
  std::printf("# asio_wheel_bench (%s mode), Boost %d.%d.%d, Asio %d.%d.%d, %s\n",
              b.cfg.quick ? "quick" : "full", BOOST_VERSION / 100000,
              BOOST_VERSION / 100 % 1000, BOOST_VERSION % 100, BOOST_ASIO_VERSION / 100000,
              BOOST_ASIO_VERSION / 100 % 1000, BOOST_ASIO_VERSION % 100, __VERSION__);
  {
    std::ifstream cpu("/proc/cpuinfo");
    for (std::string line; std::getline(cpu, line);)
      if (line.rfind("model name", 0) == 0) {
        std::printf("# cpu:%s, %u hardware threads\n", line.substr(line.find(':') + 1).c_str(),
                    std::thread::hardware_concurrency());
        break;
      }
  }
  std::printf("# sizeof(asio_wheel::timer) = %zu bytes, compact basic_timer<io_context::executor_type> "
              "= %zu bytes, sizeof(boost::asio::steady_timer) = %zu bytes\n",
              sizeof(wheel_timer), sizeof(compact_timer), sizeof(steady_timer));
  std::printf("# reps=%d ops/rep=%zu; ns/op min and median; ratio = steady_timer/this (>1: faster)\n",
              b.p.reps, b.p.ops);
  std::printf("# threads: %s\n",
              b.cfg.threaded ? "an idle second thread from the start (--threaded)"
                             : "one until W3 (W1, W2 and W7 run single-threaded)");
  row sw{"size", impl_wheel, "sizeof", 0, NAN, NAN, NAN, "bytes=" + std::to_string(sizeof(wheel_timer))};
  row sc{"size", impl_wheel, "sizeof_compact", 0, NAN, NAN, NAN,
         "bytes=" + std::to_string(sizeof(compact_timer))};
  row ss{"size", impl_steady, "sizeof", 0, NAN, NAN, NAN, "bytes=" + std::to_string(sizeof(steady_timer))};
  b.out.print_header();
  b.out.add_group({ss, sw, sc});
}

} // namespace
} // namespace bench

int main(int argc, char** argv) {
  using namespace bench;
  int code = 0;
  auto cfg = parse_args(argc, argv, code);
  if (!cfg) return code;
  bench_run b{*cfg, make_plan(*cfg), {}, {}};

  std::promise<void> stop_idle;
  std::thread idle;
  if (b.cfg.threaded) idle = std::thread([done = stop_idle.get_future()] { done.wait(); });

  print_preamble(b);
  // The single-threaded workloads first (see the top of this file).
  if (b.cfg.want("W1")) for (auto n : b.p.ns) w1_group(b, n);
  if (b.cfg.want("W2")) for (auto n : b.p.ns) w2_group(b, n);
  if (b.cfg.want("W7")) w7_run(b);
  if (b.cfg.want("W3")) for (auto n : b.p.ns) w3_group(b, n);
  if (b.cfg.want("W4")) w4_run(b);
  if (b.cfg.want("W5")) w5_run(b);
  if (b.cfg.want("W6")) w6_run(b);
  if (b.cfg.want("W8")) for (auto n : b.p.ns) w8_group(b, n);
  if (b.cfg.want("W9")) w9_run(b);
  if (b.cfg.want("W11")) w11_run(b);
  if (b.cfg.want("S2")) s2_run(b);
  if (idle.joinable()) {
    stop_idle.set_value();
    idle.join();
  }

  if (!b.cfg.csv.empty()) {
    std::error_code ec;
    auto dir = std::filesystem::path(b.cfg.csv).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (b.out.write_csv(b.cfg.csv)) std::printf("# csv: %s\n", b.cfg.csv.c_str());
    else b.fail.add("cannot write " + b.cfg.csv);
  }
  if (!b.fail.list().empty()) {
    std::printf("# %zu FAILURE(S):\n", b.fail.list().size());
    for (auto& f : b.fail.list()) std::printf("#   %s\n", f.c_str());
    return 1;
  }
  std::printf("# all completions accounted for; none early\n");
  return 0;
}
