// Package all links every builtin middleware into the runtime registry.
// Import it for its side effect:
//
//	import _ "github.com/agentc-dev/agentc/builtins/all"
package all

import (
	// The builtins register themselves from init().
	_ "github.com/agentc-dev/agentc/builtins/fallback"
	_ "github.com/agentc-dev/agentc/builtins/guard"
	_ "github.com/agentc-dev/agentc/builtins/hedge"
	_ "github.com/agentc-dev/agentc/builtins/log"
	_ "github.com/agentc-dev/agentc/builtins/maxtokens"
	_ "github.com/agentc-dev/agentc/builtins/meter"
	_ "github.com/agentc-dev/agentc/builtins/ratelimit"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	_ "github.com/agentc-dev/agentc/builtins/tracing"
)
