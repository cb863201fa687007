module asio_wheel/bench/peers/go_delay_queue

go 1.19
