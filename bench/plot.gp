# Plots asio_wheel_bench's CSV: median ns/op against N (log-log) for W1 and W2, one line
# per implementation and variant.
#   gnuplot -e "csv='bench/results/latest.csv'; out='bench/results/latest.png'" bench/plot.gp
if (!exists("csv")) csv = 'bench/results/latest.csv'
if (!exists("out")) out = 'bench/results/latest.png'

set terminal pngcairo size 1200,500 font ",10"
set output out

# Rows "workload,impl,variant,N,min_ns,median_ns,..." of one series, as "N median", by N.
series(w, i, v) = sprintf("< awk -F, '$1==\"%s\" && $2==\"%s\" && $3==\"%s\" && $6!=\"\" {print $4, $6}' '%s' | sort -n", w, i, v, csv)

set logscale xy
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set xlabel "N (waits pending)"
set ylabel "ns per op (median)"
set format x "10^{%L}"
set key top left
set xrange [5e3:2e7]

set multiplot layout 1,2 title "asio\\_wheel vs boost::asio::steady\\_timer (lower is better)"

set title "W1 churn: start a wait, cancel it, run its aborted handler"
plot series("W1", "steady_timer", "cancel") using 1:2 with linespoints lw 2 pt 7 title "steady\\_timer", \
     series("W1", "asio_wheel", "cancel")   using 1:2 with linespoints lw 2 pt 5 title "asio\\_wheel", \
     series("W1", "asio_wheel", "cancel_locking_off") using 1:2 with linespoints lw 2 pt 9 title "asio\\_wheel, locking = off"

set title "W2 idle reset: push a random pending timer's deadline"
plot series("W2", "steady_timer", "expires_after") using 1:2 with linespoints lw 2 pt 7 title "steady\\_timer expires\\_after+async\\_wait", \
     series("W2", "asio_wheel", "drop_in")        using 1:2 with linespoints lw 2 pt 9 title "asio\\_wheel expires\\_after+async\\_wait", \
     series("W2", "asio_wheel", "reset_after")    using 1:2 with linespoints lw 2 pt 5 title "asio\\_wheel reset\\_after"

unset multiplot
