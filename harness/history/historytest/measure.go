package historytest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// BenchStorms runs a benchmark on a Storm history of each of Sizes, as
// a sub-benchmark named by its size: prepare makes, untimed, what each
// iteration runs (given its index), and the figures of Measure follow.
func BenchStorms(b *testing.B, prepare func(b *testing.B, h *history.History, l *history.Ledger) (iteration func(i int))) {
	for _, n := range Sizes() {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			h, l := Storm(n)
			iteration := prepare(b, h, l)
			cpu0 := CPUTime()
			b.ResetTimer()
			for i := range b.N {
				iteration(i)
			}
			b.StopTimer()
			Measure(b, n, cpu0)
		})
	}
}

// Sizes are the history sizes a benchmark of large histories measures:
// 100k and 1M operations, or IDEM_CHECK_BENCH_OPS (comma-separated), so
// that growth can be read from one run.
func Sizes() []int {
	v := os.Getenv("IDEM_CHECK_BENCH_OPS")
	if v == "" {
		return []int{100_000, 1_000_000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// Measure reports, for a benchmark over histories of n operations whose
// timer has stopped, the operations per second, the CPU seconds of every
// thread of the process per iteration since cpu0 (from CPUTime: on a
// shared machine the wall time says more about the neighbours) and the
// process's peak resident memory in MB (VmHWM, the generation included).
func Measure(b *testing.B, n int, cpu0 time.Duration) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if cpu := CPUTime() - cpu0; cpu > 0 {
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	}
	if hwm := PeakRSSMB(); hwm > 0 {
		b.ReportMetric(hwm, "peak-MB")
	}
}

// PeakRSSMB is the process's peak resident set in MB, from /proc (0
// where there is none).
func PeakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
