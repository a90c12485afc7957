package predicate

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckTypedArgsAccepts(t *testing.T) {
	env := toolEnv(t, "refund")
	for _, src := range []string{
		"args.amount > 100.0 && !has(args.approved_by)",
		"args.amount > 100", // cross-type numeric comparison
		"args.order_id.startsWith('A') && size(args.order_id) < 10",
		"has(args.quantity) && args.quantity + 1 > 2",
		"has(args.reason) && args.reason in ['late', 'damaged']",
		"has(args.expedite) && args.expedite",
		"has(args.note) && args.note != ''",
		"has(args.tags) && 'vip' in args.tags",
		"has(args.codes) && args.codes.exists(c, c % 2 == 0)",
		"has(args.lines) && args.lines.all(l, l.count > 0 && l.sku != '')",
		"has(args.lines) && args.lines.exists(l, has(l.price) && l.price > 10.0)",
		"has(args.lines) && size(args.lines) > 0 && args.lines[0].sku == 'x'",
		"has(args.shipping) && args.shipping.country == 'US'",
		"has(args.shipping) && has(args.shipping.zip) && args.shipping.zip.startsWith('9')",
		"has(args.shipping.zip) && args.shipping.zip.startsWith('9') && has(args.shipping)",
		"!has(args.shipping) || args.shipping.country != 'US'",
		"has(args.quantity) ? args.quantity > 1 : false",
		"!has(args.quantity) ? true : args.quantity > 1",
		"!(has(args.quantity) && args.quantity > 1)",
		"(has(args.quantity) || has(args.quantity)) && args.quantity > 1",
		"args.?approved_by.orValue('') == ''",
		"has(args.extra) && args.extra.anything == 'x'",
		"has(args.limits) && args.limits.daily > 3",
		"has(args.anything) && args.anything.x == 1",
		"dyn(args).undeclared == 1",
		"tool.name == 'refund' && tool.side_effecting && !tool.retry_safe && tool.url_arg == '' && tool.path_arg == ''",
		"run.id != '' && run.agent == 'support' && run.meta.tier == 'gold'",
	} {
		t.Run(src, func(t *testing.T) {
			c, iss := env.Check(src)
			assert.Empty(t, iss)
			if assert.NotNil(t, c) {
				assert.False(t, c.ReadsUntypedArgs)
				assert.Equal(t, src, c.Source)
			}
		})
	}
}

