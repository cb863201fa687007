// cooldown: skill cooldowns of a game, one asio_wheel::timer per skill, keys from stdin.
//
// Skills q, w, e, r have cooldowns of 14 s, 35 s, 14 s and 75 s. Casting a skill starts its
// timer; casting it again before the timer fires says how long is left; when the timer
// fires the game prints "<skill> ready". x or end of input quits.
//
// Input comes through a posix::stream_descriptor on stdin. On a terminal the game reads
// single keys (non-canonical mode, restored on exit); otherwise it reads lines, so it can be
// driven by a script: each line is a series of keys, or "advance <seconds>".
//
// With --manual-clock the wheel runs on clock_mode::manual and "advance N" moves virtual
// time forward (in steps of at most one second, running the completions of each step
// before the next, so "ready" lines come out in time order). On a terminal, t advances one
// second and T ten. --self-test feeds a built-in script through the same path (a pipe
// read by the same stream_descriptor code) and checks the output.
//
//   cooldown                          play on the real clock
//   cooldown --manual-clock < script  deterministic, instant
//   cooldown --self-test

// A Boost.Asio program: left out of standalone builds (examples/CMakeLists.txt).
// asio_wheel: requires Boost

#include <asio_wheel.hpp>

#include <boost/asio.hpp>

#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace net = boost::asio;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::seconds;
using duration = std::chrono::steady_clock::duration;
using time_point = std::chrono::steady_clock::time_point;

namespace {

void print_help() {
  std::cout << R"(usage: cooldown [options]

Skills q, w, e, r with 14 s, 35 s, 14 s and 75 s cooldowns on an asio_wheel::timer each.
Press a skill to cast it; on cooldown the game says how long is left; "<skill> ready"
when the cooldown ends. x or end of input quits.

On a terminal keys act at once. From a pipe or file, each line is a series of keys or
"advance <seconds>" (with --manual-clock).

options:
  --manual-clock   virtual time (clock_mode::manual): only "advance N" (or t / T on a
                   terminal: +1 s / +10 s) moves it
  --self-test      run a built-in script through the same input path on the manual clock
                   and check the output; exit status 0 if it matches
  --help           this text
)";
}

constexpr duration tick = 100ms;  // the wheel's resolution: plenty for a game

// Puts a terminal into single-key mode for its lifetime.
class raw_terminal {
 public:
  explicit raw_terminal(int fd) : fd_(fd) {
    if (::tcgetattr(fd_, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    active_ = ::tcsetattr(fd_, TCSANOW, &raw) == 0;
  }
  ~raw_terminal() {
    if (active_) ::tcsetattr(fd_, TCSANOW, &saved_);
  }
  raw_terminal(const raw_terminal&) = delete;
  raw_terminal& operator=(const raw_terminal&) = delete;

 private:
  int fd_;
  termios saved_{};
  bool active_ = false;
};

class game {
 public:
  // input: a descriptor the game owns; key_mode: one key at a time (terminal) or lines.
  game(net::io_context& ctx, asio_wheel::wheel_service& wheel, int input, bool key_mode,
       bool manual, std::ostream& out)
      : ctx_(ctx),
        wheel_(wheel),
        in_(ctx, input),
        key_mode_(key_mode),
        manual_(manual),
        out_(out),
        start_(wheel.now()),
        skills_{{skill('q', 14s, ctx.get_executor()), skill('w', 35s, ctx.get_executor()),
                 skill('e', 14s, ctx.get_executor()), skill('r', 75s, ctx.get_executor())}} {}

  // Called once when the game ends (to stop waiting for signals, for example).
  void on_quit(std::function<void()> f) { on_quit_ = std::move(f); }

  void start() { net::post(ctx_, [this] { step(); }); }

  // Ends the game: pending cooldowns are cancelled, the input is closed.
  void quit(const char* why) {
    if (quit_) return;
    quit_ = true;
    say("%s", why);
    for (auto& s : skills_) s.timer.cancel();
    boost::system::error_code ignored;
    in_.close(ignored);
    if (on_quit_) on_quit_();
  }

  bool settle_gave_up() const { return settle_gave_up_; }

 private:
  struct skill {
    skill(char k, seconds c, const net::any_io_executor& ex) : key(k), cooldown(c), timer(ex) {}
    char key;
    seconds cooldown;
    asio_wheel::timer timer;
    bool cooling = false;  // cast, and its "ready" has not been delivered yet
  };

  // printf-style, with the compiler checking the format against the arguments.
  [[gnu::format(printf, 2, 3)]] void say(const char* fmt, ...) {
    double t = std::chrono::duration<double>(wheel_.now() - start_).count();
    char buf[160];
    int n = std::snprintf(buf, sizeof buf, "[%7.1fs] ", t);
    std::va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), fmt, args);
    va_end(args);
    out_ << buf << '\n' << std::flush;
  }

