package egress_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/egress"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func egressPipeline(t testing.TB, config string, fn runtime.ToolFunc) *runtime.Pipeline {
	t.Helper()
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("net_policy", rt.Layer("egress", config))}})
	p.Tools = map[string]plan.Tool{"fetch_page": {URLArg: "url"}, "search_kb": {}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"fetch_page": fn, "search_kb": fn}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	return pl
}

func TestMiddlewareChecksURLArg(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "page"})
	pl := egressPipeline(t, `{"allow":["*"]}`, tool.Func())
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		blocked string // substring of the block message; "" passes
	}{
		{"metadata endpoint", "fetch_page", map[string]any{"url": "http://169.254.169.254/latest/meta-data/"}, "169.254.169.254"},
		{"decimal loopback", "fetch_page", map[string]any{"url": "http://2130706433/"}, "2130706433"},
		{"hex loopback", "fetch_page", map[string]any{"url": "http://0x7f000001/"}, "0x7f000001"},
		{"loopback literal", "fetch_page", map[string]any{"url": "http://127.0.0.1:8080/"}, "loopback"},
		{"private range", "fetch_page", map[string]any{"url": "https://10.0.0.8/"}, "10.0.0.8"},
		{"file scheme", "fetch_page", map[string]any{"url": "file:///etc/passwd"}, "scheme"},
		{"userinfo", "fetch_page", map[string]any{"url": "http://user:pw@93.184.215.14/"}, "userinfo"},
		{"missing url", "fetch_page", map[string]any{}, "missing"},
		{"url not a string", "fetch_page", map[string]any{"url": 42.0}, "not a string"},
		{"url in another case beside it", "fetch_page", map[string]any{"url": "https://93.184.215.14/", "URL": "http://169.254.169.254/"}, `/URL differs from /url only in case`},
		{"public literal", "fetch_page", map[string]any{"url": "https://93.184.215.14/index.html"}, ""},
		{"tool without url_arg", "search_kb", map[string]any{"url": "http://169.254.169.254/"}, "/url: http://169.254.169.254/"},
		{"tool without url_arg, public url", "search_kb", map[string]any{"q": "see https://93.184.215.14/a."}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tool.Calls()
			_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: tt.tool, Args: tt.args})
			if tt.blocked == "" {
				require.NoError(t, err)
				assert.Equal(t, before+1, tool.Calls())
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, "net_policy", b.Layer)
			assert.Contains(t, b.Message, tt.blocked)
			assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err))
			assert.Equal(t, before, tool.Calls(), "a refused URL never reaches the tool")
		})
	}
}

func TestMiddlewareAllowlist(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "page"})
	pl := egressPipeline(t, `{"allow":["93.184.215.14"]}`, tool.Func())
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "fetch_page", Args: map[string]any{"url": "http://93.184.215.14/"}})
	require.NoError(t, err)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "fetch_page", Args: map[string]any{"url": "http://93.184.215.15/"}})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Contains(t, b.Message, "not allowed")
	assert.Equal(t, 1, tool.Calls())
}

// TestClientFromRefusesLoopback: the client a tool gets from the context
// re-checks at request time, so a tool that builds its own URL cannot reach a
// loopback server either.
func TestClientFromRefusesLoopback(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("secret"))
	}))
	defer srv.Close()

	var gotClient bool
	var fetchErr error
	fn := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		client, ok := egress.ClientFrom(ctx)
		gotClient = ok
		if !ok {
			return nil, nil
		}
		_, isChecker := egress.CheckerFrom(ctx)
		assert.True(t, isChecker)
		resp, err := client.Get(srv.URL)
		if err == nil {
			_ = resp.Body.Close()
		}
		fetchErr = err
		return nil, nil
	}
	pl := egressPipeline(t, `{"allow":["*"]}`, fn)
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "search_kb"})
	require.NoError(t, err)
	require.True(t, gotClient, "the layer puts its client on the call's context")
	var denied *egress.DeniedError
	assert.ErrorAs(t, fetchErr, &denied)
	assert.Zero(t, hits.Load(), "the loopback server was never reached")

	_, ok := egress.ClientFrom(context.Background())
	assert.False(t, ok)
}

func TestMiddlewareConfigErrors(t *testing.T) {
	for _, cfg := range []string{`{}`, `{"allow":["bad host!"]}`, `{"allow":["*"],"extra":1}`} {
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("egress", cfg)}})
		_, err := runtime.Build(context.Background(), p, runtime.Deps{})
		assert.Error(t, err, cfg)
	}
}