func TestCheckIssues(t *testing.T) {
	env := toolEnv(t, "refund")
	tests := []struct {
		name string
		src  string
		rule string
		line int
		col  int
		msg  string
	}{
		{"typo in args field", "args.ammount > 100.0", RuleType, 1, 6, "undefined field 'ammount'"},
		{"typo in tool field", "tool.nmae == 'refund'", RuleType, 1, 6, "undefined field 'nmae'"},
		{"typo in nested field", "has(args.shipping) && args.shipping.cuntry == 'US'", RuleType, 1, 37, "undefined field 'cuntry'"},
		{"typo in list element field", "has(args.lines) && args.lines.all(l, l.skew == '')", RuleType, 1, 40, "undefined field 'skew'"},
		{"wrong type comparison", "args.amount == 'x'", RuleType, 1, 13, "no matching overload for '_==_' applied to '(double, string)'"},
		{"wrong type in int field", "has(args.quantity) && args.quantity == 'two'", RuleType, 1, 37, "(int, string)"},
		{"undeclared variable", "response.text == ''", RuleType, 1, 1, "undeclared reference to 'response'"},
		{"unknown function", "shout(tool.name)", RuleType, 1, 6, "undeclared reference to 'shout'"},
		{"optional field without has", "args.approved_by == 'bob'", RuleType, 1, 6, "args.approved_by is optional"},
		{"nullable field without has", "args.note == 'x'", RuleType, 1, 6, "args.note is optional"},
		{"has in a disjunction does not guard", "has(args.approved_by) || args.approved_by == 'bob'", RuleType, 1, 31, "args.approved_by is optional"},
		{"has of another field does not guard", "has(args.quantity) && args.approved_by == 'bob'", RuleType, 1, 28, "args.approved_by is optional"},
		{"optional nested object", "args.shipping.country == 'US'", RuleType, 1, 6, "args.shipping is optional"},
		{"optional field of list element", "has(args.lines) && args.lines.all(l, l.price > 1.0)", RuleType, 1, 40, "l.price is optional"},
		{"not bool", "args.amount", RuleNotBool, 1, 1, "expression has type double, want bool"},
		{"not bool string", "  tool.name", RuleNotBool, 1, 3, "expression has type string, want bool"},
		{"syntax error at end", "args.amount > ", RuleSyntax, 1, 15, "syntax error: unexpected end of expression"},
		{"syntax error unterminated string", "tool.name == 'refund", RuleSyntax, 1, 14, "syntax error"},
		{"syntax error second line", "tool.name == 'refund' &&\n  args.amount >> 1.0", RuleSyntax, 2, 16, "syntax error"},
		{"type error second line", "tool.name == 'refund' &&\n  args.ammount > 1.0", RuleType, 2, 8, "undefined field 'ammount'"},
		{"bad regex in matches", "tool.name.matches('[a-')", RuleSyntax, 1, 19, "invalid regular expression in matches()"},
		{"bad regex in global matches", "matches(tool.name, '(x')", RuleSyntax, 1, 20, "invalid regular expression in matches()"},
		{"bad regex in matches_any", "matches_any(tool.name, ['a', '(b'])", RuleSyntax, 1, 30, "invalid regular expression in matches_any()"},
		{"bad duration", "tool.name == 'x' && duration('1d') > duration('1h')", RuleSyntax, 1, 30, `invalid duration in duration(): unknown unit "d"`},
		{"spelt-out duration", "tool.name == 'x' && duration('10 minutes') > duration('1h')", RuleSyntax, 1, 30, "invalid duration in duration()"},
		{"bad timestamp", "tool.name == 'x' && timestamp('2025-01-31') < timestamp('2025-02-01T00:00:00Z')", RuleSyntax, 1, 31, "invalid timestamp in timestamp()"},
		{"constructing an input type", "agentc.tool{name: 'x'} == tool", RuleType, 1, 1, "cannot construct agentc.tool"},
		{"two-variable all", "has(args.lines) && args.lines.all(i, l, l.price > 1.0)", RuleType, 1, 31, "all(i, l, ...) binds two variables"},
		{"two-variable exists", "has(args.lines) && args.lines.exists(i, l, has(l.price) && l.price > 1.0)", RuleType, 1, 31, "exists(i, l, ...) binds two variables"},
		{"two-variable transformList", "has(args.lines) && args.lines.transformList(i, l, l.sku).size() > 0", RuleType, 1, 31, "transformList(i, l, ...) binds two variables, a form the agentc CEL environment does not have: its macros (all, exists, exists_one, map, filter) bind one, a list's element or a map's key; write map(l, ...)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, iss := env.Check(tt.src)
			assert.Nil(t, c)
			require.NotEmpty(t, iss)
			got := iss[0]
			assert.Equal(t, tt.rule, got.Rule, "%v", iss)
			if tt.line > 0 {
				assert.Equal(t, tt.line, got.Line, "%v", iss)
				assert.Equal(t, tt.col, got.Col, "%v", iss)
			}
			assert.Contains(t, got.Message, tt.msg)
			// Offset and line/col agree.
			lineStart := strings.LastIndex(tt.src[:got.Offset], "\n") + 1
			assert.Equal(t, got.Col, got.Offset-lineStart+1)
			assert.Equal(t, got.Line, strings.Count(tt.src[:got.Offset], "\n")+1)
			// Messages are cel-go's core message, without prefixes or snippets.
			assert.NotContains(t, got.Message, "ERROR:")
			assert.NotContains(t, got.Message, "<input>")
			assert.NotContains(t, got.Message, "\n")
			assert.Equal(t, strings.ToLower(got.Message[:1]), got.Message[:1])
		})
	}
}

func TestCheckColumnsCountBytes(t *testing.T) {
	env := toolEnv(t, "refund")
	src := "'héllo wörld' == tool.nmae"
	_, iss := env.Check(src)
	require.Len(t, iss, 1)
	want := strings.Index(src, "nmae")
	assert.Equal(t, want, iss[0].Offset)
	assert.Equal(t, want+1, iss[0].Col)
	assert.Equal(t, "1:"+itoa(want+1)+": cel/type: undefined field 'nmae'; did you mean 'name'?", iss[0].String())
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + jsonInt(i)) }

