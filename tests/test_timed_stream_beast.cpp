// asio_wheel::basic_timed_stream under Beast: http::async_read/async_write (a slow
// header times out), websocket::stream over it (with the two teardown overloads a user
// provides for any next layer), and, when OpenSSL is found, ssl::stream on both sides of
// it: ssl::stream<timed_stream> and basic_timed_stream<ssl::stream<tcp::socket>>; and
// Beast's test stream as the next layer. All on the manual clock, over loopback TCP
// (the test stream over memory).
// asio_wheel: requires Boost
#define BOOST_TEST_MODULE timed_stream_beast
#include <boost/test/unit_test.hpp>

#include "asio_test.hpp"
#include "manual_clock.hpp"

#include <asio_wheel/timed_stream.hpp>

#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#if ASIO_WHEEL_TEST_OPENSSL
#include <boost/asio/ssl.hpp>
#endif

#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// What Beast's websocket::stream looks up for a user-defined next layer: the timed
// stream's teardown is its next layer's (README, "asio_wheel::timed_stream").
namespace asio_wheel {
template <class NextLayer, class Executor>
void teardown(beast::role_type role, basic_timed_stream<NextLayer, Executor>& stream,
              beast::error_code& ec) {
  using beast::websocket::teardown;
  teardown(role, stream.next_layer(), ec);
}
template <class NextLayer, class Executor, class TeardownHandler>
void async_teardown(beast::role_type role, basic_timed_stream<NextLayer, Executor>& stream,
                    TeardownHandler&& handler) {
  using beast::websocket::async_teardown;
  async_teardown(role, stream.next_layer(), std::forward<TeardownHandler>(handler));
}
} // namespace asio_wheel

namespace {

const error_code timeout = asio_wheel::error::timeout;

// A manual-clock context, a timed stream accepted on loopback and its client socket.
struct fixture : asio_wheel_test::manual_context {
  tcp::acceptor acceptor{io, {asio::ip::address_v4::loopback(), 0}};
  asio_wheel::timed_stream server{io};
  tcp::socket client{io};

  fixture() {
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server.socket());
  }

