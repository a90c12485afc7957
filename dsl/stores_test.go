package dsl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A store's timeout must be a positive duration; a bad one is reported at
// the field.
func TestStoreTimeout(t *testing.T) {
	tests := []struct {
		name, src string
		wants     []string // "line:col rule"
	}{
		{"set", `stores: s: {kind: "redis", url_env: "REDIS_URL", timeout: "250ms"}`, nil},
		{"unset", `stores: s: {kind: "redis", url_env: "REDIS_URL"}`, nil},
		{"zero", `stores: s: {kind: "redis", url_env: "REDIS_URL", timeout: "0s"}`, []string{"3:59 schema/invalid-value"}},
		{"negative", `stores: s: {kind: "postgres", url_env: "DATABASE_URL", timeout: "-2s"}`, []string{"3:65 schema/invalid-value"}},
		{"not a duration", `stores: s: {kind: "postgres", url_env: "DATABASE_URL", timeout: "soon"}`, []string{"3:65 schema/invalid-value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags, got := loadSnippet(t, tt.src)
			assert.Equal(t, tt.wants, got, "%v", diags)
			if tt.wants == nil {
				require.NotNil(t, p)
				if tt.name == "set" {
					assert.Equal(t, "250ms", p.Stores["s"].Timeout)
				} else {
					assert.Empty(t, p.Stores["s"].Timeout)
				}
			}
		})
	}
}
