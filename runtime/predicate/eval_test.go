package predicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEvalTypedArgs(t *testing.T) {
	env := toolEnv(t, "refund")
	const full = `{"order_id":"A1","amount":150,"quantity":3,"reason":"late","expedite":true,"note":null,
		"tags":["vip","eu"],"codes":[4,5],"lines":[{"sku":"s1","count":2,"price":9.5},{"sku":"s2","count":1}],
		"shipping":{"country":"US","zip":"94107"},"extra":{"source":"web","n":2},"limits":{"daily":5},
		"anything":{"x":1}}`
	tests := []struct {
		src     string
		args    string
		want    bool
		wantErr string
	}{
		{"args.amount > 100.0 && !has(args.approved_by)", `{"order_id":"A1","amount":150}`, true, ""},
		{"args.amount > 100.0 && !has(args.approved_by)", `{"order_id":"A1","amount":150,"approved_by":"bob"}`, false, ""},
		{"args.amount > 100.0 && !has(args.approved_by)", `{"order_id":"A1","amount":50}`, false, ""},
		{"args.amount > 100", full, true, ""},
		{"args.order_id.startsWith('A') && size(args.order_id) == 2", full, true, ""},
		{"has(args.quantity) && args.quantity + 1 == 4 && type(args.quantity) == int", full, true, ""},
		{"has(args.reason) && args.reason in ['late', 'damaged']", full, true, ""},
		{"has(args.expedite) && args.expedite", full, true, ""},
		{"!has(args.note)", full, true, ""}, // null reads as absent
		{"has(args.tags) && 'vip' in args.tags && size(args.tags) == 2", full, true, ""},
		{"has(args.codes) && args.codes.exists(c, c % 2 == 0) && args.codes[1] * 2 == 10", full, true, ""},
		{"has(args.lines) && args.lines.all(l, l.count > 0 && l.sku.startsWith('s'))", full, true, ""},
		{"has(args.lines) && args.lines.map(l, l.count * 10).exists(n, n == 20)", full, true, ""},
		{"has(args.lines) && args.lines.exists(l, has(l.price) && l.price > 9.0)", full, true, ""},
		{"has(args.lines) && args.lines[1].count + 1 == 2 && !has(args.lines[1].price)", full, true, ""},
		{"has(args.shipping) && args.shipping.country == 'US' && has(args.shipping.zip)", full, true, ""},
		{"!has(args.shipping) || args.shipping.country != 'US'", full, false, ""},
		{"!has(args.shipping) || args.shipping.country != 'US'", `{"order_id":"A","amount":1}`, true, ""},
		{"has(args.quantity) ? args.quantity > 1 : false", full, true, ""},
		{"args.?approved_by.orValue('nobody') == 'nobody'", full, true, ""},
		{"has(args.extra) && args.extra.source == 'web' && args.extra.n == 2.0", full, true, ""},
		{"has(args.limits) && args.limits.daily + 1 == 6", full, true, ""},
		{"has(args.anything) && args.anything.x == 1.0", full, true, ""},
		{"dyn(args).undeclared == 1", `{"order_id":"A","amount":1,"undeclared":1}`, true, ""},
		{"tool.name == 'refund' && tool.side_effecting && run.id == 'run-1'", full, true, ""},
		// Errors are returned; the caller decides fail-open or fail-closed.
		{"args.amount > 100.0", `{"order_id":"A1"}`, false, "no such key: amount"},
		{"args.amount > 100.0", `{"order_id":"A1","amount":"lots"}`, false, "want a number, got a string"},
		{"has(args.quantity) && args.quantity > 1", `{"order_id":"A1","amount":1,"quantity":2.5}`, false, "want an integer, got 2.5"},
		{"has(args.shipping) && args.shipping.country == 'US'", `{"order_id":"A1","amount":1,"shipping":"home"}`, false, "want an object, got a string"},
		{"has(args.shipping) && args.shipping.country == 'US'", `{"order_id":"A1","amount":1,"shipping":{}}`, false, "no such key: country"},
		{"run.meta.tier == 'gold'", full, false, "no such key"},
	}
	for _, tt := range tests {
		t.Run(tt.src+" "+tt.args, func(t *testing.T) {
			p := mustCompile(t, env, tt.src)
			vars := &ToolVars{Tool: ToolInfo{Name: "refund", SideEffecting: true}, Run: RunInfo{ID: "run-1"}, Args: jsonArgs(t, tt.args)}
			got, err := p.Eval(context.Background(), vars)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				var ee *EvalError
				assert.True(t, errors.As(err, &ee))
				assert.False(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestEvalConvertsNumbers(t *testing.T) {
	env := toolEnv(t, "refund")
	ctx := context.Background()
	const src = `{"order_id":"A1","amount":150,"quantity":3,"codes":[4,5],"lines":[{"sku":"s","count":2,"price":1.5}],
		"limits":{"daily":5},"anything":{"n":2.5}}`
	for name, args := range map[string]map[string]any{
		"float64":     jsonArgs(t, src),
		"json.Number": jsonNumberArgs(t, src),
		"Go ints": {"order_id": "A1", "amount": 150, "quantity": int64(3), "codes": []any{4, int32(5)},
			"lines":  []any{map[string]any{"sku": "s", "count": 2, "price": float32(1.5)}},
			"limits": map[string]any{"daily": 5}, "anything": map[string]any{"n": 2.5}},
	} {
		t.Run(name, func(t *testing.T) {
			before, err := json.Marshal(args)
			require.NoError(t, err)
			for _, pred := range []string{
				"args.amount > 100.0 && args.amount < 151.0",
				"has(args.quantity) && args.quantity * 2 == 6",
				"has(args.codes) && args.codes[0] + args.codes[1] == 9",
				"has(args.lines) && args.lines.all(l, l.count - 1 == 1 && (!has(l.price) || l.price * 2.0 == 3.0))",
				"has(args.limits) && args.limits.daily - 5 == 0",
				"has(args.anything) && args.anything.n > 2.0",
			} {
				p := mustCompile(t, env, pred)
				ok, err := p.Eval(ctx, &ToolVars{Args: args})
				require.NoError(t, err, pred)
				assert.True(t, ok, pred)
			}
			// The caller's map is never modified.
			after, err := json.Marshal(args)
			require.NoError(t, err)
			assert.Equal(t, string(before), string(after))
		})
	}
	t.Run("untyped args read json.Number as double", func(t *testing.T) {
		untyped := mustEnv(t, EnvConfig{Stage: Tool})
		p := mustCompile(t, untyped, "args.amount > 100.0 && args.nested.list[0] == 1.0")
		ok, err := p.Eval(ctx, &ToolVars{Args: jsonNumberArgs(t, `{"amount":150,"nested":{"list":[1]}}`)})
		require.NoError(t, err)
		assert.True(t, ok)
	})
	t.Run("caller map unchanged for float64", func(t *testing.T) {
		args := jsonArgs(t, `{"order_id":"A1","amount":1,"quantity":3}`)
		p := mustCompile(t, env, "has(args.quantity) && args.quantity == 3")
		ok, err := p.Eval(ctx, &ToolVars{Args: args})
		require.NoError(t, err)
		assert.True(t, ok)
		assert.IsType(t, float64(0), args["quantity"])
	})
}

func TestEvalStages(t *testing.T) {
	ctx := context.Background()
	chat := &ChatVars{
		Run: RunInfo{ID: "run-1", Agent: "support", Meta: map[string]any{"tier": "gold"}},
		Request: ChatRequest{Model: "primary", MaxTokens: 512, Messages: []Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "Hi, I want a REFUND"},
			{Role: "tool", Content: "{}", Name: "lookup", ToolCallID: "c1"},
		}},
		Response:    ChatResponse{Text: "ok", Model: "backup", Usage: Usage{InputTokens: 10, OutputTokens: 5}},
		HasResponse: true,
	}
	turn := &TurnVars{
		Run:     RunInfo{ID: "run-1"},
		Input:   TurnInput{Text: "reset my password"},
		Session: SessionInfo{ID: "s1", Meta: map[string]any{"plan": "pro"}},
		Output:  TurnOutput{Text: "done"}, Status: "ok", HasOutput: true,
	}
	admit := &AdmitVars{Item: Item{Content: "fact", Source: "kb", Score: 0.9, Metadata: map[string]any{"tier": "verified"}}}
	tool := &ToolVars{Tool: ToolInfo{Name: "fetch_page", URLArg: "url"}, Args: map[string]any{"url": "https://API.Example.com:8443/x"},
		Result: map[string]any{"ok": true, "items": []any{1.0, 2.0}}, HasResult: true}

	tests := []struct {
		stage Stage
		phase Phase
		vars  Activation
		src   string
		want  bool
	}{
		{Chat, Before, chat, "request.model == 'primary' && request.max_tokens > 100 && run.meta.tier == 'gold'", true},
		{Chat, Before, chat, "size(messages) == 3 && messages[0].role == 'system' && request.messages[1].content.contains('REFUND')", true},
		{Chat, Before, chat, "messages.exists(m, m.role == 'tool' && m.name == 'lookup' && m.tool_call_id == 'c1')", true},
		{Chat, Before, chat, "messages.all(m, m.role != 'assistant')", true},
		{Chat, Before, chat, "has(request.model) && !has(messages[0].name)", true},
		{Chat, Before, chat, "dyn(request).model == 'primary' && request == request", true},
		{Chat, Before, chat, "messages.filter(m, m.role == 'user').size() == 1", true},
		{Chat, After, chat, "response.model != request.model && response.usage.input_tokens + response.usage.output_tokens == 15", true},
		{Chat, After, chat, "has(response.usage) && response.text == 'ok'", true},
		{Tool, Before, tool, "url_host(args.url) == 'api.example.com' && tool.url_arg == 'url'", true},
		{Tool, After, tool, "result.ok == true && size(result.items) == 2", true},
		{Turn, Before, turn, "contains_any(input.text, ['PASSWORD', 'token']) && session.meta.plan == 'pro' && session.id == 's1'", true},
		{Turn, After, turn, "status == 'ok' && output.text == 'done'", true},
		{Admit, Before, admit, "item.metadata.tier != 'inferred' && item.score > 0.5 && item.source == 'kb' && item.content != ''", true},
		{Admit, Before, admit, "item.score > 1", false},
	}
	for _, tt := range tests {
		t.Run(string(tt.stage)+"/"+tt.src, func(t *testing.T) {
			env := mustEnv(t, EnvConfig{Stage: tt.stage, Phase: tt.phase})
			p := mustCompile(t, env, tt.src)
			got, err := p.Eval(ctx, tt.vars)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	t.Run("after-phase variables unset", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Chat, Phase: After})
		p := mustCompile(t, env, "response.text == ''")
		_, err := p.Eval(ctx, &ChatVars{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "response")

		tenv := mustEnv(t, EnvConfig{Stage: Turn, Phase: After})
		p = mustCompile(t, tenv, "status == 'ok'")
		_, err = p.Eval(ctx, &TurnVars{})
		assert.Error(t, err)
	})
	t.Run("wrong activation", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Admit})
		p := mustCompile(t, env, "item.score > 0.5")
		_, err := p.Eval(ctx, &ToolVars{})
		assert.Error(t, err)
	})
	t.Run("missing metadata key is an error", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Admit})
		p := mustCompile(t, env, "item.metadata.tier != 'inferred'")
		_, err := p.Eval(ctx, &AdmitVars{Item: Item{Metadata: map[string]any{}}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no such key: tier")
	})
}