  // Runs handlers until `done` holds; fails if the context runs out of work first.
  template <class Pred>
  void run_until(Pred done) {
    io.restart();
    while (!done()) {
      if (io.run_one() == 0) {
        BOOST_FAIL("the context ran out of work");
        return;
      }
    }
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(http_read_and_write_through_the_timed_stream) {
  fixture f;
  f.server.expires_after(5s);
  beast::flat_buffer buffer;
  http::request<http::string_body> req;
  bool read = false;
  error_code read_ec;
  http::async_read(f.server, buffer, req, [&](error_code ec, std::size_t) {
    read = true;
    read_ec = ec;
  });
  asio::write(f.client, asio::buffer(std::string("GET /x HTTP/1.1\r\nHost: t\r\n\r\n")));
  f.run_until([&] { return read; });
  BOOST_TEST(!read_ec);
  BOOST_TEST(std::string(req.target()) == "/x");

  http::response<http::string_body> res{http::status::ok, 11};
  res.body() = "hello";
  res.prepare_payload();
  f.server.expires_after(5s);
  bool written = false;
  error_code write_ec;
  http::async_write(f.server, res, [&](error_code ec, std::size_t) {
    written = true;
    write_ec = ec;
  });
  f.run_until([&] { return written; });
  BOOST_TEST(!write_ec);

  beast::flat_buffer cbuf;
  http::response<http::string_body> got;
  http::read(f.client, cbuf, got);
  BOOST_TEST(got.body() == "hello");
}

// Slowloris: the header arrives a byte at a time and never ends; the read's deadline
// cuts it off however much trickles in.
BOOST_AUTO_TEST_CASE(a_slow_header_times_out_the_http_read) {
  fixture f;
  f.server.expires_after(100ms);
  beast::flat_buffer buffer;
  http::request<http::string_body> req;
  int calls = 0;
  error_code read_ec;
  http::async_read(f.server, buffer, req, [&](error_code ec, std::size_t) {
    ++calls;
    read_ec = ec;
  });
  const std::string partial = "GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ";
  for (char c : partial) {
    asio::write(f.client, asio::buffer(&c, 1));
    f.advance(1ms);
    f.run_until([&] { return f.server.socket().available() == 0; });
  }
  BOOST_TEST(calls == 0);
  f.advance(100ms - std::chrono::milliseconds(partial.size()));
  BOOST_TEST(calls == 1);
  BOOST_TEST(read_ec == timeout);
  BOOST_TEST(!f.server.socket().is_open());
}

// Beast's test stream, the next layer Beast users test with, closes with close() alone
// (it has no close(ec), and names itself its lowest layer): a timeout closes it. It did
// not compile: the timed stream asked every next layer for close(ec).
BOOST_AUTO_TEST_CASE(a_next_layer_with_close_alone_is_closed_by_a_timeout) {
  asio_wheel_test::manual_context f;
  asio_wheel::basic_timed_stream<beast::test::stream> stream(f.io);
  beast::test::stream peer(f.io);
  stream.next_layer().connect(peer);
  stream.expires_after(50ms);
  std::array<char, 4> data{};
  int calls = 0;
  error_code read_ec;
  stream.async_read_some(asio::buffer(data), [&](error_code ec, std::size_t n) {
    ++calls;
    read_ec = ec;
    BOOST_TEST(n == 0u);
  });
  f.advance(49ms);
  BOOST_TEST(calls == 0);
  f.advance(1ms);
  BOOST_TEST(calls == 1);
  BOOST_TEST(read_ec == timeout);
  // The peer sees the close: its read ends with eof.
  error_code peer_ec;
  peer.async_read_some(asio::buffer(data), [&](error_code ec, std::size_t) { peer_ec = ec; });
  f.settle();
  BOOST_TEST(peer_ec == asio::error::eof);
}

BOOST_AUTO_TEST_CASE(websocket_over_the_timed_stream) {
  fixture f;
  websocket::stream<asio_wheel::timed_stream> server(std::move(f.server));
  websocket::stream<tcp::socket> client(std::move(f.client));

  bool accepted = false, connected = false;
  server.next_layer().expires_after(5s);
  server.async_accept([&](error_code ec) { accepted = !ec; });
  client.async_handshake("localhost", "/", [&](error_code ec) { connected = !ec; });
  f.run_until([&] { return accepted && connected; });

  beast::flat_buffer in;
  bool echoed = false;
  server.next_layer().expires_after(5s);
  server.async_read(in, [&](error_code ec, std::size_t) { echoed = !ec; });
  client.write(asio::buffer(std::string("ping")));
  f.run_until([&] { return echoed; });
  BOOST_TEST(beast::buffers_to_string(in.data()) == "ping");

  // The stream's deadline applies under the websocket too.
  server.next_layer().expires_after(50ms);
  int calls = 0;
  error_code read_ec;
  server.async_read(in, [&](error_code ec, std::size_t) {
    ++calls;
    read_ec = ec;
  });
  f.settle();
  f.advance(50ms);
  BOOST_TEST(calls == 1);
  BOOST_TEST(read_ec == timeout);
}

BOOST_AUTO_TEST_CASE(websocket_close_uses_the_teardown_of_the_next_layer) {
  fixture f;
  websocket::stream<asio_wheel::timed_stream> server(std::move(f.server));
  websocket::stream<tcp::socket> client(std::move(f.client));
  bool accepted = false, connected = false;
  server.async_accept([&](error_code ec) { accepted = !ec; });
  client.async_handshake("localhost", "/", [&](error_code ec) { connected = !ec; });
  f.run_until([&] { return accepted && connected; });

  // The client closes; the server's read sees the close frame, answers and tears down.
  bool server_done = false, client_done = false;
  error_code server_ec;
  beast::flat_buffer in;
  server.async_read(in, [&](error_code ec, std::size_t) {
    server_done = true;
    server_ec = ec;
  });
  client.async_close(websocket::close_code::normal, [&](error_code) { client_done = true; });
  f.run_until([&] { return server_done && client_done; });
  BOOST_TEST((server_ec == websocket::error::closed));
}

#if ASIO_WHEEL_TEST_OPENSSL
namespace {

namespace ssl = asio::ssl;

// A self-signed P-256 certificate for CN=localhost, made for this test only.
const char* const test_certificate = R"(-----BEGIN CERTIFICATE-----
MIIBfzCCASWgAwIBAgIUX9XRb3uDkymId7gOnF9Gk1Xg8A4wCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyMzE2MDkzMFoYDzIxMjYxMDMw
MTYwOTMwWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQxJdU5ZpX82ljIBoSbSchY9Uqm8ZEsddXl1Z4jPyLpHeGkiPSFboMU
faxYHfMdi9n/ikAz3XcO7EOHUoxzj+zmo1MwUTAdBgNVHQ4EFgQUYZlEcNGCZ7i/
J9K5PRT6ggtaE1UwHwYDVR0jBBgwFoAUYZlEcNGCZ7i/J9K5PRT6ggtaE1UwDwYD
VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiBj9wHG8Y+rfSxdR9EW1zJV
goCqB1NbRP3HvyVe0agoEQIhANk5zgLp0PnPxRJVyKRW1wsnYvq2SsL6i/UHxEYd
L5ZQ
-----END CERTIFICATE-----
)";
const char* const test_key = R"(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgwtnsd4Ubf6/W0igC
qKng17KUFbHPjezWxVc4+T1Q/N6hRANCAAQxJdU5ZpX82ljIBoSbSchY9Uqm8ZEs
ddXl1Z4jPyLpHeGkiPSFboMUfaxYHfMdi9n/ikAz3XcO7EOHUoxzj+zm
-----END PRIVATE KEY-----
)";

struct ssl_contexts {
  ssl::context server{ssl::context::tls_server};
  ssl::context client{ssl::context::tls_client};
  ssl_contexts() {
    server.use_certificate_chain(asio::buffer(test_certificate, std::strlen(test_certificate)));
    server.use_private_key(asio::buffer(test_key, std::strlen(test_key)), ssl::context::pem);
    client.set_verify_mode(ssl::verify_none);
  }
};

} // namespace

