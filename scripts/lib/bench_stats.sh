# Sourced by the shell benchmarks: samples in, one printed line and one JSON line out.
#   stats_line NAME UNIT [BASELINE_NAME] < samples   (one number a line)
# prints "NAME  median p99 min max (n)" and appends
#   {"name":…,"unit":…,"median":…,"p99":…,"min":…,"max":…,"n":…}
# to "$bench_json" when that is set (JSON Lines; scripts/bench.sh gathers them).
# cpu_ticks PID: utime+stime of a live process in clock ticks (/proc/PID/stat).
# now_us: wall clock in microseconds.
now_us() { echo $(($(date +%s%N) / 1000)); }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
clk_tck=$(getconf CLK_TCK)
stats_line() {
  local name=$1 unit=$2
  sort -g | awk -v name="$name" -v unit="$unit" -v json="${bench_json:-}" '
    { a[NR] = $1 }
    END {
      if (NR == 0) exit
      med = a[int((NR + 1) / 2)]; p99 = a[int(NR * 0.99 + 0.999)]; if (p99 == "") p99 = a[NR]
      printf "  %-52s median %10.2f  p99 %10.2f  min %10.2f  max %10.2f %s (n=%d)\n", name, med, p99, a[1], a[NR], unit, NR
      if (json != "") {
        gsub(/"/, "\\\"", name)
        printf "{\"name\":\"%s\",\"unit\":\"%s\",\"median\":%.4f,\"p99\":%.4f,\"min\":%.4f,\"max\":%.4f,\"n\":%d}\n", name, unit, med, p99, a[1], a[NR], NR >> json
      }
    }'
}