  // Takes the next unit of input (a key, or a line) and handles it.
  void step() {
    if (quit_) return;
    if (key_mode_) {
      if (!pending_.empty()) {
        char c = pending_.front();
        pending_.erase(0, 1);
        on_key(c, [this] { after_unit(); });
        return;
      }
    } else {
      auto nl = pending_.find('\n');
      if (nl != std::string::npos || (eof_ && !pending_.empty())) {
        std::string line = pending_.substr(0, nl);
        pending_.erase(0, nl == std::string::npos ? pending_.size() : nl + 1);
        on_line(line);
        return;
      }
    }
    if (eof_) {
      quit("end of input: bye");
      return;
    }
    in_.async_read_some(net::buffer(chunk_), [this](boost::system::error_code ec,
                                                    std::size_t n) {
      if (quit_) return;
      if (ec)
        eof_ = true;  // end of input or an error: either way nothing more comes
      else
        pending_.append(chunk_.data(), n);
      step();
    });
  }

  // Called after each unit: on the manual clock, first let every completion that is due
  // run, so that its "ready" line comes before the next command's output.
  void after_unit() { settle(0); }

  void settle(int rounds) {
    if (quit_) return;
    bool waiting = false;
    if (manual_)
      for (auto& s : skills_) waiting = waiting || (s.cooling && s.timer.expiry() <= wheel_.now());
    if (waiting && rounds < 1000) {
      // A completion is on its way through the context's queue: go behind it.
      net::post(ctx_, [this, rounds] { settle(rounds + 1); });
      return;
    }
    if (waiting) settle_gave_up_ = true;  // the library never delivered it; reported
    net::post(ctx_, [this] { step(); });
  }