func BenchmarkMiddlewareCheck(b *testing.B) {
	fn := func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil }
	pl := egressPipeline(b, `{"allow":["*"]}`, fn)
	ctx := context.Background()
	req := runtime.ToolRequest{Name: "fetch_page", Args: map[string]any{"url": "https://93.184.215.14/index.html?q=1"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pl.Tool(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMiddlewareChecksNestedAndSeveralURLs: a url_arg may be a JSON pointer
// into the arguments (with "*" for each element of an array) or a list of
// references; every string reached is checked, and any refused one, or one
// that is missing or not a string, refuses the call.
func TestMiddlewareChecksNestedAndSeveralURLs(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "page"})
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("net_policy", rt.Layer("egress", `{"allow":["*"]}`))}})
	p.Tools = map[string]plan.Tool{
		"nested": {URLArg: "/request/url"},
		"list":   {URLArg: "/urls/*"},
		"deep":   {URLArg: "/links/*/href"},
		"two":    {URLArg: "primary", URLArgs: []string{"primary", "mirror"}},
	}
	fn := tool.Func()
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"nested": fn, "list": fn, "deep": fn, "two": fn}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	const good, bad = "https://93.184.215.14/", "http://169.254.169.254/latest/meta-data/"
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		blocked string
	}{
		{"nested good", "nested", map[string]any{"request": map[string]any{"url": good}}, ""},
		{"nested metadata", "nested", map[string]any{"request": map[string]any{"url": bad}}, "/request/url"},
		{"nested case variant", "nested", map[string]any{"request": map[string]any{"url": good, "URL": bad}}, "only in case"},
		{"nested not an object", "nested", map[string]any{"request": bad}, "not an object"},
		{"nested null", "nested", map[string]any{"request": nil}, "null"},
		{"nested missing", "nested", map[string]any{}, "missing"},
		{"nested url a number", "nested", map[string]any{"request": map[string]any{"url": 2130706433.0}}, "not a string"},
		{"list good", "list", map[string]any{"urls": []any{good, good}}, ""},
		{"list empty", "list", map[string]any{"urls": []any{}}, ""},
		{"list second bad", "list", map[string]any{"urls": []any{good, bad}}, "/urls/1"},
		{"list a string", "list", map[string]any{"urls": bad}, "not an array"},
		{"list element an array", "list", map[string]any{"urls": []any{[]any{bad}}}, "not a string"},
		{"deep bad", "deep", map[string]any{"links": []any{map[string]any{"href": good}, map[string]any{"href": "http://[::ffff:127.0.0.1]/"}}}, "/links/1/href"},
		{"two good", "two", map[string]any{"primary": good, "mirror": good}, ""},
		{"two mirror bad", "two", map[string]any{"primary": good, "mirror": "http://good.example@169.254.169.254/"}, "/mirror"},
		{"two mirror missing", "two", map[string]any{"primary": good}, "/mirror is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tool.Calls()
			_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: tt.tool, Args: tt.args})
			if tt.blocked == "" {
				require.NoError(t, err)
				assert.Equal(t, before+1, tool.Calls())
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Contains(t, b.Message, tt.blocked)
			assert.Equal(t, before, tool.Calls(), "a refused call never reaches the tool")
		})
	}
}

// TestMiddlewareScansUndeclaredURLs: a URL written anywhere in a call's
// arguments, declared by url_arg or not, is checked (scan_args, on by
// default); scan_args false leaves undeclared ones to the tool.
func TestMiddlewareScansUndeclaredURLs(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	pl := egressPipeline(t, `{"allow":["93.184.215.14"]}`, tool.Func())
	for name, args := range map[string]map[string]any{
		"webhook beside the url":   {"url": "https://93.184.215.14/", "callback": "http://10.0.0.8/hook"},
		"url in free text":         {"q": "summarise http://[::ffff:169.254.169.254]/latest please"},
		"nested deep":              {"opts": map[string]any{"headers": []any{map[string]any{"Referer": "http://127.0.0.1:8080/admin"}}}},
		"url as an object key":     {"opts": map[string]any{"http://169.254.169.254/": true}},
		"host not allowed":         {"q": "https://evil.example/x"},
		"other scheme":             {"q": "gopher://93.184.215.14:70/_x"},
		"backslash userinfo trick": {"q": `http://93.184.215.14\@127.0.0.1/`},
		"upper-case scheme":        {"q": "HTTP://169.254.169.254/"},
		"go map of strings":        {"opts": map[string]string{"hook": "http://169.254.169.254/"}},
		"go struct":                {"opts": struct{ Hook string }{"http://10.1.2.3/"}},
	} {
		tname := "search_kb"
		if _, ok := args["url"]; ok {
			tname = "fetch_page"
		}
		before := tool.Calls()
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: tname, Args: args})
		require.ErrorAs(t, err, new(*runtime.BlockedError), name)
		assert.Equal(t, before, tool.Calls(), name)
	}
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "search_kb", Args: map[string]any{"q": "no link here, just text: a://"}})
	require.Error(t, err, "a scheme with no host is not a url to let through")

	off := egressPipeline(t, `{"allow":["93.184.215.14"],"scan_args":false}`, tool.Func())
	_, err = off.Tool(context.Background(), runtime.ToolRequest{Name: "search_kb", Args: map[string]any{"q": "http://169.254.169.254/"}})
	require.NoError(t, err, "scan_args false leaves undeclared arguments alone")
	_, err = off.Tool(context.Background(), runtime.ToolRequest{Name: "fetch_page", Args: map[string]any{"url": "http://169.254.169.254/"}})
	require.ErrorAs(t, err, new(*runtime.BlockedError), "url_arg is checked whatever scan_args says")
}

