package predicate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// schema reads a JSON Schema from testdata.
func schema(t testing.TB, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".schema.json"))
	require.NoError(t, err)
	return b
}

// toolEnv builds a before-phase tool environment typed by the named testdata schemas.
func toolEnv(t testing.TB, names ...string) *Env {
	t.Helper()
	var schemas []json.RawMessage
	for _, n := range names {
		schemas = append(schemas, schema(t, n))
	}
	env, err := NewEnv(EnvConfig{Stage: Tool, ArgsSchemas: schemas})
	require.NoError(t, err)
	return env
}

// mustEnv builds an environment or fails the test.
func mustEnv(t testing.TB, cfg EnvConfig) *Env {
	t.Helper()
	env, err := NewEnv(cfg)
	require.NoError(t, err)
	return env
}

// mustCompile compiles src or fails the test with its issues.
func mustCompile(t testing.TB, env *Env, src string) *Program {
	t.Helper()
	p, iss := env.Compile(src)
	require.Empty(t, iss, "compile %q", src)
	require.NotNil(t, p)
	return p
}

// jsonArgs decodes tool arguments the way a service does: numbers as float64.
func jsonArgs(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m))
	return m
}

// jsonNumberArgs decodes tool arguments with numbers as json.Number.
func jsonNumberArgs(t testing.TB, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var m map[string]any
	require.NoError(t, d.Decode(&m))
	return m
}

// ruleIDs lists the rules of issues.
func ruleIDs(iss []Issue) []string {
	var out []string
	for _, i := range iss {
		out = append(out, i.Rule)
	}
	return out
}