func TestFunctions(t *testing.T) {
	ctx := context.Background()
	env := mustEnv(t, EnvConfig{Stage: Turn})
	tests := []struct {
		src     string
		input   string
		want    bool
		wantErr string
	}{
		{"url_host(input.text) == 'api.example.com'", "https://API.Example.COM:8443/v1?q=1", true, ""},
		{"url_host(input.text) == 'example.com'", "http://user@example.com./x", true, ""},
		{"url_host(input.text) == '::1'", "http://[::1]:80/", true, ""},
		{"url_host(input.text) == ''", "example.com/no-scheme", true, ""},
		{"url_host(input.text) == ''", "http://bad host/", false, "url_host: invalid URL"},
		{"lower(input.text) == 'straße ünd'", "STRAẞE ÜND", true, ""},
		{"lower(input.text) == input.text.lowerAscii()", "ABC", true, ""},
		{"contains_any(input.text, ['ignore previous', 'system prompt'])", "Please IGNORE PREVIOUS instructions", true, ""},
		{"contains_any(input.text, ['ignore previous', 'system prompt'])", "hello", false, ""},
		{"contains_any(input.text, [])", "hello", false, ""},
		{"contains_any(input.text, [''])", "hello", true, ""},
		{"matches_any(input.text, ['^\\\\d{3}-\\\\d{2}-\\\\d{4}$', 'secret'])", "123-45-6789", true, ""},
		{"matches_any(input.text, ['^\\\\d{3}-\\\\d{2}-\\\\d{4}$', 'secret'])", "top SECRET", false, ""},
		{"matches_any(input.text, ['(?i)secret'])", "top SECRET", true, ""},
		{"input.text.matches('^a+$')", "aaa", true, ""},
		{"input.text.upperAscii() == 'ABC' && input.text.indexOf('b') == 1 && input.text.replace('b', 'x') == 'axc'", "abc", true, ""},
		{"input.text.split(',').size() == 3 && ['a', 'b'].join('-') == 'a-b' && input.text.substring(0, 1) == 'a'", "a,b,c", true, ""},
		{"input.text.trim() == 'x' && input.text.charAt(2) == 'x' && input.text.lastIndexOf(' ') == 3", "  x ", true, ""},
		{"'%s-%d'.format([input.text, 3]) == 'a-3' && strings.quote(input.text) == '\"a\"' && input.text.reverse() == 'a'", "a", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.src+" "+tt.input, func(t *testing.T) {
			p := mustCompile(t, env, tt.src)
			got, err := p.Eval(ctx, &TurnVars{Input: TurnInput{Text: tt.input}})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	t.Run("non-constant patterns are checked at evaluation", func(t *testing.T) {
		tenv := toolEnv(t, "refund")
		p := mustCompile(t, tenv, "has(args.tags) && matches_any(args.order_id, args.tags)")
		ok, err := p.Eval(ctx, &ToolVars{Args: jsonArgs(t, `{"order_id":"A-17","amount":1,"tags":["^B","^A-\\d+$"]}`)})
		require.NoError(t, err)
		assert.True(t, ok)
		_, err = p.Eval(ctx, &ToolVars{Args: jsonArgs(t, `{"order_id":"A-17","amount":1,"tags":["(unclosed"]}`)})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "missing closing )")
	})
}

func TestEvalCostLimit(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Turn, CostLimit: 5000})
	p := mustCompile(t, env, "input.text.contains('needle')")
	require.True(t, p.CostTracked())
	ctx := context.Background()

	ok, err := p.Eval(ctx, &TurnVars{Input: TurnInput{Text: "a needle in a small haystack"}})
	require.NoError(t, err)
	assert.True(t, ok)

	_, err = p.Eval(ctx, &TurnVars{Input: TurnInput{Text: strings.Repeat("hay", 100_000)}})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrCostLimit)
}