  void on_line(std::string_view line) {
    auto first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) return after_unit();
    line.remove_prefix(first);
    if (line.rfind("advance", 0) == 0) {
      std::string arg(line.substr(7));
      char* end = nullptr;
      double s = std::strtod(arg.c_str(), &end);
      while (end && (*end == ' ' || *end == '\t' || *end == '\r')) ++end;
      if (!manual_) {
        say("'advance' needs --manual-clock");
      } else if (end == arg.c_str() || *end != '\0' || !(s >= 0) || s > 1e6) {
        say("usage: advance <seconds>");
      } else {
        auto d = std::chrono::duration_cast<duration>(std::chrono::duration<double>(s));
        return advance(d, [this] { after_unit(); });
      }
      return after_unit();
    }
    // A series of keys; whitespace between them is ignored.
    std::string keys(line);
    run_keys(std::move(keys), 0);
  }

  void run_keys(std::string keys, std::size_t i) {
    while (i < keys.size() && std::isspace(static_cast<unsigned char>(keys[i]))) ++i;
    if (i == keys.size() || quit_) return after_unit();
    char c = keys[i];
    on_key(c, [this, keys = std::move(keys), i]() mutable { run_keys(std::move(keys), i + 1); });
  }

  void on_key(char c, std::function<void()> next) {
    if (quit_) return;
    if (c == '\n' || c == '\r' || c == ' ') return next();
    if (c == 'x' || c == 4 /* ctrl-d on a raw terminal */) return quit("bye");
    if (key_mode_ && manual_ && (c == 't' || c == 'T'))
      return advance(c == 't' ? duration(1s) : duration(10s), std::move(next));
    for (auto& s : skills_) {
      if (s.key != c) continue;
      cast(s);
      return next();
    }
    say("unknown key '%c' (skills: q w e r; x quits)", c);
    next();
  }

  void cast(skill& s) {
    if (s.cooling) {
      auto left = std::chrono::duration_cast<milliseconds>(s.timer.expiry() - wheel_.now());
      // Rounded up to a tenth: never claim it is ready sooner than it is.
      auto ms = static_cast<double>(std::max<long long>(left.count(), 0));
      double shown = std::ceil(ms / 100.0) / 10.0;
      say("%c on cooldown: %.1fs left", s.key, shown);
      return;
    }
    s.cooling = true;
    s.timer.expires_after(s.cooldown);
    s.timer.async_wait([this, &s](boost::system::error_code ec) {
      if (ec) return;  // cancelled: the game ended
      s.cooling = false;
      say("%c ready", s.key);
    });
    say("%c cast (cooldown %llds)", s.key, static_cast<long long>(s.cooldown.count()));
  }

  // Manual clock: moves time by d in steps of at most a second, settling after each.
  void advance(duration d, std::function<void()> next) {
    if (quit_) return;
    if (d <= duration::zero()) return next();
    duration step = std::min<duration>(d, 1s);
    wheel_.advance(step);
    advance_settle(d - step, std::move(next), 0);
  }

  void advance_settle(duration rest, std::function<void()> next, int rounds) {
    if (quit_) return;
    bool waiting = false;
    for (auto& s : skills_) waiting = waiting || (s.cooling && s.timer.expiry() <= wheel_.now());
    if (waiting && rounds < 1000) {
      net::post(ctx_, [this, rest, next = std::move(next), rounds]() mutable {
        advance_settle(rest, std::move(next), rounds + 1);
      });
      return;
    }
    if (waiting) settle_gave_up_ = true;
    net::post(ctx_, [this, rest, next = std::move(next)]() mutable {
      advance(rest, std::move(next));
    });
  }

  net::io_context& ctx_;
  asio_wheel::wheel_service& wheel_;
  net::posix::stream_descriptor in_;
  bool key_mode_;
  bool manual_;
  std::ostream& out_;
  time_point start_;
  std::array<skill, 4> skills_;
  std::array<char, 256> chunk_{};
  std::string pending_;  // read but not yet handled
  bool eof_ = false;
  bool quit_ = false;
  bool settle_gave_up_ = false;
  std::function<void()> on_quit_;
};

// Runs one game on `input` (owned) until it ends; false if something went wrong.
bool play(int input, bool key_mode, bool manual, std::ostream& out) {
  net::io_context ctx(1);
  asio_wheel::wheel_options opts;
  opts.tick = tick;
  if (manual) opts.clock = asio_wheel::clock_mode::manual;
  auto& wheel = asio_wheel::install(ctx, opts);
  game g(ctx, wheel, input, key_mode, manual, out);
  net::signal_set signals(ctx, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code ec, int) {
    if (!ec) g.quit("interrupted: bye");
  });
  g.on_quit([&] {
    boost::system::error_code ignored;
    signals.cancel(ignored);
  });
  g.start();
  ctx.run();  // returns once the game has quit: no cooldown, read or signal wait is left
  if (g.settle_gave_up())
    std::cerr << "cooldown: a due cooldown was never delivered (library problem)\n";
  return !g.settle_gave_up();
}

// The self-test script and the output it must give: (seconds, text) per line.
const char* const test_script =
    "q\n"
    "w\n"
    "advance 5\n"
    "q\n"
    "e\n"
    "advance 9\n"
    "q r\n"
    "advance 4.5\n"
    "e\n"
    "advance 0.5\n"
    "z\n"
    "advance 16\n"
    "wr\n"
    "advance 60\n"
    "r\n"
    "x\n"
    "q\n";  // after x: must be ignored

