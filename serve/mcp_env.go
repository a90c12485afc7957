package serve

import (
	"fmt"
	"maps"
	"os"
	goruntime "runtime"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/internal/credential"
	"github.com/agentc-dev/agentc/internal/envtmpl"
)

// inheritedEnv names the variables of agentc serve's environment that a
// command server inherits: those a program needs to find its programs,
// its user and its home, none that holds a credential. It is the list the
// MCP TypeScript SDK's stdio transport passes on by default
// (getDefaultEnvironment), so a server written against that SDK finds what
// it expects. Everything else (the providers' keys, the virtual keys'
// variables) stays with the gateway; a server that needs a variable gets
// it from its env: `GITHUB_TOKEN: "${GITHUB_TOKEN}"`.
var inheritedEnv = func() []string {
	if goruntime.GOOS == "windows" {
		return []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PROCESSOR_ARCHITECTURE",
			"SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE", "PROGRAMFILES"}
	}
	return []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}
}()

// commandEnv returns the environment of a command server: the inherited
// variables (inheritedEnv) agentc serve has, read from its own environment,
// and env's entries, which replace them, each value's ${NAME} read through
// lookupEnv. The values an entry reads are recorded in sec, to be scrubbed
// from the server's messages, when the entry holds a credential
// (credentialEntry); a setting (LOG_LEVEL, a directory) is not, as
// scrubbing it would scrub every word or path it is part of. An inherited
// value that is a shell function definition (what bash exports: "()
// {...}") is left out. The slice is never nil: an exec.Cmd given a nil Env
// passes the whole environment on.
func commandEnv(env map[string]string, lookupEnv func(string) (string, bool), sec *secrets) ([]string, error) {
	vars := map[string]string{}
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok && !strings.HasPrefix(v, "()") {
			vars[k] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		read := map[string]string{}
		declared, err := expandRefs("env", map[string]string{k: env[k]}, func(name string) (string, bool) {
			v, ok := lookupEnv(name)
			if ok {
				read[name] = v
			}
			return v, ok
		})
		if err != nil {
			return nil, err
		}
		if credentialEntry(k, declared[k], read) {
			for _, v := range read {
				sec.add(v)
			}
		}
		vars[k] = declared[k]
	}
	out := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

// credentialEntry reports whether the env entry name, whose value is value
// with the variables read (name to value), holds a credential: the entry's
// name or the name of a variable it reads is a credential's, or the value
// or a variable's has a credential's shape (credential.Var).
func credentialEntry(name, value string, read map[string]string) bool {
	if credential.Var(name, value) {
		return true
	}
	for k, v := range read {
		if credential.Var(k, v) {
			return true
		}
	}
	return false
}

// expandRefs expands the ${NAME} references of an MCP server's values (its
// headers or its env, field) through lookupEnv. An error names the field's
// entry and the variable, never a value.
func expandRefs(field string, values map[string]string, lookupEnv func(string) (string, bool)) (map[string]string, error) {
	out := make(map[string]string, len(values))
	for _, k := range slices.Sorted(maps.Keys(values)) {
		v, err := envtmpl.Expand(values[k], lookupEnv)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", field, k, err)
		}
		out[k] = v
	}
	return out, nil
}