// TestFindURLsMatchesItsExpression holds the byte scanner to the regular
// expression its doc gives, on texts built to find the edges: schemes after
// digits and signs, "://" with no scheme, back-to-back URLs, every stop
// byte, non-ASCII text.
func TestFindURLsMatchesItsExpression(t *testing.T) {
	re := regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://[^\s"'<>]*`)
	texts := []string{
		"", "://", "a://", "1://", "1a://x", "+a.b-c://h/p?q", "see https://x.example/a and http://y",
		"HTTP://A.B", "x://y://z", "ftp://a\tb", "u://a\"b'c<d>e f\ng\rh\fi\vj", "é://x", "aé://x",
		"http://[::1]/", "http://a@169.254.169.254/", `http:\\169.254.169.254`, "://a://b", "a-://b", "-a://b",
		"https://x.example/ü?q=ß", "javascript://%0aalert(1)", "a:// b", "a://", "zz://yy://xx",
	}
	alphabet := []byte("ab1+.-:/ \t\"'<>@\\xé")
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		b := make([]byte, rnd.IntN(24))
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		texts = append(texts, string(b))
	}
	for _, s := range texts {
		var got []string
		egress.FindURLs(s, func(u string) { got = append(got, u) })
		assert.Equal(t, re.FindAllString(s, -1), got, "%q", s)
	}
}

// TestMiddlewareScansLenientURLs: a URL of a special scheme written without
// "//" ("https:\\169.254.169.254/", "http:/169.254.169.254/",
// "http:169.254.169.254"), which a WHATWG URL parser (a tool's fetch in
// JavaScript) reads as a URL to that host, is refused in an argument no
// url_arg names; text with a colon that is not such a URL passes.
func TestMiddlewareScansLenientURLs(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	pl := egressPipeline(t, `{"allow":["*"]}`, tool.Func())
	for _, s := range []string{`https:\\169.254.169.254/latest/meta-data/`, "http:/169.254.169.254/", "see HTTP:169.254.169.254",
		"ws:\\\\127.0.0.1:9222/devtools", "file:/etc/passwd"} {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "search_kb", Args: map[string]any{"callback": s}})
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b, "%q", s)
		assert.Contains(t, b.Message, "/callback", "%q", s)
	}
	assert.Zero(t, tool.Calls())
	for _, s := range []string{"note: http is the protocol", "ratio 3:4, time 12:30", "mailto:a@example.com", "https: the secure one", "xhttp:/a"} {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "search_kb", Args: map[string]any{"q": s}})
		require.NoError(t, err, "%q", s)
	}
}

// docsResolver answers for docs.example.com alone, with a public address:
// no lookup of these tests leaves the process.
type docsResolver struct{}

func (docsResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "docs.example.com" {
		return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
	}
	return nil, errors.New("no such host")
}

// TestMiddlewareScansURLsSplitByTabsAndNewlines: a WHATWG URL parser (a
// tool's fetch in JavaScript) removes every ASCII tab and newline from a URL
// before it reads it, so a value that is one URL once they are gone is
// refused as that URL, not read as the harmless pieces around the break.
// Prose that breaks a line after a URL still passes.
func TestMiddlewareScansURLsSplitByTabsAndNewlines(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("net_policy", rt.Layer("egress", `{"allow":["docs.example.com"]}`))}})
	p.Tools = map[string]plan.Tool{"search_kb": {}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Resolver: docsResolver{},
		Tools: map[string]runtime.ToolFunc{"search_kb": tool.Func()}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	for _, s := range []string{
		"http:\t//169.254.169.254/latest",
		"http:/\t/169.254.169.254/latest",
		"https://docs.example.com\n@169.254.169.254/",
		"https://docs.example.com\r\n.evil.example/",
		" https://docs.ex\tample.com@10.0.0.8/ ",
	} {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "search_kb", Args: map[string]any{"callback": s}})
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b, "%q", s)
		assert.Contains(t, b.Message, "/callback", "%q", s)
	}
	assert.Zero(t, tool.Calls())
	for _, s := range []string{
		"see https://docs.example.com\nthanks",
		"https://docs.example.com/a\n\thttps://docs.example.com/b",
		"sources:\n  https://docs.example.com\n  https://docs.example.com/faq",
	} {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "search_kb", Args: map[string]any{"q": s}})
		require.NoError(t, err, "%q", s)
	}
}

