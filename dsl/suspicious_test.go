package dsl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Values the schema accepts but that are almost surely slips are warnings
// at the field, with the fix in the message; the policy still loads.
func TestSuspiciousValuesWarn(t *testing.T) {
	for name, tt := range map[string]struct {
		src     string
		want    string // "line:col" of the warning; empty: none
		message []string
	}{
		"price per token": {`models: m: {usd_per_mtok_in: 0.000003}`, "3:30",
			[]string{"models.m.usd_per_mtok_in: 0.000003 is a price per token", "did you mean 3 (per million)?"}},
		"cached price per token": {`models: m: {usd_per_mtok_in: 3, usd_per_mtok_cached: 0.0000003}`, "3:54",
			[]string{"usd_per_mtok_cached", "did you mean 0.3 (per million)?"}},
		"cheap price per million": {`models: m: {usd_per_mtok_in: 0.01, usd_per_mtok_out: 0.001}`, "", nil},
		"one attempt": {`chains: chat: [{use: "retry", max_attempts: 1}]`, "3:45",
			[]string{"chains.chat[0].max_attempts", "never retries", "raise max_attempts"}},
		"one attempt with breaker": {`chains: chat: [{use: "retry", max_attempts: 1, breaker: failures: 2}]`, "", nil},
		"one attempt with timeout": {`chains: chat: [{use: "retry", max_attempts: 1, attempt_timeout: "5s"}]`, "", nil},
		"redis password": {`stores: s: {kind: "redis", url: "redis://:secret@h:6379/0"}`, "3:33",
			[]string{"stores.s.url holds a password", "url_env"}},
		"postgres password":  {`stores: s: {kind: "postgres", url: "postgres://u:pw@h/db"}`, "3:36", []string{"url_env"}},
		"postgres user only": {`stores: s: {kind: "postgres", url: "postgres://u@h/db?sslmode=disable"}`, "", nil},
		"webhook password": {`state: fields: a: {schema: {type: "string"}, background: [{sink: "webhook", url: "https://hook:tok3n@hooks.internal/x"}]}`, "3:82",
			[]string{"state.fields.a.background[0].url holds a password", "url_env"}},
		"webhook": {`state: fields: a: {schema: {type: "string"}, background: [{sink: "webhook", url: "https://hooks.internal/x"}]}`, "", nil},
	} {
		t.Run(name, func(t *testing.T) {
			p, diags, got := loadSnippet(t, tt.src)
			require.NotNil(t, p, "%v", diags)
			if tt.want == "" {
				assert.Empty(t, diags)
				return
			}
			require.Equal(t, []string{tt.want + " schema/invalid-value"}, got, "%v", diags)
			assert.Equal(t, Warning, diags[0].Severity)
			for _, m := range tt.message {
				assert.Contains(t, diags[0].Message, m)
			}
		})
	}
}

func TestURLHasPassword(t *testing.T) {
	for raw, want := range map[string]bool{
		"redis://:secret@host:6379/0":             true,
		"redis://user:secret@host:6379/0":         true,
		"rediss://default:p%40ss@host:6380":       true,
		"postgres://user:pw@host/db":              true,
		"postgres://host/db?user=u&password=pw":   true,
		"host=db user=app password=pw dbname=app": true,
		"host=db password='a b' dbname=app":       true,
		"postgres://user:p w@host/db":             true, // url.Parse refuses it
		"redis://host:6379/0":                     false,
		"postgres://user@host/db?sslmode=require": false,
		"postgres://user:@host/db":                false,
		"host=db user=app dbname=app":             false,
		"postgres://host/db?passfile=/etc/pgpass": false,
		"unix:///var/run/redis.sock":              false,
	} {
		assert.Equal(t, want, urlHasPassword(raw), raw)
	}
}
