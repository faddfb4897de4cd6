// Command benchratio reads `go test -bench` output of the bench package
// (BenchmarkStores/<backend>/<op>/g=<n>) and prints one table: for each
// backend, concurrency and store operation, its mean latency, its
// baselines' (measured interleaved with it in the same run: a raw write
// for claim, complete and takeover; a primary-key read for replay,
// in-flight and mismatch; a ping where the backend has one; for those
// three on Redis, a script whose only work is the same read), and the
// store's throughput as a fraction of each baseline's. 1.00 is the
// physical cost of the round trip; ratios, unlike absolute times, survive
// a noisy shared machine. With -count > 1 each figure is the median of the
// runs.
//
// Usage: go test -run '^$' -bench . ./bench | tee bench.txt; benchratio bench.txt
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// line matches one result's name and iterations; the metrics follow.
var line = regexp.MustCompile(`^BenchmarkStores/([^/\s]+)/([^/\s]+)/g=(\d+)(?:-\d+)?\s+\d+\s+(.*)$`)

// order is the order operations are printed in.
var order = []string{"claim", "complete", "takeover", "replay", "in-flight", "mismatch"}

type group struct {
	backend string
	g       int
}

func main() {
	var in io.Reader = os.Stdin
	if len(os.Args) > 1 {
		var rs []io.Reader
		for _, p := range os.Args[1:] {
			f, err := os.Open(p)
			if err != nil {
				fmt.Fprintln(os.Stderr, "benchratio:", err)
				os.Exit(2)
			}
			defer f.Close()
			rs = append(rs, f)
		}
		in = io.MultiReader(rs...)
	}
	ns, groups, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(2)
	}
	if len(groups) == 0 {
		fmt.Fprintln(os.Stderr, "benchratio: no BenchmarkStores results in the input")
		os.Exit(2)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "backend\tgoroutines\top\tstore µs\tbaseline\traw µs\tstore/raw\tping µs\tstore/ping\tscript µs\tstore/script\t")
	for _, gr := range groups {
		for _, op := range order {
			m, ok := ns[gr][op]
			if !ok {
				continue
			}
			base, rawCol, ratio := "-", "-", "-"
			for _, b := range []string{"raw-write", "raw-read"} {
				if r, ok := m[b+"-ns/op"]; ok {
					base, rawCol, ratio = b, micros(r), fmt.Sprintf("%.2f", m["store/"+b])
				}
			}
			pingCol, pratio := column(m, "raw-ping")
			scriptCol, sratio := column(m, "raw-script")
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", gr.backend, gr.g, op, micros(m[op+"-ns/op"]), base, rawCol, ratio, pingCol, pratio, scriptCol, sratio)
		}
	}
	w.Flush()
}

// column is a baseline's latency and the store's ratio to it, "-" where
// the run did not measure it.
func column(m map[string]float64, baseline string) (micro, ratio string) {
	r, ok := m[baseline+"-ns/op"]
	if !ok {
		return "-", "-"
	}
	return micros(r), fmt.Sprintf("%.2f", m["store/"+baseline])
}

// parse returns the median of each metric of each (backend, goroutines,
// op), and the groups in the order first seen.
func parse(r io.Reader) (map[group]map[string]map[string]float64, []group, error) {
	runs := map[group]map[string]map[string][]float64{}
	var groups []group
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		g, _ := strconv.Atoi(m[3])
		k := group{m[1], g}
		if runs[k] == nil {
			runs[k] = map[string]map[string][]float64{}
			groups = append(groups, k)
		}
		if runs[k][m[2]] == nil {
			runs[k][m[2]] = map[string][]float64{}
		}
		f := strings.Fields(m[4])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%q: %w", sc.Text(), err)
			}
			runs[k][m[2]][f[i+1]] = append(runs[k][m[2]][f[i+1]], v)
		}
	}
	out := map[group]map[string]map[string]float64{}
	for k, ops := range runs {
		out[k] = map[string]map[string]float64{}
		for op, metrics := range ops {
			out[k][op] = map[string]float64{}
			for unit, vs := range metrics {
				out[k][op][unit] = median(vs)
			}
		}
	}
	return out, groups, sc.Err()
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func micros(ns float64) string {
	return strconv.FormatFloat(ns/1000, 'f', 2, 64)
}