func jsonInt(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestCheckNotBool(t *testing.T) {
	chatAfter := mustEnv(t, EnvConfig{Stage: Chat, Phase: After})
	toolAfter := mustEnv(t, EnvConfig{Stage: Tool, Phase: After})
	for _, tt := range []struct {
		env *Env
		src string
		msg string
	}{
		{chatAfter, "request.max_tokens", "type int, want bool"},
		{chatAfter, "response.usage", "type agentc.usage, want bool"},
		{chatAfter, "'yes'", "type string, want bool"},
		{toolAfter, "result", "type dyn, want bool (compare the value"},
		{toolAfter, "result.ok", "type dyn, want bool"},
	} {
		_, iss := tt.env.Check(tt.src)
		require.Len(t, iss, 1, tt.src)
		assert.Equal(t, RuleNotBool, iss[0].Rule, tt.src)
		assert.Contains(t, iss[0].Message, tt.msg, tt.src)
	}
	c, iss := toolAfter.Check("result.ok == true")
	assert.Empty(t, iss)
	assert.NotNil(t, c)
}

func TestCheckCost(t *testing.T) {
	t.Run("bounded guard skips the runtime tracker", func(t *testing.T) {
		env := toolEnv(t, "refund")
		c, iss := env.Check("args.amount > 100.0 && !has(args.approved_by)")
		require.Empty(t, iss)
		assert.LessOrEqual(t, c.Cost.Max, uint64(10))
		p, err := env.Program(c)
		require.NoError(t, err)
		assert.False(t, p.CostTracked())
	})
	t.Run("input-sized work is tracked at runtime", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Turn})
		p := mustCompile(t, env, "input.text.contains('password')")
		assert.True(t, p.CostTracked())
	})
	t.Run("declared sizes bound comprehensions", func(t *testing.T) {
		env := toolEnv(t, "refund")
		c, iss := env.Check("has(args.lines) && args.lines.all(l, l.sku.contains('x'))")
		require.Empty(t, iss)
		// 50 lines of at most 32 characters.
		assert.Less(t, c.Cost.Max, uint64(2000))
	})
	t.Run("assumed sizes bound a scan of the transcript", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Chat})
		c, iss := env.Check("messages.exists(m, m.role == 'user' && m.content.contains('refund'))")
		require.Empty(t, iss)
		assert.LessOrEqual(t, c.Cost.Max, DefaultCostLimit)
	})
	t.Run("a scan of the transcript is estimated for the 4 MiB the gateway admits", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Chat})
		for _, src := range []string{
			"request.messages.exists(m, m.content.matches('secret'))",
			"messages.exists(m, m.content.contains('ignore previous'))",
		} {
			c, iss := env.Check(src)
			require.Empty(t, iss, src)
			assert.LessOrEqual(t, c.Cost.Max, DefaultCostLimit, src)
		}
		assert.Equal(t, 4<<20, DefaultListSize*DefaultContentSize)
	})
	t.Run("nested comprehensions exceed the limit", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Chat})
		_, iss := env.Check("messages.all(m, messages.all(n, m.content == n.content))")
		require.Len(t, iss, 1)
		assert.Equal(t, RuleCost, iss[0].Rule)
		assert.Regexp(t, `^estimated cost \d+ exceeds the limit 1000000`, iss[0].Message)
	})
	t.Run("a scan of a dyn list is unbounded, reported at the list", func(t *testing.T) {
		for _, tt := range []struct {
			stage     Stage
			src, list string
		}{
			{Turn, "session.id == 's' && session.meta.tags.exists(t, t == 'vip')", "session.meta.tags"},
			{Admit, "item.score > 0.5 && 'vetted' in item.metadata.tags", "item.metadata.tags"},
		} {
			_, iss := mustEnv(t, EnvConfig{Stage: tt.stage}).Check(tt.src)
			require.Len(t, iss, 1, tt.src)
			assert.Equal(t, RuleCost, iss[0].Rule)
			assert.Contains(t, iss[0].Message, "unbounded: it iterates over "+tt.list)
			assert.NotContains(t, iss[0].Message, "maxItems") // no schema to declare a size in
			assert.Equal(t, strings.Index(tt.src, tt.list), iss[0].Offset)
		}
		// A list read with a default is not a path: the advice is its variable's.
		_, iss := mustEnv(t, EnvConfig{Stage: Admit}).Check("'public' in item.metadata.?tags.orValue([])")
		require.Len(t, iss, 1)
		assert.Contains(t, iss[0].Message, "unbounded: it iterates over a value whose size is unknown (a dyn value, which no schema sizes")
		_, iss = mustEnv(t, EnvConfig{Stage: Tool}).Check("'x' in args.?items.orValue([])")
		require.Len(t, iss, 1)
		assert.Contains(t, iss[0].Message, "(scope the entry to tools whose schema declares it with maxItems)")
		// A key of the metadata map is a lookup.
		_, iss = mustEnv(t, EnvConfig{Stage: Admit}).Check("'tags' in item.metadata")
		assert.Empty(t, iss)
		// Untyped args: scope the entry.
		_, iss = mustEnv(t, EnvConfig{Stage: Tool}).Check("'x' in args.items")
		require.Len(t, iss, 1)
		assert.Contains(t, iss[0].Message, "scope the entry to tools whose schema declares it with maxItems")
	})
	t.Run("over the limit, the message names the sizes assumed and what lowers the estimate", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Chat, CostLimit: 1000})
		_, iss := env.Check("messages.exists(m, m.content.matches('secret'))")
		require.Len(t, iss, 1)
		assert.Contains(t, iss[0].Message, "(it assumes 256 elements in messages and 16384 characters in a message's content); contains() with a fixed string costs less than matches()")
		assert.NotContains(t, iss[0].Message, "schema")
		_, iss = mustEnv(t, EnvConfig{Stage: Turn, CostLimit: 1000}).Check("input.text.contains('secret')")
		require.Len(t, iss, 1)
		assert.True(t, strings.HasSuffix(iss[0].Message, "(it assumes 32768 characters in a string)"), iss[0].Message)
	})
	t.Run("an equality of two dyn values counts each as an assumed string", func(t *testing.T) {
		for _, tt := range []struct {
			stage Stage
			src   string
		}{
			{Tool, "args.from == args.to"},
			{Tool, "args.owner != run.meta.?user.orValue('')"},
			{Turn, "session.meta.?owner.orValue('') == run.meta.?user.orValue('')"},
		} {
			c, iss := mustEnv(t, EnvConfig{Stage: tt.stage}).Check(tt.src)
			require.Empty(t, iss, tt.src)
			assert.LessOrEqual(t, c.Cost.Max, uint64(DefaultStringSize), tt.src)
			// Nothing bounds the sizes at run time: the cost tracker runs.
			assert.False(t, c.bounded, tt.src)
		}
	})
	t.Run("comprehension over an untyped args list is unbounded", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Tool})
		_, iss := env.Check("args.items.all(i, i.qty > 0)")
		require.Len(t, iss, 1)
		assert.Equal(t, RuleCost, iss[0].Rule)
		assert.Contains(t, iss[0].Message, "args.items")
	})
	t.Run("custom limit", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Turn, CostLimit: 100})
		_, iss := env.Check("input.text.contains('password')")
		require.Len(t, iss, 1)
		assert.Equal(t, RuleCost, iss[0].Rule)
		assert.Contains(t, iss[0].Message, "exceeds the limit 100")
		assert.Equal(t, uint64(100), env.Config().CostLimit)
	})
	t.Run("library functions carry size-proportional costs", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Turn})
		short, iss := env.Check("lower(session.id) == 'x'")
		require.Empty(t, iss)
		long, iss := env.Check("matches_any(input.text, ['a+b', 'c.*d']) && contains_any(input.text, ['x', 'y'])")
		require.Empty(t, iss)
		assert.Greater(t, long.Cost.Max, short.Cost.Max)
		assert.Greater(t, short.Cost.Max, uint64(1000)) // 32 KiB assumed for session.id
	})
}

