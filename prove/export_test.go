package prove

import "time"

// SetBarrierGrace sets how long a copy admitted together waits for the
// others, for a test whose outcome must not depend on how soon a loaded
// machine schedules the second copy; it returns the undo.
func SetBarrierGrace(d time.Duration) (undo func()) {
	old := barrierGrace
	barrierGrace = d
	return func() { barrierGrace = old }
}
