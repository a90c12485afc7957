package dsl

import (
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"

	"cuelang.org/go/cue"

	"github.com/agentc-dev/agentc/internal/credential"
	"github.com/agentc-dev/agentc/internal/envtmpl"
)

// secretValue returns the expression that matches the shapes of common
// credentials (credential.Value).
var secretValue = credential.Value

// KeyShaped reports whether a value given as the name of an environment
// variable is rather a key: a known credential shape, a run of lower-case
// hex with digits (openssl rand -hex), or a long mix of upper-case,
// lower-case and digits without the underscores of a variable's name.
func KeyShaped(name string) bool {
	if secretValue().MatchString(name) || len(name) >= 16 && hexKey().MatchString(name) {
		return true
	}
	if len(name) < 20 || strings.Contains(name, "_") {
		return false
	}
	return strings.ContainsAny(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") && strings.ContainsAny(name, "abcdefghijklmnopqrstuvwxyz") &&
		strings.ContainsAny(name, "0123456789")
}

// hexKey matches 16 or more lower-case hex digits with a digit among them.
var hexKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]*[0-9][0-9a-f]*$`) })

// literalSecret reports whether value, given for name, is a credential
// written out rather than a reference to one.
func literalSecret(name, value string) bool {
	if credential.Var("", value) {
		return true
	}
	if !credential.Var(name, "") || len(value) < 8 || strings.ContainsAny(value, " \t") {
		return false
	}
	// A reference, a file or a URL holding the secret is not the secret.
	for _, p := range []string{"$", "/", "./", "~", "http://", "https://", "file:"} {
		if strings.HasPrefix(value, p) {
			return false
		}
	}
	return true
}

// Key is a virtual API key of `agentc serve`: exactly one of SHA256 (hex)
// and Env (the variable holding the key).
type Key struct {
	Name   string
	Pos    Pos
	SHA256 string
	Env    string
	// Tenant defaults to the key's name; TenantPos is where it is set
	// (invalid when it is not).
	Tenant    string
	TenantPos Pos
}

// MCPServer is an upstream MCP server of `agentc serve`: exactly one of
// Command and URL.
type MCPServer struct {
	Name    string
	Pos     Pos
	Command []string
	URL     string
	Env     map[string]string
	Prefix  string
	// Headers are sent with every request to a URL server; their values
	// may name environment variables as ${NAME} (internal/envtmpl).
	Headers map[string]string
	// Session is "client", "tenant" or "shared" ("" when not given), and
	// MaxSessions the bound on the sessions open (0 when not given).
	Session     string
	MaxSessions int
}

// decodeServe decodes keys and mcp.servers and checks that each has exactly
// one of its alternative fields.
func (l *loader) decodeServe(p *Policy, v cue.Value) {
	p.Keys = map[string]*Key{}
	p.MCPServers = map[string]*MCPServer{}
	eachField(l.user, v, "keys", func(name string, kv cue.Value) {
		k := &Key{Name: name, Pos: l.labelPos("keys", name), Tenant: name}
		k.SHA256, _ = kv.LookupPath(cue.ParsePath("sha256")).String()
		k.Env, _ = kv.LookupPath(cue.ParsePath("env")).String()
		if t, err := kv.LookupPath(cue.ParsePath("tenant")).String(); err == nil {
			k.Tenant, k.TenantPos = t, l.userPos([]string{"keys", name, "tenant"})
		}
		hasSHA, hasEnv := kv.LookupPath(cue.ParsePath("sha256")).Exists(), kv.LookupPath(cue.ParsePath("env")).Exists()
		if hasEnv && KeyShaped(k.Env) {
			l.errorf(l.userPos([]string{"keys", name, "env"}), "schema/invalid-value", "key %q: env holds what looks like a key, not the name of the variable that holds it: the policy and the plan would carry it; put the key in a variable of agentc serve's environment and name the variable here (env: \"SUPPORT_KEY\"), or give its sha256", name)
		}
		switch {
		case !hasSHA && !hasEnv:
			l.errorf(k.Pos, "schema/missing-field", "key %q needs sha256 (the hex SHA-256 of the key) or env (the variable holding it)", name)
		case hasSHA && hasEnv:
			l.errorf(l.userPos([]string{"keys", name, "env"}), "schema/invalid-value", "key %q gives both sha256 and env; give one", name)
		}
		p.Keys[name] = k
	})
	if len(p.Keys) > 0 {
		p.KeysPos, _ = l.pos.lookup([]string{"keys"}, true)
	}
	// Two keys with one secret: a caller presenting it could be either,
	// with either tenant (agentc serve refuses such keys when it loads).
	byName := make([]string, 0, len(p.Keys))
	for name := range p.Keys {
		byName = append(byName, name)
	}
	sort.Strings(byName)
	seen := map[string]string{}
	for _, name := range byName {
		k := p.Keys[name]
		id, field := "sha256:"+k.SHA256, "sha256"
		if k.SHA256 == "" {
			id, field = "env:"+k.Env, "env"
		}
		if id == "sha256:" || id == "env:" {
			continue
		}
		if first, dup := seen[id]; dup {
			l.errorf(l.userPos([]string{"keys", name, field}), "schema/invalid-value", "key %q has the same %s as key %q: a caller presenting that secret could not be told to be one (tenant %q) or the other (tenant %q), and agentc serve refuses to start; give each key its own secret", name, field, first, k.Tenant, p.Keys[first].Tenant)
			continue
		}
		seen[id] = name
	}
	mv := v.LookupPath(cue.ParsePath("mcp"))
	if !mv.Exists() {
		return
	}
	eachField(l.user.LookupPath(cue.ParsePath("mcp")), mv, "servers", func(name string, sv cue.Value) {
		path := []string{"mcp", "servers", name}
		s := &MCPServer{Name: name, Pos: l.userPos(path)}
		_ = sv.LookupPath(cue.ParsePath("command")).Decode(&s.Command)
		s.URL, _ = sv.LookupPath(cue.ParsePath("url")).String()
		_ = sv.LookupPath(cue.ParsePath("env")).Decode(&s.Env)
		s.Prefix, _ = sv.LookupPath(cue.ParsePath("prefix")).String()
		s.Session, _ = sv.LookupPath(cue.ParsePath("session")).String()
		if n, err := sv.LookupPath(cue.ParsePath("max_sessions")).Int64(); err == nil {
			s.MaxSessions = int(n)
		}
		hasCmd, hasURL := sv.LookupPath(cue.ParsePath("command")).Exists(), sv.LookupPath(cue.ParsePath("url")).Exists()
		switch {
		case !hasCmd && !hasURL:
			l.errorf(s.Pos, "schema/missing-field", "mcp server %q needs command (a program and its arguments) or url", name)
		case hasCmd && hasURL:
			l.errorf(l.userPos(append(path, "url")), "schema/invalid-value", "mcp server %q gives both command and url; give one", name)
		case hasURL && len(s.Env) > 0:
			l.errorf(l.userPos(append(path, "env")), "schema/invalid-value", "mcp server %q: env applies to a command, not to a url", name)
		}
		_ = sv.LookupPath(cue.ParsePath("headers")).Decode(&s.Headers)
		if hasCmd && len(s.Headers) > 0 {
			l.errorf(l.userPos(append(path, "headers")), "schema/invalid-value", "mcp server %q: headers apply to a url, not to a command (a command's credentials go in its environment)", name)
		}
		for _, h := range keys(s.Headers) {
			l.checkMCPHeader(name, append(path, "headers", h), h, s.Headers[h])
		}
		names := make([]string, 0, len(s.Env))
		for k := range s.Env {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			// A command gets only a few variables of agentc serve's
			// environment (HOME, PATH...) and what env names: ${NAME}
			// passes one on, as in a header.
			vars, err := envtmpl.Vars(s.Env[k])
			switch {
			case err != nil:
				l.errorf(l.userPos(append(path, "env", k)), "schema/invalid-value", "mcp server %q: env %s: %v", name, k, err)
			case len(vars) == 0 && literalSecret(k, s.Env[k]):
				l.errorf(l.userPos(append(path, "env", k)), "schema/invalid-value", "mcp server %q: env %s holds a credential in the policy (and the plan); name the environment variable of agentc serve that holds it: %s: \"${%s}\"", name, k, k, k)
			}
		}
		p.MCPServers[name] = s
	})
}

// transportHeaders are the headers the MCP transport sets itself: a value
// given for one would break the protocol or the connection.
var transportHeaders = map[string]bool{
	"Accept": true, "Connection": true, "Content-Length": true, "Content-Type": true,
	"Host": true, "Last-Event-Id": true, "Mcp-Protocol-Version": true, "Mcp-Session-Id": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// TransportHeader reports whether the MCP transport sets the header name
// itself (any case), so that a value given for it would break the protocol
// or the connection.
func TransportHeader(name string) bool {
	return transportHeaders[http.CanonicalHeaderKey(name)]
}

// credentialHeader matches the name of a header that carries a credential.
var credentialHeader = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(auth|token|secret|key|cookie|passw|credential|signature)`)
})

