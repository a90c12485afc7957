package vet

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// whenSource matches a `when` written in a test case: "..." with \" escapes.
var whenSource = regexp.MustCompile(`when: ("(?:[^"\\]|\\.)*")`)

// FuzzChatWhen: a chat `when` evaluated for a model, with everything but
// the model unknown, never panics, ends within a bound however large or
// deep the expression, and, when it says the `when` always or never
// applies to the model's calls, says what evaluating it on such a call
// gives (a wrong Never would leave a layer out of what a call meets).
func FuzzChatWhen(f *testing.F) {
	for _, s := range []string{"request.model == 'primary'", "request.model != 'primary'", "size(request.messages) > 2",
		"request.model.startsWith('gpt') && size(messages) > 0", "request.model in ['a', 'b'] || run.tenant == 'x'",
		"true", "1/0 == 1", "request.model == 'primary' ? false : true", "!(request.model == 'a' || request.params.temperature > 0.5)",
		"request.model.matches('^p.*')", "[1,2,3].all(x, x > 0 && request.model == 'primary')", "has(request.model)"} {
		f.Add(s, "primary")
		f.Add(s, "")
	}
	files, _ := filepath.Glob("testdata/*/*.txtar")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		for _, m := range whenSource.FindAllStringSubmatch(string(data), -1) {
			if src, err := strconv.Unquote(m[1]); err == nil {
				f.Add(src, "primary")
			}
		}
	}
	env, err := chatEnvironment()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src, model string) {
		start := time.Now()
		got := evalChatWhen(src, model)
		if d := time.Since(start); d > 2*evalTimeout {
			t.Fatalf("%q for %q: %v", src, model, d)
		}
		if got != Never && got != Depends && got != Always {
			t.Fatalf("%q for %q: %d", src, model, got)
		}
		if got == Depends || model == "" {
			return
		}
		ast, issue := checkPredicate(env, src)
		if issue != nil {
			t.Fatalf("%q for %q: %v, though it does not depend on the call", src, model, issue.message)
		}
		prg, err := env.Program(ast, programOptions...)
		if err != nil {
			t.Fatal(err)
		}
		for _, call := range []map[string]any{
			{"request": map[string]any{"model": model, "messages": []any{}, "max_tokens": 0, "tools": []any{}, "params": map[string]any{}},
				"messages": []any{}, "run": map[string]any{"id": "r", "tenant": ""}},
			{"request": map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 100,
				"tools": []any{map[string]any{"name": "t"}}, "params": map[string]any{"temperature": 0.7}},
				"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "run": map[string]any{"id": "r2", "tenant": "t"}},
		} {
			out, err := evalBounded(prg, call)
			if err != nil {
				continue
			}
			if v, known := boolValue(out); known && v != (got == Always) {
				t.Fatalf("%q for %q: %v said, %v on a call of the model", src, model, got, v)
			}
		}
	})
}
