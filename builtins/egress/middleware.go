package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentc-dev/agentc/internal/argpath"
	"github.com/agentc-dev/agentc/internal/jsonpointer"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "egress"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageTool},
		Traits:  []runtime.Trait{runtime.TraitGuards},
		Doc:     "checks the URLs in a tool call's arguments: http/https only, host allowlist, no private or special addresses",
		New:     func() runtime.Middleware { return &Middleware{} },
	})
}

// Middleware is the egress layer; its exported fields are its config
// (schemas/egress.cue).
type Middleware struct {
	// Allow lists the hosts a tool may reach (Config.Allow).
	Allow []string `json:"allow"`
	// ScanArgs checks every URL written out anywhere in a call's
	// arguments as well (nil means true).
	ScanArgs *bool `json:"scan_args,omitempty"`
	// AllowPrivate lists the internal networks (CIDR prefixes or single
	// addresses) a tool may reach although their addresses are not public
	// (Config.AllowPrivate).
	AllowPrivate []string `json:"allow_private,omitempty"`

	name    string
	checker *Checker
	client  *http.Client
	refs    sync.Map // url_arg reference -> argpath.Path
	// scoped are the tools the layer's tools: names (Layer.Tools).
	scoped []string
}

// Provision builds the checker and the guarded HTTP client once; they look
// host names up with the pipeline's resolver (runtime.Deps.Resolver).
func (m *Middleware) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	m.scoped = b.Layer.Tools
	private, err := privatePrefixes(m.AllowPrivate)
	if err != nil {
		return err
	}
	c, err := New(Config{Allow: m.Allow, AllowPrivate: private, Resolver: b.Resolver()})
	if err != nil {
		return fmt.Errorf("allow: %w", err)
	}
	m.checker = c
	m.client = HTTPClient(c)
	return nil
}

// Validate requires the allow list (an empty list permits no host; write
// "*" to rely on the address checks alone) and parses each entry as
// Provision does, so that one the checker refuses ("localhost", "*.10.0.0.1")
// is a vet error at the entry rather than a failure to build.
func (m *Middleware) Validate() error {
	if m.Allow == nil {
		return errors.New(`allow is required (write ["*"] to allow any public host)`)
	}
	private, err := privatePrefixes(m.AllowPrivate)
	if err != nil {
		return err
	}
	c := &Checker{exact: map[string][]int{}, allowPrivate: private}
	for i, entry := range m.Allow {
		if err := c.addAllow(entry); err != nil {
			return fmt.Errorf("allow[%d]: %q can never be allowed: %w", i, entry, err)
		}
		if reason := c.literalReason(entry); reason != "" {
			return fmt.Errorf("allow[%d]: %q can never be allowed: %s, which egress refuses unless allow_private holds it", i, entry, reason)
		}
	}
	return nil
}

// literalReason reports why an allow entry that is an IP address (with or
// without a port) names an address c refuses, or "" (a name, a wildcard,
// a public address, one inside allow_private).
func (c *Checker) literalReason(entry string) string {
	host, _, err := splitAllowEntry(strings.TrimSpace(entry))
	if err != nil || host == "*" || strings.HasPrefix(host, "*.") {
		return ""
	}
	h, reason := normalizeHost(host)
	if reason != "" || !h.isIP() {
		return ""
	}
	return c.addrReason(h.addr)
}

