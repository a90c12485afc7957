package meter

import (
	"fmt"
	"strconv"
	"time"
)

// window is a meter's budget window: each span of d from the Unix epoch,
// or each calendar month (month), in UTC. The zero window is off: the
// ledgers are kept for good.
type window struct {
	d     time.Duration
	month bool
}

// Bounds of a window given as a duration.
const (
	minWindow = time.Second
	maxWindow = 366 * 24 * time.Hour
)

// parseWindow reads a meter's window: "" (none), "month", or a duration of
// whole seconds from minWindow to maxWindow.
func parseWindow(s string) (window, error) {
	switch s {
	case "":
		return window{}, nil
	case "month":
		return window{month: true}, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return window{}, fmt.Errorf(`window must be a duration such as "24h", or "month", got %q`, s)
	case d < minWindow:
		return window{}, fmt.Errorf("window must be at least %s, got %s: a budget that starts afresh more often bounds nothing", minWindow, s)
	case d > maxWindow:
		return window{}, fmt.Errorf(`window must be at most 8784h (366 days), got %s; for a budget kept for good leave window out`, s)
	case d%time.Second != 0:
		return window{}, fmt.Errorf("window must be a whole number of seconds, got %s", s)
	}
	return window{d: d}, nil
}

// on reports whether the window is set.
func (w window) on() bool { return w.month || w.d > 0 }

// at returns the start and end of the window t falls in.
func (w window) at(t time.Time) (start, end time.Time) {
	t = t.UTC()
	if w.month {
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	secs := int64(w.d / time.Second)
	s := t.Unix()
	s -= ((s % secs) + secs) % secs // floor, before the epoch too
	start = time.Unix(s, 0).UTC()
	return start, start.Add(w.d)
}

// label names the window in ledger keys: "month", or its length in
// seconds ("86400s").
func (w window) label() string {
	if w.month {
		return "month"
	}
	return strconv.FormatInt(int64(w.d/time.Second), 10) + "s"
}
