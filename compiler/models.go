package compiler

import (
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/fieldpath"
	"github.com/agentc-dev/agentc/runtime"
)

// ShippedProviders are the model providers agentc ships (registered by
// github.com/agentc-dev/agentc/providers/all). Vet knows them even in a
// binary that does not link them; other names must be registered with
// runtime.RegisterProvider in the binary that runs vet.
var ShippedProviders = []string{"anthropic", "openai"}

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// checkModels checks the provider fields of the declared models: a known
// provider; model, api_key_env and base_url only with a provider; an
// api_key_env that names a variable; a base_url without credentials; and a
// key for a shipped provider at its default endpoint. Messages never repeat
// the value of api_key_env or base_url, which may hold a secret by mistake.
func checkModels(c *Compilation) { checkModelsOf(c, c.Policy, false) }

// checkModelsOf checks the models of p; with typedOnly (p is a policy with
// errors, decoded partly) only those whose own value has no error.
func checkModelsOf(c *Compilation, p *dsl.Policy, typedOnly bool) {
	known := slices.Clone(ShippedProviders)
	for _, p := range runtime.Providers() {
		if !slices.Contains(known, p) {
			known = append(known, p)
		}
	}
	sort.Strings(known)
	names := make([]string, 0, len(p.Models))
	for name := range p.Models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m := p.Models[name]
		if typedOnly && !m.WellTyped {
			continue
		}
		at := func(field string) dsl.Pos {
			if p, ok := m.FieldPos[field]; ok {
				return p
			}
			return m.Pos
		}
		ref := fieldpath.Join("models", name)
		if m.Provider == "" {
			for _, f := range []string{"model", "api_key_env", "base_url"} {
				if _, set := m.FieldPos[f]; set {
					c.report(dsl.Errorf(at(f), "schema/missing-field", "%s.%s needs provider (one of %s)", ref, f, strings.Join(known, ", ")))
				}
			}
			continue
		}
		if !slices.Contains(known, m.Provider) {
			c.report(dsl.Errorf(at("provider"), "schema/invalid-value", "%s.provider: unknown provider %q (known: %s)%s",
				ref, m.Provider, strings.Join(known, ", "), dsl.SuggestName(m.Provider, known)))
		}
		if _, set := m.FieldPos["api_key_env"]; set && (!envName().MatchString(m.APIKeyEnv) || dsl.KeyShaped(m.APIKeyEnv)) {
			c.report(dsl.Errorf(at("api_key_env"), "schema/invalid-value",
				"%s.api_key_env must name an environment variable (letters, digits and _), never hold the key itself", ref))
		}
		if m.BaseURL != "" {
			u, err := url.Parse(m.BaseURL)
			switch {
			case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
				c.report(dsl.Errorf(at("base_url"), "schema/invalid-value", "%s.base_url must be an absolute http or https URL", ref))
			case u.User != nil || u.RawQuery != "":
				c.report(dsl.Errorf(at("base_url"), "schema/invalid-value",
					"%s.base_url must not carry credentials or a query: put the key in the variable api_key_env names", ref))
			}
		}
		if slices.Contains(ShippedProviders, m.Provider) && m.BaseURL == "" && m.APIKeyEnv == "" {
			c.report(dsl.Errorf(at("provider"), "schema/missing-field",
				"%s: provider %s at its default endpoint needs api_key_env, the environment variable that holds the key", ref, m.Provider))
		}
	}
}
