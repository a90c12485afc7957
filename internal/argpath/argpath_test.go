package argpath

import (
	"reflect"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	args := map[string]any{
		"url":     "http://a/",
		"request": map[string]any{"url": "http://b/"},
		"files":   []any{map[string]any{"path": "x"}, map[string]any{"path": "y"}},
		"urls":    []any{"http://c/", "http://d/"},
		"none":    []any{},
	}
	for ref, want := range map[string][]string{
		"url":           {"http://a/"},
		"/url":          {"http://a/"},
		"/request/url":  {"http://b/"},
		"/files/*/path": {"x", "y"},
		"/urls/*":       {"http://c/", "http://d/"},
		"/none/*":       nil,
	} {
		p, err := Parse(ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		vs, err := Resolve(args, p)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		var got []string
		for _, v := range vs {
			got = append(got, v.S)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %q, want %q", ref, got, want)
		}
	}
}

func TestResolveRefuses(t *testing.T) {
	for _, c := range []struct {
		ref  string
		args map[string]any
		want string
	}{
		{"url", map[string]any{}, "/url is missing"},
		{"url", map[string]any{"url": nil}, "/url is null, not a string"},
		{"url", map[string]any{"url": 7.0}, "/url is a number"},
		{"url", map[string]any{"url": []any{"http://a/"}}, "/url is an array"},
		{"url", map[string]any{"url": map[string]any{"href": "http://a/"}}, "/url is an object"},
		{"url", map[string]any{"url": "http://a/", "URL": "http://b/"}, "/URL differs from /url only in case"},
		{"/request/url", map[string]any{"request": "http://a/"}, "/request is a string, not an object"},
		{"/request/url", map[string]any{"request": nil}, "/request is null, not an object"},
		{"/request/url", map[string]any{"request": map[string]any{"Url": "x", "url": "y"}}, "/request/Url differs"},
		{"/urls/*", map[string]any{"urls": "http://a/"}, "/urls is a string, not an array"},
		{"/urls/*", map[string]any{"urls": []any{"http://a/", 3.0}}, "/urls/1 is a number"},
		{"/files/*/path", map[string]any{"files": []any{map[string]any{"name": "x"}}}, "/files/0/path is missing"},
	} {
		p, err := Parse(c.ref)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Resolve(c.args, p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: got %v, want %q", c.ref, c.args, err, c.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, ref := range []string{"", "/", "/*", "/a//b", "/a/"} {
		if _, err := Parse(ref); err == nil {
			t.Errorf("%q parsed", ref)
		}
	}
}

func TestReplaceCopies(t *testing.T) {
	inner := map[string]any{"path": "a"}
	files := []any{inner, map[string]any{"path": "b"}}
	args := map[string]any{"files": files}
	p, _ := Parse("/files/*/path")
	vs, _ := Resolve(args, p)
	out := Replace(args, vs[1], "B")
	out = Replace(out, vs[0], "A")
	if inner["path"] != "a" || files[1].(map[string]any)["path"] != "b" {
		t.Fatal("args modified")
	}
	got := out["files"].([]any)
	if got[0].(map[string]any)["path"] != "A" || got[1].(map[string]any)["path"] != "B" {
		t.Fatalf("got %v", out)
	}
}
