package postgres

// Migrations exposes the schema migrations to the tests.
var Migrations = migrations

// SetPurgeEvery sets how many writes pass between purges until the
// returned restore is called.
func SetPurgeEvery(n int64) (restore func()) {
	old := purgeEvery
	purgeEvery = n
	return func() { purgeEvery = old }
}
