package runtime

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An unexported port field (of interface type, or a map of them) is not a
// dependency the host gives: the check skips it instead of panicking on
// reflect's refusal to read it.
func TestCheckPortsSkipsUnexportedFields(t *testing.T) {
	var nilKV *MemoryKV
	s := struct {
		KV    KV
		kv    KV
		kvs   map[string]KV
		Clock Clock
	}{kv: nilKV, kvs: map[string]KV{"a": nilKV}}
	require.NotPanics(t, func() {
		assert.NoError(t, checkPorts(reflect.ValueOf(&s).Elem(), "Deps"))
	})
	_ = s.kv
	_ = s.kvs
	s.KV = nilKV
	assert.ErrorContains(t, checkPorts(reflect.ValueOf(&s).Elem(), "Deps"), "Deps.KV is a nil *runtime.MemoryKV")
}
