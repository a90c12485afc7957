package dsl

import (
	"cuelang.org/go/cue"
)

// Key is a virtual API key of `agentc serve`: exactly one of SHA256 (hex)
// and Env (the variable holding the key).
type Key struct {
	Name   string
	Pos    Pos
	SHA256 string
	Env    string
	// Tenant defaults to the key's name.
	Tenant string
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
			k.Tenant = t
		}
		hasSHA, hasEnv := kv.LookupPath(cue.ParsePath("sha256")).Exists(), kv.LookupPath(cue.ParsePath("env")).Exists()
		switch {
		case !hasSHA && !hasEnv:
			l.errorf(k.Pos, "schema/missing-field", "key %q needs sha256 (the hex SHA-256 of the key) or env (the variable holding it)", name)
		case hasSHA && hasEnv:
			l.errorf(l.userPos([]string{"keys", name, "env"}), "schema/invalid-value", "key %q gives both sha256 and env; give one", name)
		}
		p.Keys[name] = k
	})
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
		hasCmd, hasURL := sv.LookupPath(cue.ParsePath("command")).Exists(), sv.LookupPath(cue.ParsePath("url")).Exists()
		switch {
		case !hasCmd && !hasURL:
			l.errorf(s.Pos, "schema/missing-field", "mcp server %q needs command (a program and its arguments) or url", name)
		case hasCmd && hasURL:
			l.errorf(l.userPos(append(path, "url")), "schema/invalid-value", "mcp server %q gives both command and url; give one", name)
		case hasURL && len(s.Env) > 0:
			l.errorf(l.userPos(append(path, "env")), "schema/invalid-value", "mcp server %q: env applies to a command, not to a url", name)
		}
		p.MCPServers[name] = s
	})
}
