package all

import (
	// The state builtins register themselves from init(), and the sqlite
	// package registers the "sqlite" store kind.
	_ "github.com/agentc-dev/agentc/builtins/audit"
	_ "github.com/agentc-dev/agentc/builtins/idempotent"
	_ "github.com/agentc-dev/agentc/builtins/memoize"
	_ "github.com/agentc-dev/agentc/builtins/semanticmemoize"
	_ "github.com/agentc-dev/agentc/runtime/store/sqlite"
)