// The timed stream under TLS: ssl::stream<timed_stream>. The deadline applies to the
// socket reads and writes TLS makes.
BOOST_AUTO_TEST_CASE(ssl_stream_over_the_timed_stream) {
  fixture f;
  ssl_contexts ctx;
  ssl::stream<asio_wheel::timed_stream> server(std::move(f.server), ctx.server);
  ssl::stream<tcp::socket> client(std::move(f.client), ctx.client);
  bool server_ok = false, client_ok = false;
  server.next_layer().expires_after(5s);
  server.async_handshake(ssl::stream_base::server, [&](error_code ec) { server_ok = !ec; });
  client.async_handshake(ssl::stream_base::client, [&](error_code ec) { client_ok = !ec; });
  f.run_until([&] { return server_ok && client_ok; });

  std::array<char, 16> in{};
  bool got = false;
  std::size_t n = 0;
  server.next_layer().expires_after(5s);
  server.async_read_some(asio::buffer(in), [&](error_code ec, std::size_t k) {
    got = !ec;
    n = k;
  });
  asio::write(client, asio::buffer("tls", 3));
  f.run_until([&] { return got; });
  BOOST_TEST(n == 3u);

  server.next_layer().expires_after(50ms);
  int calls = 0;
  error_code read_ec;
  server.async_read_some(asio::buffer(in), [&](error_code ec, std::size_t) {
    ++calls;
    read_ec = ec;
  });
  f.settle();
  f.advance(50ms);
  BOOST_TEST(calls == 1);
  BOOST_TEST(read_ec == timeout);
  BOOST_TEST(!server.lowest_layer().is_open());
}

// TLS under the timed stream: basic_timed_stream<ssl::stream<tcp::socket>>. The
// deadline applies to whole TLS reads and writes; a timeout closes the TCP socket.
BOOST_AUTO_TEST_CASE(timed_stream_over_an_ssl_stream) {
  fixture f;
  ssl_contexts ctx;
  asio_wheel::basic_timed_stream<ssl::stream<tcp::socket>> server(std::move(f.server.socket()),
                                                                  ctx.server);
  ssl::stream<tcp::socket> client(std::move(f.client), ctx.client);
  bool server_ok = false, client_ok = false;
  server.next_layer().async_handshake(ssl::stream_base::server,
                                      [&](error_code ec) { server_ok = !ec; });
  client.async_handshake(ssl::stream_base::client, [&](error_code ec) { client_ok = !ec; });
  f.run_until([&] { return server_ok && client_ok; });

  server.expires_after(5s);
  std::array<char, 16> all{};
  bool got = false;
  asio::async_read(server, asio::buffer(all.data(), 6), [&](error_code ec, std::size_t) {
    got = !ec;
  });
  asio::write(client, asio::buffer("abcdef", 6));
  f.run_until([&] { return got; });
  BOOST_TEST(std::string(all.data(), 6) == "abcdef");

  server.expires_after(50ms);
  int calls = 0;
  error_code read_ec;
  server.async_read_some(asio::buffer(all), [&](error_code ec, std::size_t) {
    ++calls;
    read_ec = ec;
  });
  f.settle();
  f.advance(50ms);
  BOOST_TEST(calls == 1);
  BOOST_TEST(read_ec == timeout);
  BOOST_TEST(!server.lowest_layer().is_open());
}

// TLS over a timed Beast test stream, whose lowest_layer_type is private: the timed
// stream names its own from what lowest_layer() returns, which ssl::stream needs (it
// did not compile). A handshake whose peer never answers times out.
BOOST_AUTO_TEST_CASE(ssl_stream_over_a_timed_test_stream_times_out_its_handshake) {
  asio_wheel_test::manual_context f;
  ssl_contexts ctx;
  ssl::stream<asio_wheel::basic_timed_stream<beast::test::stream>> client(f.io, ctx.client);
  beast::test::stream peer(f.io);
  client.next_layer().next_layer().connect(peer);
  client.next_layer().expires_after(50ms);
  int calls = 0;
  error_code handshake_ec;
  client.async_handshake(ssl::stream_base::client, [&](error_code ec) {
    ++calls;
    handshake_ec = ec;
  });
  f.settle(); // the ClientHello is written; the read for the answer waits
  BOOST_TEST(calls == 0);
  f.advance(50ms);
  BOOST_TEST(calls == 1);
  BOOST_TEST(handshake_ec == timeout);
}
#endif // ASIO_WHEEL_TEST_OPENSSL