// privatePrefixes parses allow_private: CIDR prefixes or single
// addresses. A prefix must name a network, not a large part of the
// address space (at least /8 for IPv4, /16 for IPv6), and may not hold a
// cloud metadata address or the unspecified address, which no tool should
// reach.
func privatePrefixes(entries []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(entries))
	for i, e := range entries {
		p, err := netip.ParsePrefix(strings.TrimSpace(e))
		if err != nil {
			a, aerr := netip.ParseAddr(strings.TrimSpace(e))
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("allow_private[%d]: %q is neither a CIDR prefix (10.20.0.0/16) nor an address", i, e)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		p = p.Masked()
		if a := p.Addr(); a.Is4In6() {
			p = netip.PrefixFrom(a.Unmap(), max(p.Bits()-96, 0))
		}
		minBits := 16
		if p.Addr().Is4() {
			minBits = 8
		}
		if p.Bits() < minBits {
			return nil, fmt.Errorf("allow_private[%d]: %q is wider than /%d: name the internal network a tool reaches", i, e, minBits)
		}
		for _, r := range slices.Concat(v4Rules, v6Rules) {
			if (r.reason == reasonMetadata || r.reason == reasonUnspecified) && p.Overlaps(r.prefix) {
				return nil, fmt.Errorf("allow_private[%d]: %q holds the %s %s, which no tool may reach", i, e, r.reason, r.prefix.Addr())
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Checker returns the layer's checker (nil before Provision).
func (m *Middleware) Checker() *Checker { return m.checker }

type clientKey struct{}

// guarded is what the layer puts on a tool call's context.
type guarded struct {
	checker *Checker
	client  *http.Client
}

// ClientFrom returns the guarded HTTP client of the innermost egress layer the
// tool call passed, for tools that fetch URLs: it re-checks every request and
// redirect against that layer's policy and dials only addresses that the
// policy allows (which also stops DNS rebinding). It reports false when no
// egress layer applied to the call; a tool should then refuse to fetch, or
// use a client of its own making.
func ClientFrom(ctx context.Context) (*http.Client, bool) {
	g, ok := ctx.Value(clientKey{}).(*guarded)
	if !ok {
		return nil, false
	}
	return g.client, true
}

// CheckerFrom returns the checker of the innermost egress layer the tool call
// passed, for tools that connect by other means than HTTP (use Dialer with
// it).
func CheckerFrom(ctx context.Context) (*Checker, bool) {
	g, ok := ctx.Value(clientKey{}).(*guarded)
	if !ok {
		return nil, false
	}
	return g.checker, true
}

// WrapTool implements runtime.ToolWrapper. A tool whose declaration has a
// url_arg has every string it references checked with CheckURL before the
// inner layers run (a name, a JSON pointer such as "/request/url" or
// "/urls/*", or a list of them): any refusal, a referenced argument that is
// missing or not a string, or an object member beside one whose name differs
// from it only in case blocks the call with a *runtime.BlockedError naming
// the layer; a failed name lookup is a transient *runtime.CallError. With
// scan_args false, a call of a tool the layer's tools: names that declares
// no url_arg is refused (unchecked). Every call that passes (with or
// without a url_arg) runs with the guarded client on its context
// (ClientFrom).
func (m *Middleware) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	g := &guarded{checker: m.checker, client: m.client}
	scan := m.ScanArgs == nil || *m.ScanArgs
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		var refs []string
		if c.Tool != nil {
			refs = c.Tool.URLRefs()
		}
		if err := m.unchecked(c, refs, scan); err != nil {
			return nil, err
		}
		if len(refs) > 0 || scan {
			if err := m.check(ctx, c, refs, scan); err != nil {
				return nil, err
			}
		}
		return next(context.WithValue(ctx, clientKey{}, g), c)
	}
}

// findURLs calls yield with each URL written out in a text: a scheme (a
// letter, then letters, digits, "+", "." or "-"), "://" and what follows up
// to a space, a quote or an angle bracket, as the regular expression
// (?i)[a-z][a-z0-9+.-]*://[^\s"'<>]* finds them (leftmost, not
// overlapping). What follows is kept whole (a backslash or an "@"
// included) so that the URL checked is the one a lenient parser would read;
// a URL that does not parse is refused.
func findURLs(s string, yield func(string)) {
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "://")
		if j < 0 {
			return
		}
		j += i
		k := j
		for k > i && isSchemeByte(s[k-1]) {
			k--
		}
		for k < j && !isLetter(s[k]) {
			k++
		}
		if k == j { // no scheme before this "://"
			i = j + 1
			continue
		}
		end := j + 3
		for end < len(s) && !isURLStop(s[end]) {
			end++
		}
		yield(s[k:end])
		i = end
	}
}

