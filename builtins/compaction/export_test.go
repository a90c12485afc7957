package compaction

import "time"

// SetClock has m read the time from now.
func SetClock(m *Middleware, now func() time.Time) { m.now = now }
