package sqlite

import "time"

// SetNow makes s read the time from now: a test steps the clock a TTL
// is measured against instead of sleeping past it.
func SetNow(s *Store, now func() time.Time) { s.now = now }
