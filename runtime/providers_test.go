package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// keyEcho is a provider whose client answers with the model id and whether
// it received the key, for the Build tests.
func init() {
	runtime.RegisterProvider("key_echo", func(_ context.Context, m runtime.ProviderModel) (runtime.ModelClient, error) {
		return runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
			yield(runtime.Delta{Text: m.Model.ID + " key=" + m.APIKey})
			return nil
		}), nil
	})
}

func providerPlan(models map[string]plan.Model) *plan.Plan {
	return &plan.Plan{Version: plan.Version, Policy: "p", Models: models}
}

func TestBuildMakesProviderModels(t *testing.T) {
	t.Setenv("AGENTC_TEST_KEY", "s3cret")
	p := providerPlan(map[string]plan.Model{
		"primary": {Provider: "key_echo", ID: "m-1", APIKeyEnv: "AGENTC_TEST_KEY"},
		"hosted":  {},
	})
	hosted := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "host"})
		return nil
	})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"hosted": hosted}})
	require.NoError(t, err)
	defer pl.Close()
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
	require.NoError(t, err)
	assert.Equal(t, "m-1 key=s3cret", resp.Text)
	resp, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "hosted"})
	require.NoError(t, err)
	assert.Equal(t, "host", resp.Text)
}

func TestBuildHostModelWinsOverProvider(t *testing.T) {
	// The variable is unset: a host's own client means it is never read.
	p := providerPlan(map[string]plan.Model{"primary": {Provider: "key_echo", ID: "m-1", APIKeyEnv: "AGENTC_TEST_UNSET_KEY"}})
	mine := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "mine"})
		return nil
	})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": mine}})
	require.NoError(t, err)
	defer pl.Close()
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary"})
	require.NoError(t, err)
	assert.Equal(t, "mine", resp.Text)
}

func TestBuildFailsOnMissingKeyOrProvider(t *testing.T) {
	t.Setenv("AGENTC_TEST_EMPTY_KEY", "")
	for _, tc := range []struct {
		name string
		m    plan.Model
		want string
	}{
		{"unset", plan.Model{Provider: "key_echo", ID: "x", APIKeyEnv: "AGENTC_TEST_UNSET_KEY"},
			`build models: model "primary": environment variable AGENTC_TEST_UNSET_KEY (its api_key_env) is not set`},
		{"empty", plan.Model{Provider: "key_echo", ID: "x", APIKeyEnv: "AGENTC_TEST_EMPTY_KEY"},
			`model "primary": environment variable AGENTC_TEST_EMPTY_KEY (its api_key_env) is not set`},
		{"unregistered", plan.Model{Provider: "nope", ID: "x"},
			`model "primary": provider "nope" is not registered`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runtime.Build(context.Background(), providerPlan(map[string]plan.Model{"primary": tc.m}), runtime.Deps{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Every unset key variable is named at once, so that a first start does
// not stop at one missing variable, then at the next.
func TestBuildNamesEveryUnsetKey(t *testing.T) {
	p := providerPlan(map[string]plan.Model{
		"primary": {Provider: "key_echo", ID: "a", APIKeyEnv: "AGENTC_TEST_UNSET_KEY_A"},
		"backup":  {Provider: "key_echo", ID: "b", APIKeyEnv: "AGENTC_TEST_UNSET_KEY_B"},
		"local":   {Provider: "key_echo", ID: "c"},
	})
	_, err := runtime.ProviderModels(context.Background(), p, nil)
	require.EqualError(t, err, `model "backup": environment variable AGENTC_TEST_UNSET_KEY_B (its api_key_env) is not set
model "primary": environment variable AGENTC_TEST_UNSET_KEY_A (its api_key_env) is not set`)
}

// A call to a model that has no client names the models that have one,
// with the nearest: a host's misspelt model name is found at once.
func TestUnknownModelNamesTheModels(t *testing.T) {
	echo := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "ok"})
		return nil
	})
	p := providerPlan(map[string]plan.Model{"primary": {}, "backup": {}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": echo, "backup": echo}})
	require.NoError(t, err)
	defer pl.Close()
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primry"})
	require.EqualError(t, err, `model "primry" is not registered; did you mean "primary"? (the models: backup, primary)`)
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "gpt-4o"})
	require.EqualError(t, err, `model "gpt-4o" is not registered (the models: backup, primary)`)
}

// A call to a model the plan declares that no client serves (no
// Deps.Models entry, no provider), or to a declared tool without its
// function, says what to give: a host that forgot one learns how to fix it.
func TestDeclaredModelWithoutClientSaysWhatToGive(t *testing.T) {
	echo := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "ok"})
		return nil
	})
	p := providerPlan(map[string]plan.Model{"primary": {}, "backup": {}})
	p.Tools = map[string]plan.Tool{"refund": {}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": echo}})
	require.NoError(t, err)
	defer pl.Close()
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "backup"})
	require.EqualError(t, err, `model "backup" is not registered: the plan declares it, but no client serves it (give its client in runtime.Deps.Models, or declare its provider in the policy)`)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "refund"})
	require.EqualError(t, err, `tool "refund" is not registered (give its function in runtime.Deps.Tools)`)
}

