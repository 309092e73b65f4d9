# Sourced by the shell benchmarks: samples in, one printed line and one JSON line out.
#   stats_line NAME UNIT [BASELINE_NAME] < samples   (one number a line)
# prints "NAME  median p99 min max (n)" and appends
#   {"name":…,"unit":…,"median":…,"p99":…,"min":…,"max":…,"n":…}
# to "$bench_json" when that is set (JSON Lines, json_line below; scripts/bench.sh gathers them).
# cpu_ticks PID: utime+stime of a live process in clock ticks (/proc/PID/stat).
# now_us: wall clock in microseconds.
now_us() { echo $(($(date +%s%N) / 1000)); }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
clk_tck=$(getconf CLK_TCK)
# json_line NAME UNIT MEDIAN P99 MIN MAX N: appends one figure as a JSON line to "$bench_json"
# when that is set (the one place the figures' JSON line is written, for every shell bench).
json_line() {
  [[ -n "${bench_json:-}" ]] || return 0
  awk -v name="$1" -v unit="$2" -v med="$3" -v p99="$4" -v min="$5" -v max="$6" -v n="$7" 'BEGIN {
    gsub(/"/, "\\\"", name)
    printf "{\"name\":\"%s\",\"unit\":\"%s\",\"median\":%.4f,\"p99\":%.4f,\"min\":%.4f,\"max\":%.4f,\"n\":%d}\n", name, unit, med, p99, min, max, n
  }' >>"$bench_json"
}
stats_line() {
  local name=$1 unit=$2 out
  out=$(sort -g | awk -v name="$name" -v unit="$unit" '
    { a[NR] = $1 }
    END {
      if (NR == 0) exit
      med = a[int((NR + 1) / 2)]; p99 = a[int(NR * 0.99 + 0.999)]; if (p99 == "") p99 = a[NR]
      printf "  %-52s median %10.2f  p99 %10.2f  min %10.2f  max %10.2f %s (n=%d)\n", name, med, p99, a[1], a[NR], unit, NR
      printf "%.4f %.4f %.4f %.4f %d\n", med, p99, a[1], a[NR], NR
    }')
  [[ -n "$out" ]] || return 0
  printf '%s\n' "${out%$'\n'*}"
  local figures
  read -r -a figures <<<"${out##*$'\n'}"
  json_line "$name" "$unit" "${figures[@]}"
}
