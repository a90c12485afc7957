package all

import (
	// The safety and shaping builtins register themselves from init().
	_ "github.com/agentc-dev/agentc/builtins/compaction"
	_ "github.com/agentc-dev/agentc/builtins/contentfilter"
	_ "github.com/agentc-dev/agentc/builtins/egress"
	_ "github.com/agentc-dev/agentc/builtins/filecheck"
	_ "github.com/agentc-dev/agentc/builtins/judge"
	_ "github.com/agentc-dev/agentc/builtins/outputcoerce"
	_ "github.com/agentc-dev/agentc/builtins/pii"
	_ "github.com/agentc-dev/agentc/builtins/redact"
	_ "github.com/agentc-dev/agentc/builtins/security"
	_ "github.com/agentc-dev/agentc/builtins/toolpolicy"
	_ "github.com/agentc-dev/agentc/builtins/truncate"
)
