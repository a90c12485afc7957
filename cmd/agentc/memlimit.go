package main

import (
	"fmt"
	"io"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// defaultMaxMemory bounds the live heap of the CLI (AGENTC_MAX_MEMORY):
// CUE's evaluation cannot be interrupted, so a policy or a CUE scenario that
// allocates without end (list.Range(0, 1e9, 1)) would grow until its
// deadline; the watchdog ends the process first.
const defaultMaxMemory int64 = 1 << 30

// parseBytes reads a size such as 512MiB, 1GiB, 800MB or a plain number of
// bytes.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("want a positive size such as 512MiB or 2GiB")
	}
	return n * mult, nil
}

// maxMemory returns the live-heap bound from AGENTC_MAX_MEMORY, else the
// default.
func maxMemory() (int64, error) {
	v := os.Getenv("AGENTC_MAX_MEMORY")
	if v == "" {
		return defaultMaxMemory, nil
	}
	n, err := parseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("AGENTC_MAX_MEMORY=%q: %v", v, err)
	}
	return n, nil
}

// watchMemory samples the live heap (as of the last collection) every
// interval and, once it exceeds limit, reports it on stderr and ends the
// process with exit code 2. It never returns.
func watchMemory(limit int64, interval time.Duration, stderr io.Writer, exit func(int)) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	for range time.Tick(interval) {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		if live := int64(sample[0].Value.Uint64()); live > limit {
			fmt.Fprintf(stderr, "agentc: the evaluation holds more than %s of memory (AGENTC_MAX_MEMORY); simplify the policy or scenario, or raise the limit\n", formatBytes(limit))
			exit(exitUsage)
			return
		}
	}
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