func TestRegisterProviderRefusesDuplicates(t *testing.T) {
	assert.Contains(t, runtime.Providers(), "key_echo")
	assert.Panics(t, func() {
		runtime.RegisterProvider("key_echo", func(context.Context, runtime.ProviderModel) (runtime.ModelClient, error) { return nil, nil })
	})
	assert.Panics(t, func() { runtime.RegisterProvider("Bad Name", nil) })
}

// closingModel is a model client that counts its Close calls.
type closingModel struct {
	runtime.ModelFunc
	closed *atomic.Int64
}

func (m closingModel) Close() error { m.closed.Add(1); return nil }

var providerCloses atomic.Int64

func init() {
	runtime.RegisterProvider("closing", func(_ context.Context, _ runtime.ProviderModel) (runtime.ModelClient, error) {
		return closingModel{ModelFunc: func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
			yield(runtime.Delta{Text: "ok"})
			return nil
		}, closed: &providerCloses}, nil
	})
}

// Close closes the clients Build made (their idle connections), once, and
// leaves the host's own clients open; a failed Build closes those it made.
func TestCloseClosesTheClientsBuildMade(t *testing.T) {
	providerCloses.Store(0)
	var hostCloses atomic.Int64
	host := closingModel{ModelFunc: func(context.Context, *runtime.ChatRequest, func(runtime.Delta) bool) error { return nil }, closed: &hostCloses}
	p := providerPlan(map[string]plan.Model{"a": {Provider: "closing", ID: "x"}, "b": {Provider: "closing", ID: "y"}, "mine": {Provider: "closing", ID: "z"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"mine": host}})
	require.NoError(t, err)
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "a"})
	require.NoError(t, err)
	assert.Equal(t, "ok", resp.Text)
	assert.Zero(t, providerCloses.Load())
	require.NoError(t, pl.Close())
	require.NoError(t, pl.Close())
	assert.Equal(t, int64(2), providerCloses.Load(), "each client Build made is closed once")
	assert.Zero(t, hostCloses.Load(), "a host's client is the host's to close")

	providerCloses.Store(0)
	p.Settings.RunIdle = "soon"
	_, err = runtime.Build(context.Background(), p, runtime.Deps{})
	require.ErrorContains(t, err, "settings.run_idle")
	assert.Equal(t, int64(3), providerCloses.Load(), "a failed build closes the clients it made")
}

