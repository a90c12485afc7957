package postgres

import (
	"context"
	"time"

	"github.com/agentc-dev/agentc/runtime"
)

// Migrations exposes the schema migrations to the tests.
var Migrations = migrations

// SetPurgeEvery sets how many writes pass between purges until the
// returned restore is called.
func SetPurgeEvery(n int64) (restore func()) {
	old := purgeEvery
	purgeEvery = n
	return func() { purgeEvery = old }
}

// SetLockWaits sets how long a migration runs before the sessions it
// waits for are logged, and how long it waits for a lock, until the
// returned restore is called.
func SetLockWaits(notice, wait time.Duration) (restore func()) {
	oldNotice, oldWait := lockNotice, migrationLockWait
	lockNotice, migrationLockWait = notice, wait
	return func() { lockNotice, migrationLockWait = oldNotice, oldWait }
}

// Wrote counts a write of s, as every write does.
func Wrote(s *Store) { s.wrote(context.Background()) }

// Purging reports whether a purge of s runs.
func Purging(s *Store) bool { return s.purging.Load() }

// AppendAs writes r under the record id id, as Append does each time it
// sends the record: only if the table does not hold that id already.
func AppendAs(ctx context.Context, s *Store, r runtime.AuditRecord, id string) error {
	vals, err := auditValues(r, id)
	if err != nil {
		return err
	}
	return s.appendOnce(ctx, vals)
}
