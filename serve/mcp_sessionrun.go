package serve

import (
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentc-dev/agentc/runtime"
)

// beginRun begins run, of tenant, for a tool call that came on session ss
// under id (the X-Agentc-Run header's, or the session's run), and returns
// the func that ends the call's part in it. A named run is tracked, and
// ended once idle (Server.runs). The run of a session (mcpRunPrefix, which
// no client may name) cannot continue once the session is over: it is
// ephemeral (runtime.Run.Ephemeral), so that a meter drops its run ledger
// from a shared store too rather than keep it for a day, and it ends when
// the session ends (deleted, idle for -idle, or closed past -maxsessions),
// not before, and after its calls in flight, whose settlements would
// otherwise write its ledger back for a day (the session's Wait, which
// clientEnded's channel follows, returns once its handlers have): the idle sweep or a tenant's bound on runs never ends it
// while its session lives, which would give the session its whole budget
// again.
func (p *mcpProxy) beginRun(run *runtime.Run, tenant, id string, ss *mcp.ServerSession) func() {
	if !strings.HasPrefix(id, mcpRunPrefix) || ss == nil {
		p.s.runs.begin(run.ID, tenant)
		return func() { p.s.runs.end(run.ID, time.Now()) }
	}
	run.Ephemeral = true
	if _, seen := p.sessionRuns.LoadOrStore(run.ID, struct{}{}); !seen {
		ended := p.clientEnded(ss)
		go func() {
			<-ended
			p.s.endRuns([]string{run.ID})
			p.sessionRuns.Delete(run.ID)
		}()
	}
	return func() {}
}
