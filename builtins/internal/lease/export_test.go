package lease

// OnJoin makes g call f with the key each time a caller starts to wait
// for a flight of it.
func OnJoin(g *Group, f func(key string)) { g.OnJoin(f) }
