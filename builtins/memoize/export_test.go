package memoize

// OnJoin makes m call f each time a call starts to wait for an identical
// one in flight (single_flight).
func OnJoin(m *Memoize, f func()) { m.flights.OnJoin(func(string) { f() }) }
