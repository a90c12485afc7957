package all

import (
	// The state builtins register themselves from init(), and the store
	// packages register the "sqlite", "redis" and "postgres" store kinds.
	_ "github.com/agentc-dev/agentc/builtins/audit"
	_ "github.com/agentc-dev/agentc/builtins/checkpoint"
	_ "github.com/agentc-dev/agentc/builtins/idempotent"
	_ "github.com/agentc-dev/agentc/builtins/memoize"
	_ "github.com/agentc-dev/agentc/builtins/semanticmemoize"
	_ "github.com/agentc-dev/agentc/runtime/store/postgres"
	_ "github.com/agentc-dev/agentc/runtime/store/redis"
	_ "github.com/agentc-dev/agentc/runtime/store/sqlite"
)