// checkMCPHeader checks one header of an MCP server: a name the transport
// leaves to the caller, a well-formed value, and a credential named by its
// variable rather than written out.
func (l *loader) checkMCPHeader(server string, path []string, name, value string) {
	pos := l.userPos(path)
	if TransportHeader(name) {
		l.errorf(pos, "schema/invalid-value", "mcp server %q: header %s is set by the MCP transport itself; remove it", server, name)
		return
	}
	if strings.ContainsAny(value, "\r\n") {
		l.errorf(pos, "schema/invalid-value", "mcp server %q: header %s holds a line break", server, name)
		return
	}
	vars, err := envtmpl.Vars(value)
	if err != nil {
		l.errorf(pos, "schema/invalid-value", "mcp server %q: header %s: %v", server, name, err)
		return
	}
	if len(vars) > 0 {
		return
	}
	last := value
	if i := strings.LastIndexAny(value, " \t"); i >= 0 {
		last = value[i+1:]
	}
	if value != "" && (credentialHeader().MatchString(name) || secretValue().MatchString(last) || secretValue().MatchString(value)) {
		l.errorf(pos, "schema/invalid-value", "mcp server %q: header %s holds a credential in the policy (and the plan); name the environment variable that holds it: %s: \"%s\"", server, name, name, suggestRef(value, last))
	}
}

// suggestRef rewrites a header value whose last word is a credential
// with that word as a variable reference.
func suggestRef(value, last string) string {
	return strings.TrimSuffix(value, last) + "${TOKEN}"
}