// Build names every variable it lacks in one error: the models' keys, the
// stores' url_env, settings.digest_key_env and the webhook sinks' url_env,
// so that a deploy sets them all in one go rather than one per start.
func TestBuildNamesEveryUnsetVariable(t *testing.T) {
	p := providerPlan(map[string]plan.Model{
		"primary": {Provider: "key_echo", ID: "a", APIKeyEnv: "AGENTC_TEST_UNSET_KEY_A"},
	})
	p.Stores = map[string]plan.Store{
		"shared": {Kind: "redis", URLEnv: "AGENTC_TEST_UNSET_REDIS"},
		"trail":  {Kind: "postgres", URLEnv: "AGENTC_TEST_UNSET_PG"},
		"given":  {Kind: "memory", URLEnv: "AGENTC_TEST_UNSET_GIVEN"},
	}
	p.Chains.Tool = []plan.Layer{
		{Use: "meter", Config: []byte(`{"budget":{"calls":5},"store":"shared"}`)},
		{Use: "audit", Config: []byte(`{"sink":"trail"}`)},
		{Use: "idempotent", Config: []byte(`{"store":"given"}`)},
	}
	p.Settings.DigestKeyEnv = "AGENTC_TEST_UNSET_DIGEST"
	p.State = &plan.State{Fields: map[string]plan.StateField{
		"limit": {Background: []plan.StateSink{{Sink: "log"}, {Sink: "webhook", URLEnv: "AGENTC_TEST_UNSET_HOOK"}}},
	}}
	deps := runtime.Deps{Backends: map[string]runtime.StoreBackend{"given": runtime.NewMemoryStore()}}
	for range 2 {
		_, err := runtime.Build(context.Background(), p, deps)
		require.EqualError(t, err, `build models: model "primary": environment variable AGENTC_TEST_UNSET_KEY_A (its api_key_env) is not set
build settings.digest_key_env: environment variable AGENTC_TEST_UNSET_DIGEST is not set
build state.fields.limit.background[1]: environment variable AGENTC_TEST_UNSET_HOOK (its url_env) is not set
build stores.shared: environment variable AGENTC_TEST_UNSET_REDIS (its url_env) is not set
build stores.trail: environment variable AGENTC_TEST_UNSET_PG (its url_env) is not set`)
	}
}

// A declared store that nothing opens (a turn chain's checkpoint store,
// under a gateway that runs no turn) is never read: its unset url_env
// fails no Build, while one a layer, a state sink or the grounding record
// opens does, with the others.
func TestBuildNamesOnlyTheStoresItOpens(t *testing.T) {
	p := providerPlan(map[string]plan.Model{"primary": {}})
	p.Stores = map[string]plan.Store{
		"runs":    {Kind: "postgres", URLEnv: "AGENTC_TEST_UNSET_RUNS"},
		"ledger":  {Kind: "redis", URLEnv: "AGENTC_TEST_UNSET_LEDGER"},
		"events":  {Kind: "postgres", URLEnv: "AGENTC_TEST_UNSET_EVENTS"},
		"grounds": {Kind: "postgres", URLEnv: "AGENTC_TEST_UNSET_GROUNDS"},
		"default": {Kind: "redis", URLEnv: "AGENTC_TEST_UNSET_DEFAULT"},
	}
	p.Chains.Chat = []plan.Layer{{Use: "rate_limit", Config: []byte(`{"rate":5,"per":"1m","store":"ledger"}`)}}
	p.State = &plan.State{Fields: map[string]plan.StateField{
		"limit": {Background: []plan.StateSink{{Sink: "audit", Store: "events"}}},
	}}
	p.Grounding = &plan.Grounding{Record: true, Sink: "grounds"}
	_, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.EqualError(t, err, `build stores.default: environment variable AGENTC_TEST_UNSET_DEFAULT (its url_env) is not set
build stores.events: environment variable AGENTC_TEST_UNSET_EVENTS (its url_env) is not set
build stores.grounds: environment variable AGENTC_TEST_UNSET_GROUNDS (its url_env) is not set
build stores.ledger: environment variable AGENTC_TEST_UNSET_LEDGER (its url_env) is not set`)

	p.Stores = map[string]plan.Store{"runs": p.Stores["runs"]}
	p.Chains.Chat, p.State, p.Grounding = nil, nil, nil
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.NoError(t, err, "no layer opens runs")
	require.NoError(t, pl.Close())
}