func TestEvalContext(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Turn})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, src := range []string{"session.id == 's'", "input.text.contains('x')"} {
		p := mustCompile(t, env, src)
		_, err := p.Eval(cancelled, &TurnVars{})
		assert.ErrorIs(t, err, context.Canceled, src)
	}
	// A tracked program honours a deadline.
	p := mustCompile(t, env, "input.text.contains('x')")
	ctx, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	ok, err := p.Eval(ctx, &TurnVars{Input: TurnInput{Text: "xyz"}})
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestEvalConcurrent(t *testing.T) {
	env := toolEnv(t, "refund")
	guard := mustCompile(t, env, "args.amount > 100.0 && !has(args.approved_by)")
	lines := mustCompile(t, env, "has(args.lines) && args.lines.exists(l, l.count > 2 && l.sku.contains('x'))")
	require.True(t, lines.CostTracked())
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				amount := float64(50 + (g*500+i)%100)
				args := map[string]any{"order_id": "A", "amount": amount,
					"lines": []any{map[string]any{"sku": "x1", "count": float64(i % 4)}}}
				if i%3 == 0 {
					args["approved_by"] = "bob"
				}
				ok, err := guard.Eval(ctx, &ToolVars{Args: args})
				if err != nil {
					errs <- err
					return
				}
				if want := amount > 100 && i%3 != 0; ok != want {
					errs <- errors.New("guard: wrong result")
					return
				}
				ok, err = lines.Eval(ctx, &ToolVars{Args: args})
				if err != nil {
					errs <- err
					return
				}
				if ok != (i%4 == 3) {
					errs <- errors.New("lines: wrong result")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSpecRoundTrip(t *testing.T) {
	env := toolEnv(t, "refund")
	c, iss := env.Check("args.amount > 100.0 && !has(args.approved_by)")
	require.Empty(t, iss)
	spec := c.Spec()
	assert.Equal(t, Tool, spec.Stage)
	assert.Equal(t, Before, spec.Phase)

	data, err := json.Marshal(spec)
	require.NoError(t, err)
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &fields))
	assert.ElementsMatch(t, []string{"stage", "phase", "source", "args_schemas"}, keys(fields))

	var back Spec
	require.NoError(t, json.Unmarshal(data, &back))
	p, err := CompileSpec(back)
	require.NoError(t, err)
	ok, err := p.Eval(context.Background(), &ToolVars{Args: jsonArgs(t, `{"order_id":"A","amount":150}`)})
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = p.Eval(context.Background(), &ToolVars{Args: jsonArgs(t, `{"order_id":"A","amount":150,"approved_by":"x"}`)})
	require.NoError(t, err)
	assert.False(t, ok)

	t.Run("custom cost limit travels", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Turn, Phase: After, CostLimit: 5000})
		c, iss := env.Check("output.text.contains('x')")
		require.Empty(t, iss)
		data, err := json.Marshal(c.Spec())
		require.NoError(t, err)
		assert.Contains(t, string(data), `"cost_limit":5000`)
		assert.NotContains(t, string(data), "args_schemas")
		var back Spec
		require.NoError(t, json.Unmarshal(data, &back))
		p, err := CompileSpec(back)
		require.NoError(t, err)
		_, err = p.Eval(context.Background(), &TurnVars{HasOutput: true, Output: TurnOutput{Text: strings.Repeat("y", 200_000)}})
		assert.ErrorIs(t, err, ErrCostLimit)
	})
	t.Run("invalid specs", func(t *testing.T) {
		_, err := CompileSpec(Spec{Stage: "nope", Source: "true"})
		assert.ErrorContains(t, err, "unknown stage")
		_, err = CompileSpec(Spec{Stage: Tool, Source: "args.ammount > 1.0", ArgsSchemas: []json.RawMessage{schema(t, "refund")}})
		assert.ErrorContains(t, err, "1:6: cel/type: undefined field 'ammount'")
	})
	t.Run("program from another environment", func(t *testing.T) {
		other := mustEnv(t, EnvConfig{Stage: Tool})
		_, err := other.Program(c)
		assert.Error(t, err)
	})
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Caller-supplied patterns never grow the matches_any cache past its bounds:
// distinct long patterns are compiled per call, distinct short ones stop
// being cached at the entry or byte limit, and the live heap stays flat.
func TestMatchesAnyRegexCacheIsBounded(t *testing.T) {
	tenv := toolEnv(t, "refund")
	p := mustCompile(t, tenv, "has(args.tags) && matches_any(args.order_id, args.tags)")
	ctx := context.Background()
	eval := func(pattern string) {
		b, err := json.Marshal(map[string]any{"order_id": "A-17", "amount": 1, "tags": []string{pattern}})
		require.NoError(t, err)
		_, err = p.Eval(ctx, &ToolVars{Args: jsonArgs(t, string(b))})
		require.NoError(t, err)
	}
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	for i := range 50 { // 50 distinct 100 KB patterns: 5 MB of pattern text
		eval(fmt.Sprintf("^x%d", i) + strings.Repeat("a", 100<<10))
	}
	for i := range 3000 { // more short patterns than the cache holds
		eval(fmt.Sprintf("^y%d-%s", i, strings.Repeat("b", 200)))
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	assert.LessOrEqual(t, regexCacheEntries.Load(), maxCachedRegexes)
	assert.LessOrEqual(t, regexCacheBytes.Load(), maxCachedRegexBytes)
	var n, size int64
	regexCache.Range(func(k, _ any) bool { n++; size += int64(len(k.(string))); return true })
	assert.Equal(t, regexCacheEntries.Load(), n, "the counters match the cache")
	assert.LessOrEqual(t, size, maxCachedRegexBytes)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	assert.Less(t, growth, int64(64<<20), "live heap grew by %d bytes", growth)
}

// Functions whose work or result the cost tracker charges only after they
// return are bounded before they start: a replace() that would build a huge
// string and a matches() of a long pattern from the input over a long text
// fail at once, while ordinary uses are unchanged.
func TestQuadraticFunctionsAreBoundedBeforeTheyRun(t *testing.T) {
	// A cost limit high enough that the static estimate admits the
	// predicates, as a policy raising cel_cost_limit (or a schema whose
	// declared bounds a caller ignores) would.
	env := mustEnv(t, EnvConfig{Stage: Turn, CostLimit: 1 << 40})
	ctx := context.Background()
	eval := func(src, text string) (bool, error, time.Duration) {
		p := mustCompile(t, env, src)
		start := time.Now()
		ok, err := p.Eval(ctx, &TurnVars{Input: TurnInput{Text: text}})
		return ok, err, time.Since(start)
	}
	long := strings.Repeat("a", 60_000)
	_, err, took := eval("input.text.replace('a', input.text) != ''", long)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "replace: the result would exceed 8388608 bytes")
	assert.Less(t, took, time.Second)
	_, err, _ = eval("input.text.replace('a', input.text, 1000) != ''", long)
	assert.ErrorContains(t, err, "replace: the result would exceed")

	ok, err, _ := eval("input.text.replace('b', 'xx') == 'axxc' && input.text.replace('b', 'xx', 0) == 'abc'", "abc")
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err, _ = eval("input.text.replace('a', 'bb', 2) == 'bbbba'", "aaa")
	require.NoError(t, err)
	assert.True(t, ok)

	pattern := strings.Repeat("(a|b)", 20_000) + "$"
	_, err, took = eval("input.text.matches(input.text)", pattern+strings.Repeat("a", 100_000))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "matches: a 200001-byte pattern on a 200001-byte text is above the evaluation bound")
	assert.Less(t, took, time.Second)
	_, err, _ = eval("matches(input.text, input.text)", strings.Repeat("x", 10_000))
	assert.ErrorContains(t, err, "above the evaluation bound")

	// Constant patterns are compiled once and match any text.
	ok, err, _ = eval("input.text.matches('^a+$')", strings.Repeat("a", 1<<20))
	require.NoError(t, err)
	assert.True(t, ok)
	// A short pattern from the input on a short text runs.
	ok, err, _ = eval("'abc'.matches(input.text)", "^a.c$")
	require.NoError(t, err)
	assert.True(t, ok)
}

