package idempotent

import "github.com/agentc-dev/agentc/runtime"

// KeyPrefix starts every store key of the layer.
const KeyPrefix = keyPrefix

// SuppliedKeyOf is the store key of a call of tool, in tenant, keyed on
// the idempotency key its caller supplied (no key_args).
func SuppliedKeyOf(tool, tenant, key string) string {
	return hashKey(runtime.Digester{}, "key", tool, tenant, key)
}

// PlainHashKey is the store key of parts without a digest key.
func PlainHashKey(parts ...string) string {
	return hashKey(runtime.Digester{}, parts...)
}

// MaxRepublishes bounds the results of a layer waiting to be sent again.
const MaxRepublishes = maxRepublishes

// HashKey is the store key of parts hashed with d.
func HashKey(d runtime.Digester, parts ...string) string {
	return hashKey(d, parts...)
}

// OnJoin makes m call f each time a call starts to wait for a duplicate
// of it running in this process.
func OnJoin(m *Idempotent, f func()) { m.flights.OnJoin(func(string) { f() }) }