// findLenientURLs calls yield with each URL of a special scheme (http,
// https, ws, wss, ftp, file; any case) written without the "//" that
// findURLs looks for: the scheme (the whole run of scheme bytes before the
// colon, past leading digits and signs, as findURLs reads one), ":" and at
// least one byte up to the next space, quote or angle bracket, the next
// byte not "/" followed by "/" ("https:\\host/", "http:/host", "http:host").
// A WHATWG URL parser, which JavaScript's fetch and URL use, reads each as
// a URL to that host; net/url does not, so CheckURL refuses them as having
// no host.
func findLenientURLs(s string, yield func(string)) {
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], ':')
		if j < 0 {
			return
		}
		j += i
		next := j + 1
		if strings.HasPrefix(s[j:], "://") || next >= len(s) || isURLStop(s[next]) {
			i = next
			continue
		}
		k := j
		for k > 0 && isSchemeByte(s[k-1]) {
			k--
		}
		for k < j && !isLetter(s[k]) {
			k++
		}
		if !isSpecialScheme(s[k:j]) {
			i = next
			continue
		}
		end := next
		for end < len(s) && !isURLStop(s[end]) {
			end++
		}
		yield(s[k:end])
		i = end
	}
}

// isSpecialScheme reports the schemes a WHATWG URL parser reads an
// authority for even without "//".
func isSpecialScheme(scheme string) bool {
	for _, sp := range []string{"http", "https", "ws", "wss", "ftp", "file"} {
		if strings.EqualFold(scheme, sp) {
			return true
		}
	}
	return false
}

func isLetter(b byte) bool { return 'a' <= b|0x20 && b|0x20 <= 'z' }

func isSchemeByte(b byte) bool {
	return isLetter(b) || '0' <= b && b <= '9' || b == '+' || b == '.' || b == '-'
}

// isURLStop reports the bytes that end a URL in a text: the ASCII spaces
// of \s (tab, newline, form feed, carriage return, space), quotes and angle
// brackets.
func isURLStop(b byte) bool {
	switch b {
	case '\t', '\n', '\f', '\r', ' ', '"', '\'', '<', '>':
		return true
	}
	return false
}

// scan is the search of a call's arguments for URLs written out.
type scan struct {
	path []string // the member names and indexes down to the value scanned
	out  []argpath.Value
}

// at returns the location of the value scanned, as a JSON pointer.
func (sc *scan) at() string {
	var b strings.Builder
	for _, t := range sc.path {
		b.WriteByte('/')
		b.WriteString(t)
	}
	return b.String()
}

// value appends every URL written out in v (strings and object keys, at
// any depth) as a Value located at its argument. Locations are built only
// for the values that hold one.
func (sc *scan) value(v any) {
	switch x := v.(type) {
	case string:
		sc.text(x)
	case map[string]any:
		for k, e := range x {
			sc.path = append(sc.path, jsonpointer.Escape(k))
			sc.text(k)
			sc.value(e)
			sc.path = sc.path[:len(sc.path)-1]
		}
	case []any:
		for i, e := range x {
			sc.path = append(sc.path, strconv.Itoa(i))
			sc.value(e)
			sc.path = sc.path[:len(sc.path)-1]
		}
	case []string:
		for i, e := range x {
			sc.path = append(sc.path, strconv.Itoa(i))
			sc.text(e)
			sc.path = sc.path[:len(sc.path)-1]
		}
	case nil, bool, float64, float32, int, int64, int32, uint, uint64, uint32, json.Number:
	default:
		// A Go value of another type (a map[string]string, a struct):
		// scan its JSON form, which is what the tool is sent; one that has
		// none is scanned as its printed form.
		var j any
		if b, err := json.Marshal(x); err == nil && json.Unmarshal(b, &j) == nil {
			sc.value(j)
			return
		}
		sc.text(fmt.Sprint(x))
	}
}

func (sc *scan) text(s string) {
	if strings.IndexByte(s, ':') < 0 {
		return
	}
	at := ""
	add := func(u string) {
		if at == "" {
			at = sc.at()
		}
		sc.out = append(sc.out, argpath.Value{At: at, S: u})
	}
	if strings.Contains(s, "://") {
		findURLs(s, add)
	}
	findLenientURLs(s, add)
	if u, ok := whatwgJoined(s); ok {
		if strings.Contains(u, "://") {
			findURLs(u, add)
		}
		findLenientURLs(u, add)
	}
}