const std::vector<std::pair<double, std::string>> test_expected = {
    {0.0, "q cast (cooldown 14s)"},
    {0.0, "w cast (cooldown 35s)"},
    {5.0, "q on cooldown: 9.0s left"},
    {5.0, "e cast (cooldown 14s)"},
    {14.0, "q ready"},
    {14.0, "q cast (cooldown 14s)"},
    {14.0, "r cast (cooldown 75s)"},
    {18.5, "e on cooldown: 0.5s left"},
    {19.0, "e ready"},
    {19.0, "unknown key 'z' (skills: q w e r; x quits)"},
    {28.0, "q ready"},
    {35.0, "w ready"},
    {35.0, "w cast (cooldown 35s)"},
    {35.0, "r on cooldown: 54.0s left"},
    {70.0, "w ready"},
    {89.0, "r ready"},
    {95.0, "r cast (cooldown 75s)"},
    {95.0, "bye"},
};

int self_test() {
  // The script goes through a pipe and the same stream_descriptor code as stdin would.
  int fds[2];
  if (::pipe(fds) != 0) {
    std::perror("cooldown: pipe");
    return 1;
  }
  std::string_view script = test_script;  // far below the pipe's capacity
  if (::write(fds[1], script.data(), script.size()) != static_cast<ssize_t>(script.size())) {
    std::perror("cooldown: write");
    return 1;
  }
  ::close(fds[1]);
  std::ostringstream out;
  bool delivered = play(fds[0], /*key_mode=*/false, /*manual=*/true, out);
  std::cout << out.str();

  // Each line must match the expected text; its time may be late by at most one tick.
  std::vector<std::pair<double, std::string>> got;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    double t = 0;
    auto close = line.find("s] ");
    if (line.empty() || line[0] != '[' || close == std::string::npos ||
        std::sscanf(line.c_str() + 1, "%lf", &t) != 1) {
      got.emplace_back(-1, line);
      continue;
    }
    got.emplace_back(t, line.substr(close + 3));
  }
  bool ok = delivered && got.size() == test_expected.size();
  const double tick_s = std::chrono::duration<double>(tick).count();
  for (std::size_t i = 0; i < std::min(got.size(), test_expected.size()); ++i) {
    auto& [t, text] = got[i];
    auto& [want_t, want_text] = test_expected[i];
    bool line_ok = text == want_text && t >= want_t - 1e-9 && t <= want_t + tick_s + 1e-9;
    if (!line_ok)
      std::printf("mismatch at line %zu: got [%.1fs] %s, expected [%.1fs] %s\n", i + 1, t,
                  text.c_str(), want_t, want_text.c_str());
    ok = ok && line_ok;
  }
  if (got.size() != test_expected.size())
    std::printf("got %zu lines, expected %zu\n", got.size(), test_expected.size());
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool manual = false, test = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      print_help();
      return 0;
    } else if (a == "--manual-clock") {
      manual = true;
    } else if (a == "--self-test") {
      test = true;
    } else {
      std::cerr << "cooldown: unknown argument '" << a << "' (try --help)\n";
      return 2;
    }
  }
  try {
    if (test) return self_test();
    int input = ::dup(STDIN_FILENO);  // the game closes its copy, never stdin itself
    if (input < 0) {
      std::perror("cooldown: dup");
      return 1;
    }
    bool tty = ::isatty(STDIN_FILENO) != 0;
    std::optional<raw_terminal> raw;
    if (tty) {
      raw.emplace(STDIN_FILENO);
      std::cout << "skills: q (14s) w (35s) e (14s) r (75s); x quits"
                << (manual ? "; t: +1 s, T: +10 s" : "") << "\n";
    }
    return play(input, /*key_mode=*/tty, manual, std::cout) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "cooldown: " << e.what() << "\n";
    return 1;
  }
}