func TestCheckBadInput(t *testing.T) {
	env := toolEnv(t, "refund")
	deep := func(open, mid, close string, n int) string {
		return strings.Repeat(open, n) + mid + strings.Repeat(close, n)
	}
	tests := []struct {
		name string
		src  string
		rule string
		msg  string
	}{
		{"1 MB expression", strings.Repeat("true && ", 1<<17) + "true", RuleSyntax, "expression longer than 4096 bytes"},
		{"1000-deep parentheses", deep("(", "true", ")", 1000), RuleSyntax, "nests too deeply"},
		{"1000-deep negation", deep("!(", "true", ")", 1000), RuleSyntax, "nests too deeply"},
		{"1000 negation signs", strings.Repeat("!", 1000) + "true", "", ""}, // no nesting: accepted
		{"1000-deep lists", deep("[", "", "]", 1000) + " == []", RuleSyntax, "nests too deeply"},
		{"long chain of additions", strings.Repeat("1 + ", 500) + "1 > 2", RuleSyntax, "nests too deeply"},
		{"not UTF-8", "tool.name == '\xff\xfe'", RuleSyntax, "not valid UTF-8"},
		{"empty", "  \n ", RuleSyntax, "empty expression"},
		{"comprehension over an unbounded list", "run.meta.list.all(x, x == 1)", RuleCost, "unbounded"},
		{"non-RE2 regex", "tool.name.matches('(?=lookahead)')", RuleSyntax, "invalid regular expression"},
		{"non-RE2 regex backreference", "matches_any(tool.name, ['(a)\\\\1'])", RuleSyntax, "invalid regular expression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			c, iss := env.Check(tt.src)
			assert.Less(t, time.Since(start), 2*time.Second)
			if tt.rule == "" {
				assert.Empty(t, iss)
				assert.NotNil(t, c)
				return
			}
			assert.Nil(t, c)
			require.NotEmpty(t, iss)
			assert.Equal(t, tt.rule, iss[0].Rule, "%v", iss)
			assert.Contains(t, iss[0].Message, tt.msg)
			assert.GreaterOrEqual(t, iss[0].Line, 1)
			assert.GreaterOrEqual(t, iss[0].Col, 1)
		})
	}
	t.Run("non-UTF-8 position", func(t *testing.T) {
		_, iss := env.Check("tool.name == '\xff'")
		require.Len(t, iss, 1)
		assert.Equal(t, 14, iss[0].Offset)
	})
}