// whatwgJoined returns s as a WHATWG URL parser (a tool's fetch in
// JavaScript) reads it before parsing: without leading and trailing C0
// controls and spaces, and without any ASCII tab or newline inside, so that
// "http:\t//169.254.169.254/" or "https://allowed.example\n@10.0.0.8/" is
// checked as the URL such a tool would fetch. ok is false when s has no tab
// or newline, or when what is left still holds a space (prose, in which a
// line break after a URL ends it).
func whatwgJoined(s string) (string, bool) {
	if !strings.ContainsAny(s, "\t\n\r") {
		return "", false
	}
	t := strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	t = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, t)
	if strings.ContainsAny(t, " \f") {
		return "", false
	}
	return t, true
}

// scanURLs returns every URL written out in args, ordered by location (so
// that the refusal reported is the same from one call to the next).
func scanURLs(args map[string]any) []argpath.Value {
	var sc scan
	sc.value(args)
	if len(sc.out) > 1 {
		slices.SortStableFunc(sc.out, func(a, b argpath.Value) int { return strings.Compare(a.At, b.At) })
	}
	return sc.out
}

// parsed returns the parsed reference ref, parsed once per layer.
func (m *Middleware) parsed(ref string) (argpath.Path, error) {
	if p, ok := m.refs.Load(ref); ok {
		return p.(argpath.Path), nil
	}
	p, err := argpath.Parse(ref)
	if err == nil {
		m.refs.Store(ref, p)
	}
	return p, err
}

func (m *Middleware) check(ctx context.Context, c *runtime.ToolCall, refs []string, scan bool) error {
	var urls []argpath.Value
	for _, ref := range refs {
		p, err := m.parsed(ref)
		if err != nil {
			return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: url_arg: %v", c.Name, err)}
		}
		vs, err := argpath.Resolve(c.Args, p)
		if err != nil {
			return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: url %v", c.Name, err)}
		}
		urls = append(urls, vs...)
	}
	if scan {
		urls = append(urls, scanURLs(c.Args)...)
	}
	var seen map[string]bool // past a few URLs; before, a look back
	for i, u := range urls {
		if len(urls) > 16 {
			if seen == nil {
				seen = make(map[string]bool, len(urls))
			}
			if seen[u.S] {
				continue
			}
			seen[u.S] = true
		} else if slices.ContainsFunc(urls[:i], func(v argpath.Value) bool { return v.S == u.S }) {
			continue // checked already
		}
		err := m.checker.CheckURL(ctx, u.S)
		if err == nil {
			continue
		}
		var denied *DeniedError
		if errors.As(err, &denied) {
			return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: argument %s: %s denied: %s", c.Name, u.At, denied.URL, denied.Reason)}
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return runtime.NotRun(&runtime.CallError{Kind: runtime.KindTransient, Layer: m.name,
			Message: fmt.Sprintf("tool %s: cannot check %s", c.Name, u.S), Err: err})
	}
	return nil
}

// AdmitTool implements runtime.ToolAdmitter: the check WrapTool makes, of
// the URLs url_arg references and, with scan_args, of every URL written out
// in the arguments (a failed name lookup is its transient error: the call is
// not admitted).
func (m *Middleware) AdmitTool(ctx context.Context, c *runtime.ToolCall) error {
	var refs []string
	if c.Tool != nil {
		refs = c.Tool.URLRefs()
	}
	scan := m.ScanArgs == nil || *m.ScanArgs
	if err := m.unchecked(c, refs, scan); err != nil {
		return err
	}
	if len(refs) == 0 && !scan {
		return nil
	}
	return m.check(ctx, c, refs, scan)
}

// unchecked refuses a call the layer would check nothing of although its
// tools: names the tool: no url_arg (refs) and no scan of the arguments
// (scan_args false). An MCP tool the policy does not declare, or one that
// appeared upstream after the load, has no url_arg.
func (m *Middleware) unchecked(c *runtime.ToolCall, refs []string, scan bool) error {
	if scan || len(refs) > 0 || !slices.Contains(m.scoped, c.Name) {
		return nil
	}
	return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf(
		"tool %s declares no url_arg and the layer's scan_args is false: the layer is scoped to it (tools:) but would check none of its URLs, so the call is refused; declare its url_arg in the policy's tools: (agentc mcp-tools prints one for an MCP tool), turn scan_args on, or remove it from the layer's tools:", c.Name)}
}

var (
	_ runtime.ToolWrapper  = (*Middleware)(nil)
	_ runtime.ToolAdmitter = (*Middleware)(nil)
)
