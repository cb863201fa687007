module asio_wheel/bench/peers/go_timers

go 1.19
