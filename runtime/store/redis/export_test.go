package redis

// SetRecordsPage has Records read n audit entries a page until the test
// ends.
func SetRecordsPage(n int64, cleanup func(func())) {
	old := recordsPage
	recordsPage = n
	cleanup(func() { recordsPage = old })
}

// NextStreamID is nextStreamID.
var NextStreamID = nextStreamID