// flakyResolver fails its first lookup, then answers like docsResolver.
type flakyResolver struct{ calls atomic.Int32 }

func (r *flakyResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if r.calls.Add(1) == 1 {
		return nil, errors.New("dns server unreachable")
	}
	return docsResolver{}.LookupNetIP(ctx, network, host)
}

// TestALookupFailureProvesTheToolDidNotRun: a URL the layer could not check
// refuses the call before it reaches the tool, so a retry outside may run a
// side-effecting tool that is not retry_safe again.
func TestALookupFailureProvesTheToolDidNotRun(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "posted"})
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Layer("retry", `{"max_attempts":2,"initial_delay":"1ms","max_delay":"1ms"}`),
		rt.Named("net_policy", rt.Layer("egress", `{"allow":["docs.example.com"]}`)),
	}})
	p.Tools = map[string]plan.Tool{"post": {SideEffecting: true, URLArg: "url"}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Resolver: &flakyResolver{},
		Tools: map[string]runtime.ToolFunc{"post": tool.Func()}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "post", Args: map[string]any{"url": "https://docs.example.com/x"}})
	require.NoError(t, err)
	assert.Equal(t, "posted", res.Value)
	assert.Equal(t, 2, res.Attempts)
	assert.Equal(t, 1, tool.Calls())
}

// An allow entry the checker refuses is refused by Validate, which agentc vet
// runs, naming the entry: not first by Build.
func TestValidateRefusesAllowEntries(t *testing.T) {
	for entry, reason := range map[string]string{
		"localhost":        "localhost name",
		"*.localhost":      "localhost name",
		"*.10.0.0.1":       "a wildcard cannot name an ip address",
		"2130706433":       "ambiguous numeric host",
		"api..example":     "invalid host name",
		"api.example:0":    "invalid port",
		"[::ffff:1.2.3.4]": "ipv4-mapped",
		// Addresses refused whatever the list says: an internal service
		// named by its address is never reached.
		"10.0.0.5":           "private address",
		"169.254.169.254:80": "cloud metadata address",
		"[::1]":              "loopback address",
		"192.168.1.10:8443":  "private address",
	} {
		known, err := runtime.ValidateConfig("egress", []byte(`{"allow":["api.example.com",`+strconv.Quote(entry)+`]}`))
		assert.True(t, known)
		if assert.Error(t, err, entry) {
			assert.Contains(t, err.Error(), `allow[1]: `+strconv.Quote(entry)+` can never be allowed: `+reason, entry)
		}
	}
	known, err := runtime.ValidateConfig("egress", []byte(`{"allow":["api.example.com:8443","*.example.org","93.184.216.34","93.184.216.34:8443","[2606:4700::1111]","*"]}`))
	assert.True(t, known)
	assert.NoError(t, err)
}

// internalResolver answers for two internal names: crm.internal inside the
// network allow_private names, hr.internal outside it.
type internalResolver struct{}

func (internalResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	switch host {
	case "crm.internal":
		return []netip.Addr{netip.MustParseAddr("10.20.3.4")}, nil
	case "hr.internal":
		return []netip.Addr{netip.MustParseAddr("10.30.0.9")}, nil
	}
	return nil, errors.New("no such host")
}