// A cost-tracked evaluation is interrupted while it runs once it takes
// longer than MaxEvalTime, even under a cost limit it would not reach soon.
func TestEvalIsInterruptedByItsDeadline(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Turn, CostLimit: 1 << 40})
	p := mustCompile(t, env, "input.text.split('').all(c, [1, 2, 3, 4, 5, 6, 7, 8].all(x, c == 'a' || x > 0))")
	require.True(t, p.CostTracked())
	start := time.Now()
	_, err := p.Eval(context.Background(), &TurnVars{Input: TurnInput{Text: strings.Repeat("a", 3_000_000)}})
	took := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "evaluation took longer than 250ms")
	assert.Less(t, took, 2*time.Second)
	// A quick evaluation is unaffected.
	ok, err := p.Eval(context.Background(), &TurnVars{Input: TurnInput{Text: "aaa"}})
	require.NoError(t, err)
	assert.True(t, ok)
}

// A cost-tracked evaluation is interrupted while it runs when its caller's
// context is cancelled, and its error is the cancellation, not the
// deadline; the next evaluations, cancelled or not, are not disturbed.
func TestEvalIsInterruptedByItsCaller(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Turn, CostLimit: 1 << 40})
	p := mustCompile(t, env, "input.text.split('').all(c, [1, 2, 3, 4, 5, 6, 7, 8].all(x, c == 'a' || x > 0))")
	require.True(t, p.CostTracked())
	long := &TurnVars{Input: TurnInput{Text: strings.Repeat("a", 3_000_000)}}
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err := p.Eval(ctx, long)
		require.Error(t, err)
		assert.ErrorIs(t, err, context.Canceled)
		assert.NotContains(t, err.Error(), "took longer")
		for range 100 {
			ok, err := p.Eval(context.Background(), &TurnVars{Input: TurnInput{Text: "aaa"}})
			require.NoError(t, err)
			assert.True(t, ok)
		}
	}
	_, err := p.Eval(context.Background(), long)
	assert.ErrorContains(t, err, "evaluation took longer than 250ms")
}
