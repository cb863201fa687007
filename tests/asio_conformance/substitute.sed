# Turns Asio's test/system_timer.cpp into a test of asio_wheel::timer (see run.sh).
# Our header comes first, where the test checks that its timer's header is self-contained.
s|^#include <boost/asio/system_timer\.hpp>$|#include <asio_wheel/timer.hpp>\n#include "asio_conformance.hpp"|
s/boost::asio::system_timer/asio_wheel::timer/g
s/boost::asio::basic_waitable_timer</asio_wheel_conformance::basic_waitable_timer</g