func TestCheckIntersectsSchemas(t *testing.T) {
	env := toolEnv(t, "refund", "fetch_page")
	require.True(t, env.ArgsTyped())
	for _, tt := range []struct {
		src  string
		want string // "" for no issue, else a message fragment
	}{
		{"has(args.amount) && args.amount > 1.0", ""},
		{"args.amount > 1.0", "args.amount is optional"}, // required by refund only
		{"args.order_id == 'x'", "undefined field 'order_id'"},
		{"args.url == 'x'", "undefined field 'url'"},
		{"has(args.shipping) && args.shipping.country == 'US'", ""},
		{"has(args.shipping) && args.shipping.zip == '1'", "args.shipping.zip is optional"},
		{"has(args.shipping) && args.shipping.street == ''", "undefined field 'street'"},
		{"has(args.approved_by)", "undefined field 'approved_by'"},
	} {
		_, iss := env.Check(tt.src)
		if tt.want == "" {
			assert.Empty(t, iss, tt.src)
			continue
		}
		if assert.NotEmpty(t, iss, tt.src) {
			assert.Equal(t, RuleType, iss[0].Rule, tt.src)
			assert.Contains(t, iss[0].Message, tt.want, tt.src)
		}
	}

	t.Run("same schema twice equals one", func(t *testing.T) {
		twice := toolEnv(t, "refund", "refund")
		_, iss := twice.Check("args.amount > 1.0 && args.order_id == 'x'")
		assert.Empty(t, iss)
	})
	t.Run("an untyped schema makes args untyped", func(t *testing.T) {
		env, err := NewEnv(EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{schema(t, "refund"), json.RawMessage(`{}`)}})
		require.NoError(t, err)
		assert.False(t, env.ArgsTyped())
		c, iss := env.Check("args.anything == 1")
		require.Empty(t, iss)
		assert.True(t, c.ReadsUntypedArgs)
	})
	t.Run("incompatible schemas leave an empty object", func(t *testing.T) {
		env, err := NewEnv(EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{
			json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`),
			json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`),
		}})
		require.NoError(t, err)
		assert.True(t, env.ArgsTyped())
		_, iss := env.Check("has(args.a)")
		require.NotEmpty(t, iss)
		assert.Contains(t, iss[0].Message, "undefined field 'a'")
	})
}

func TestCheckUntypedArgs(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Tool})
	assert.False(t, env.ArgsTyped())
	for _, tt := range []struct {
		src   string
		reads bool
	}{
		{"args.amount > 100.0", true},
		{"has(args.x)", true},
		{"tool.name == 'refund'", false},
		{"[1, 2].exists(args, args == 2)", false}, // a comprehension variable shadows args
		{"[1, 2].exists(x, x == 2) && args.y == 1", true},
	} {
		c, iss := env.Check(tt.src)
		require.Empty(t, iss, tt.src)
		assert.Equal(t, tt.reads, c.ReadsUntypedArgs, tt.src)
	}
	// Untyped args catch nothing: a typo passes.
	_, iss := env.Check("args.ammount > 1.0")
	assert.Empty(t, iss)
	// Typed environments never flag.
	c, iss := toolEnv(t, "refund").Check("args.amount > 1.0")
	require.Empty(t, iss)
	assert.False(t, c.ReadsUntypedArgs)
	assert.Equal(t, []string{"args"}, c.Reads)
}

func TestCheckReads(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Chat, Phase: After})
	c, iss := env.Check("request.model == response.model && messages.all(m, m.role != '') && run.id != ''")
	require.Empty(t, iss)
	assert.Equal(t, []string{"messages", "request", "response", "run"}, c.Reads)
}

