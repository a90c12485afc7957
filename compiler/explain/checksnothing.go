package explain

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// checksNothing says that e, a file_check or an egress with scan_args
// false applying to every tool (no tools:), checks nothing when no declared
// tool has the argument it checks (path_arg, url_arg): every call passes it
// unchecked. With MCP servers it adds that serve refuses to load it in front
// of their tools (as it does when none of them is declared with it). "" for
// another layer, or one with a tool to check.
func checksNothing(p *dsl.Policy, e *dsl.Entry) string {
	if e.Stage != "tool" || len(e.Tools) > 0 {
		return ""
	}
	var field string
	switch e.Use {
	case "file_check":
		field = "path_arg"
	case "egress":
		if scan, ok := e.Fields["scan_args"].(bool); ok && !scan {
			field = "url_arg"
		}
	}
	if field == "" {
		return ""
	}
	for _, t := range p.Tools {
		if field == "path_arg" && (t.PathArg != "" || len(t.PathArgs) > 0) || field == "url_arg" && (t.URLArg != "" || len(t.URLArgs) > 0) {
			return ""
		}
	}
	s := fmt.Sprintf("checks nothing: no declared tool has %s, so every call passes it unchecked", field)
	if len(p.MCPServers) > 0 {
		s += fmt.Sprintf("; agentc serve refuses to load it in front of the tools of mcp servers none of which is declared with %s", field)
	}
	return s
}