// allow_private lets a tool reach one internal network, by name or address,
// when allow lists the host too; every other private or special address
// stays refused, the metadata endpoint among them.
func TestAllowPrivateReachesOneInternalNetwork(t *testing.T) {
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	cfg := `{"allow":["crm.internal","hr.internal","10.20.0.7:8443","*"],"allow_private":["10.20.0.0/16"]}`
	known, err := runtime.ValidateConfig("egress", []byte(cfg))
	require.True(t, known)
	require.NoError(t, err)
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("net_policy", rt.Layer("egress", cfg))}})
	p.Tools = map[string]plan.Tool{"fetch_page": {URLArg: "url"}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Resolver: internalResolver{},
		Tools: map[string]runtime.ToolFunc{"fetch_page": tool.Func()}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	for url, blocked := range map[string]string{
		"https://crm.internal/accounts":            "",
		"https://10.20.0.7:8443/":                  "",
		"https://10.20.9.9/":                       "",
		"https://hr.internal/salaries":             "10.30.0.9",
		"http://10.0.0.8/":                         "private address",
		"http://169.254.169.254/latest/meta-data/": "cloud metadata",
		"http://127.0.0.1:6379/":                   "loopback",
	} {
		before := tool.Calls()
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "fetch_page", Args: map[string]any{"url": url}})
		if blocked == "" {
			require.NoError(t, err, url)
			assert.Equal(t, before+1, tool.Calls(), url)
			continue
		}
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b, url)
		assert.Contains(t, b.Message, blocked, url)
		assert.Equal(t, before, tool.Calls(), url)
	}

	for cfg, want := range map[string]string{
		`{"allow":["*"],"allow_private":["10.0.0.0/4"]}`:           `allow_private[0]: "10.0.0.0/4" is wider than /8`,
		`{"allow":["*"],"allow_private":["169.254.0.0/16"]}`:       `holds the cloud metadata address 169.254.169.254`,
		`{"allow":["*"],"allow_private":["fd00::/8"]}`:             `wider than /16`,
		`{"allow":["*"],"allow_private":["fd00:ec2::/32"]}`:        `holds the cloud metadata address fd00:ec2::254`,
		`{"allow":["*"],"allow_private":["intranet"]}`:             `is neither a CIDR prefix`,
		`{"allow":["10.30.0.9"],"allow_private":["10.20.0.0/16"]}`: `allow[0]: "10.30.0.9" can never be allowed: private address, which egress refuses unless allow_private holds it`,
	} {
		_, err := runtime.ValidateConfig("egress", []byte(cfg))
		if assert.Error(t, err, cfg) {
			assert.Contains(t, err.Error(), want, cfg)
		}
	}
}

// TestScopedToAToolWithoutURLArgFailsClosed: an egress layer with
// scan_args false whose tools: names a tool that declares no url_arg (an
// MCP tool the policy does not declare) checks nothing of its calls: such a
// call is refused, run here or proposed, naming the tool and what to
// declare. With scan_args on, the scan checks it; a tool the layer is not
// scoped to passes as before.
func TestScopedToAToolWithoutURLArgFailsClosed(t *testing.T) {
	build := func(config string) *runtime.Pipeline {
		layer := rt.Named("net_policy", rt.Layer("egress", config))
		layer.Tools = []string{"fetch", "undeclared", "fetch_page"}
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{layer}})
		p.Tools = map[string]plan.Tool{"fetch": {}, "fetch_page": {URLArg: "url"}, "search_kb": {}}
		fn := rt.NewTool(rt.ToolResult{Value: "ok"}).Func()
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{
			"fetch": fn, "undeclared": fn, "fetch_page": fn, "search_kb": fn}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = pl.Close() })
		return pl
	}
	off := build(`{"allow":["93.184.215.14"],"scan_args":false}`)
	for _, tool := range []string{"fetch", "undeclared"} {
		req := runtime.ToolRequest{Name: tool, Args: map[string]any{"url": "https://93.184.215.14/"}}
		_, runErr := off.Tool(context.Background(), req)
		for name, err := range map[string]error{"run": runErr, "proposed": off.AdmitTool(context.Background(), req)} {
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b, "%s %s", name, tool)
			assert.Equal(t, "net_policy", b.Layer)
			assert.Contains(t, b.Message, "tool "+tool+" declares no url_arg")
			assert.Contains(t, b.Message, "declare its url_arg")
		}
	}
	_, err := off.Tool(context.Background(), runtime.ToolRequest{Name: "search_kb", Args: map[string]any{"q": "http://169.254.169.254/"}})
	require.NoError(t, err, "a tool outside the layer's tools: passes")
	_, err = off.Tool(context.Background(), runtime.ToolRequest{Name: "fetch_page", Args: map[string]any{"url": "https://93.184.215.14/"}})
	require.NoError(t, err)

	on := build(`{"allow":["93.184.215.14"]}`)
	_, err = on.Tool(context.Background(), runtime.ToolRequest{Name: "fetch", Args: map[string]any{"url": "https://93.184.215.14/"}})
	require.NoError(t, err, "scan_args checks the URLs of a tool without url_arg")
	_, err = on.Tool(context.Background(), runtime.ToolRequest{Name: "fetch", Args: map[string]any{"url": "http://169.254.169.254/"}})
	require.ErrorAs(t, err, new(*runtime.BlockedError))
}