func TestStageVariables(t *testing.T) {
	tests := []struct {
		stage Stage
		phase Phase
		ok    []string
		bad   []string
	}{
		{Chat, Before,
			[]string{"request.model == 'primary'", "size(request.messages) == size(messages)", "request.max_tokens > 0", "run.agent == 'a'"},
			[]string{"response.text == ''", "args.x == 1", "tool.name == ''", "input.text == ''", "request.modle == 'x'", "messages[0].rol == 'user'"}},
		{Chat, After,
			[]string{"response.text == '' && response.model == 'm' && response.usage.input_tokens + response.usage.output_tokens > 10"},
			[]string{"result == 1", "output.text == ''"}},
		{Tool, Before,
			[]string{"tool.name == 'x'", "args.x == 1", "run.id == ''"},
			[]string{"result == 1", "request.model == ''"}},
		{Tool, After,
			[]string{"result.ok == true", "result == null"},
			[]string{"response.text == ''"}},
		{Turn, Before,
			[]string{"input.text == 'x' && session.id == 's' && has(session.meta.k)"},
			[]string{"output.text == ''", "status == 'ok'", "request.model == ''"}},
		{Turn, After,
			[]string{"output.text == '' && status == 'ok'"},
			[]string{"result == 1"}},
		{Admit, Before,
			[]string{"item.content != '' && item.source == 'kb' && item.score > 0.5 && item.metadata.tier != 'inferred'"},
			[]string{"run.id == ''", "request.model == ''", "item.scroe > 1.0"}},
	}
	for _, tt := range tests {
		env := mustEnv(t, EnvConfig{Stage: tt.stage, Phase: tt.phase})
		for _, src := range tt.ok {
			_, iss := env.Check(src)
			assert.Empty(t, iss, "%s/%s %q", tt.stage, tt.phase, src)
		}
		for _, src := range tt.bad {
			_, iss := env.Check(src)
			if assert.NotEmpty(t, iss, "%s/%s %q", tt.stage, tt.phase, src) {
				assert.Equal(t, RuleType, iss[0].Rule)
			}
		}
	}
}

func TestNewEnv(t *testing.T) {
	for _, tt := range []struct {
		cfg  EnvConfig
		want string
	}{
		{EnvConfig{Stage: "model"}, `unknown stage "model"`},
		{EnvConfig{Stage: Chat, Phase: "during"}, `unknown phase "during"`},
		{EnvConfig{Stage: Admit, Phase: After}, "admit has no after phase"},
		{EnvConfig{Stage: Chat, ArgsSchemas: []json.RawMessage{json.RawMessage(`{}`)}}, "tool stage only"},
		{EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type":`)}}, "args schema 0"},
		{EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type":"object","properties":{"a":3}}`)}}, "schema at a"},
		{EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type":7}`)}}, "type: want a string"},
	} {
		_, err := NewEnv(tt.cfg)
		if assert.Error(t, err, "%+v", tt.cfg) {
			assert.Contains(t, err.Error(), tt.want)
		}
	}

	t.Run("identical configurations share an environment", func(t *testing.T) {
		a := toolEnv(t, "refund")
		b, err := NewEnv(EnvConfig{Stage: Tool, Phase: Before, ArgsSchemas: []json.RawMessage{schema(t, "refund")}, CostLimit: DefaultCostLimit})
		require.NoError(t, err)
		assert.Same(t, a, b)
		c := toolEnv(t, "fetch_page")
		assert.NotSame(t, a, c)
		d := mustEnv(t, EnvConfig{Stage: Tool, Phase: After, ArgsSchemas: []json.RawMessage{schema(t, "refund")}})
		assert.NotSame(t, a, d)
	})
	t.Run("the zero phase is before", func(t *testing.T) {
		env := mustEnv(t, EnvConfig{Stage: Chat})
		assert.Equal(t, Before, env.Config().Phase)
		assert.Equal(t, DefaultCostLimit, env.Config().CostLimit)
	})
	t.Run("schemas without properties leave args untyped", func(t *testing.T) {
		for _, s := range []string{`{}`, `{"type":"object"}`, `true`, `null`, ``, `{"type":"string"}`} {
			env, err := NewEnv(EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(s)}})
			require.NoError(t, err, s)
			assert.False(t, env.ArgsTyped(), s)
		}
		env := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type":"object","additionalProperties":false}`)}})
		assert.True(t, env.ArgsTyped())
		_, iss := env.Check("has(args.x)")
		assert.NotEmpty(t, iss)
	})
}

// FuzzCheck feeds arbitrary text to Check: it must never panic and must return either a
// predicate or issues with valid positions.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"args.amount > 100.0 && !has(args.approved_by)",
		"args.ammount > 1",
		"((((true",
		"has(args.lines) && args.lines.all(l, l.count > 0)",
		"'\\u00e9' == tool.name",
		"tool.name.matches('[')",
		"args.?approved_by.orValue('') == ''",
		"1 / 0 == 1",
		"\xff",
		"}{",
	} {
		f.Add(s)
	}
	env := toolEnv(f, "refund")
	f.Fuzz(func(t *testing.T, src string) {
		c, iss := env.Check(src)
		if c == nil && len(iss) == 0 {
			t.Fatalf("no predicate and no issues for %q", src)
		}
		for _, i := range iss {
			if i.Line < 1 || i.Col < 1 || i.Offset < 0 || i.Offset > len(src) {
				t.Fatalf("bad position %+v for %q", i, src)
			}
		}
	})
}

func TestCheckConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			schemas := []string{"refund", "fetch_page"}[:1+g%2]
			for range 20 {
				env := toolEnv(t, schemas...)
				c, iss := env.Check("has(args.amount) && args.amount > 1.0")
				assert.Empty(t, iss)
				assert.NotNil(t, c)
				_, iss = env.Check("args.ammount > 1.0")
				assert.Len(t, iss, 1)
			}
		}()
	}
	wg.Wait()
}

func TestCheckKeyReads(t *testing.T) {
	admit := mustEnv(t, EnvConfig{Stage: Admit})
	tool := mustEnv(t, EnvConfig{Stage: Tool})
	tests := []struct {
		env  *Env
		src  string
		want []KeyRead
	}{
		{admit, "item.metadata.tier != 'inferred'", []KeyRead{{Map: "item.metadata", Key: "tier", Offset: 14}}},
		{admit, "item.metadata['tier'] != 'x'", []KeyRead{{Map: "item.metadata", Key: "tier", Offset: 14}}},
		{admit, "!has(item.metadata.tier) || item.metadata.tier != 'x'", []KeyRead{
			{Map: "item.metadata", Key: "tier", Offset: 19, Tested: true, Test: true},
			{Map: "item.metadata", Key: "tier", Offset: 42, Tested: true},
		}},
		{admit, "!('tier' in item.metadata) || item.metadata.tier != 'x'", []KeyRead{{Map: "item.metadata", Key: "tier", Offset: 44, Tested: true}}},
		{admit, "item.metadata.tier != 'x' && has(item.metadata.tier)", []KeyRead{
			{Map: "item.metadata", Key: "tier", Offset: 14, Tested: true},
			{Map: "item.metadata", Key: "tier", Offset: 47, Tested: true, Test: true},
		}},
		{admit, "has(item.metadata.a) && item.metadata.b == 'x'", []KeyRead{
			{Map: "item.metadata", Key: "a", Offset: 18, Tested: true, Test: true},
			{Map: "item.metadata", Key: "b", Offset: 38},
		}},
		{admit, "item.metadata.?tier.orValue('') != 'x'", nil},
		{admit, "item.metadata.exists(k, k == 'tier')", nil},
		{admit, "item.score > 0.5", nil},
		{tool, "args.amount > 100.0", []KeyRead{{Map: "args", Key: "amount", Offset: 5}}},
		{tool, "has(args.a) && args.a.b == 1", []KeyRead{
			{Map: "args", Key: "a", Offset: 9, Tested: true, Test: true},
			{Map: "args", Key: "a", Offset: 20, Tested: true},
			{Map: "args.a", Key: "b", Offset: 22},
		}},
		{tool, "has(args.a) && has(args.a.b) && args.a.b.c == 1", []KeyRead{
			{Map: "args", Key: "a", Offset: 9, Tested: true, Test: true},
			{Map: "args", Key: "a", Offset: 24, Tested: true},
			{Map: "args.a", Key: "b", Offset: 26, Tested: true, Test: true},
			{Map: "args", Key: "a", Offset: 37, Tested: true},
			{Map: "args.a", Key: "b", Offset: 39, Tested: true},
			{Map: "args.a.b", Key: "c", Offset: 41},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			c, iss := tt.env.Check(tt.src)
			require.Empty(t, iss)
			assert.Equal(t, tt.want, c.KeyReads)
		})
	}
}

// stringLiterals checks src and lists its comparisons with string
// constants as path, op and value run together, each placed at its
// constant.
func stringLiterals(t *testing.T, env *Env, src string) []string {
	t.Helper()
	c, issues := env.Check(src)
	require.Empty(t, issues)
	var got []string
	for _, l := range c.Literals {
		assert.Equal(t, "'"+l.Value+"'", src[l.Offset:l.Offset+len(l.Value)+2], l.Path)
		got = append(got, l.Path+l.Op+l.Value)
	}
	return got
}

func TestCheckListsLiteralComparisons(t *testing.T) {
	env, err := NewEnv(EnvConfig{Stage: Chat, Phase: After})
	require.NoError(t, err)
	src := `response.finish_reason == 'lenght' || 'gpt' != response.model ||
		response.tool_calls.exists(c, c.name in ['refund', 'lookup'] && response.tool_calls.all(c, c.id != 'x')) ||
		request.messages.exists(m, m.role == 'usr') || response.text == request.model`
	got := stringLiterals(t, env, src)
	assert.Equal(t, []string{"response.finish_reason==lenght", "response.model!=gpt",
		"response.tool_calls[].nameinrefund", "response.tool_calls[].nameinlookup", "response.tool_calls[].id!=x",
		"request.messages[].role==usr"}, got)
}

func TestCheckListsConstantsOfEveryKind(t *testing.T) {
	env, err := NewEnv(EnvConfig{Stage: Tool})
	require.NoError(t, err)
	src := `args.a == 5 || args.b > '100' || -2.5 <= args.c || args.d != true || args.e in [1u, 'x'] || args.f == tool.name`
	c, issues := env.Check(src)
	require.Empty(t, issues)
	var got []string
	for _, l := range c.Literals {
		constant := l.Value
		if l.Kind == "string" {
			constant = "'" + l.Value + "'"
		}
		assert.True(t, strings.HasPrefix(src[l.Offset:], constant), l.Path)
		got = append(got, l.Path+" "+l.Op+" "+l.Kind+":"+l.Value)
		assert.Equal(t, l.Kind == "string" && l.Op != ">", l.IsString(), l.Path)
	}
	assert.Equal(t, []string{"args.a == int:5", "args.b > string:100", "args.c >= double:-2.5",
		"args.d != bool:true", "args.e in uint:1", "args.e in string:x"}, got)
}

func TestCheckLiteralsTypeTheirField(t *testing.T) {
	env, err := NewEnv(EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(
		`{"type":"object","required":["n","x"],"properties":{"n":{"type":"integer"},"x":{"type":"number"}}}`)}})
	require.NoError(t, err)
	c, issues := env.Check(`args.n >= 0 || args.x < 0.0 || tool.name == 'refund'`)
	require.Empty(t, issues)
	var got []string
	for _, l := range c.Literals {
		got = append(got, l.Path+":"+l.FieldKind)
	}
	assert.Equal(t, []string{"args.n:int", "args.x:double", "tool.name:string"}, got)
}

// A field read as an optional with a default (args.?tier.orValue(”)) is
// compared as the field is: its constants are listed under the field's
// path, but not a constant the default equals, nor an in list that holds
// the default (the comparison holds where the field is absent), nor one
// compared with a default that is not a string constant.
func TestCheckListsLiteralsReadThroughOrValue(t *testing.T) {
	env, err := NewEnv(EnvConfig{Stage: Tool})
	require.NoError(t, err)
	src := `args.?tier.orValue('') == 'gld' || 'x' != args.?a.?b.orValue('') || args.?c.orValue('') in ['p', 'q'] ||
		args.?d.orValue('std') == 'std' || args.?e.orValue('s') in ['s', 't'] || args.?f.orValue(tool.name) == 'y' ||
		args.?g.orValue(0) == 3`
	got := stringLiterals(t, env, src)
	assert.Equal(t, []string{"args.tier==gld", "args.a.b!=x", "args.cinp", "args.cinq"}, got)
}

// The names of a list mapped to one of their fields
// (response.tool_calls.map(c, c.name)) are that field of the list's
// elements: a constant tested in the mapped list, or compared with a
// variable bound to its elements, is listed under the field's path.
func TestCheckListsLiteralsOfMappedLists(t *testing.T) {
	env, err := NewEnv(EnvConfig{Stage: Chat, Phase: After})
	require.NoError(t, err)
	src := `'refnd' in response.tool_calls.map(c, c.name) || response.tool_calls.map(c, c.name).exists(n, n == 'lokup') ||
		request.messages.map(m, m.role).exists(r, r != 'usr') || 'x' in request.tools.map(t, t.name + 's') ||
		'y' in response.tool_calls.filter(c, c.id != '').map(c, c.name)`
	got := stringLiterals(t, env, src)
	assert.Equal(t, []string{"response.tool_calls[].name==refnd", "response.tool_calls[].name==lokup",
		"request.messages[].role!=usr", "response.tool_calls[].name==y", "response.tool_calls[].id!="}, got)

	// A constant tested in a list read from the input, not in a map's keys.
	tool, err := NewEnv(EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type": "object", "required": ["tags", "labels"],
		"properties": {"tags": {"type": "array", "items": {"type": "string"}}, "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}`)}})
	require.NoError(t, err)
	assert.Equal(t, []string{"args.tags[]==urgent"}, stringLiterals(t, tool, `'urgent' in args.tags || 'env' in args.labels`))
}
