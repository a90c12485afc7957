package scenario

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"sort"
	"strings"
)

// WriteText prints the result for people, one line per step (nested turn
// steps indented), then the executions, the audit records and the meter:
//
//	step 0 chat ok model=primary attempts=2 text="hello"
//	step 1 chat ok model=primary attempts=1 text="" tool_call=refund{"amount":500} finish=tool_calls
//	step 2 tool blocked attempts=1 error=blocked layer=refund_limit: refunds over 100 need an approver
//	executions: models primary=2 backup=0; tools refund=1
//	meter: input_tokens=10 output_tokens=5 usd=0.000105 calls=1
//
// and, when the run has them, the calls each fake received after the
// executions (a line only when a fake received calls it did not run), its
// state fields, its checkpoints and the scripts whose items no call took.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	writeSteps(&b, r.Steps, "")
	fmt.Fprintf(&b, "executions: models %s; tools %s", counts(r.Executions.Models), counts(r.Executions.Tools))
	if n := r.Executions.Retrievals; n != nil && *n > 0 {
		fmt.Fprintf(&b, "; retrievals %d", *n)
	}
	b.WriteByte('\n')
	if !maps.Equal(r.Calls.Models, r.Executions.Models) || !maps.Equal(r.Calls.Tools, r.Executions.Tools) {
		// A fake received calls it did not run (its script exhausted,
		// or none): the calls each received.
		fmt.Fprintf(&b, "calls: models %s; tools %s\n", counts(r.Calls.Models), counts(r.Calls.Tools))
	}
	for _, a := range r.Audit {
		if a.Grounding != nil {
			writeGrounding(&b, a.Grounding)
			continue
		}
		what := a.Tool
		if what == "" {
			// A turn record names no tool: the stage stands for it.
			what = cmp.Or(a.Stage, "turn")
		}
		fmt.Fprintf(&b, "audit: %s %s attempts=%d", what, a.Decision, a.Attempts)
		if a.ErrorType != "" {
			fmt.Fprintf(&b, " error=%s: %s", a.ErrorType, a.ErrorMessage)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "meter: input_tokens=%d output_tokens=%d usd=%g calls=%d\n",
		r.Meter.InputTokens, r.Meter.OutputTokens, r.Meter.USD, r.Meter.Calls)
	if st := r.State; st != nil {
		j, _ := json.Marshal(st.Fields)
		fmt.Fprintf(&b, "state: %s background queued=%d dropped=%d delivered=%d failed=%d\n", j,
			st.Background.Queued, st.Background.Dropped, st.Background.Delivered, st.Background.Failed)
	}
	if c := r.Checkpoints; c != nil {
		fmt.Fprintf(&b, "checkpoints: versions=%v", c.Versions)
		if c.Latest != nil {
			fmt.Fprintf(&b, " latest=%d status=%s", c.Latest.Version, c.Latest.Status)
		}
		b.WriteByte('\n')
	}
	for _, u := range r.Unused {
		fmt.Fprintf(&b, "unused: %s took %d of %d items\n", u.Script, u.Taken, u.Items)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeGrounding prints a grounding record: the query, then each item's
// outcome by id (or index).
func writeGrounding(b *strings.Builder, g map[string]any) {
	fmt.Fprintf(b, "audit: grounding query=%q", g["query"])
	items, _ := g["items"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		name, ok := m["id"].(string)
		if !ok {
			name = fmt.Sprintf("#%v", m["index"])
		}
		fmt.Fprintf(b, " %s=%v", name, m["outcome"])
	}
	b.WriteByte('\n')
}

func writeSteps(b *strings.Builder, steps []StepResult, indent string) {
	for _, s := range steps {
		fmt.Fprintf(b, "%sstep %d %s", indent, s.Index, s.Stage)
		if s.Outcome != "" {
			fmt.Fprintf(b, " %s", s.Outcome)
		}
		if s.Model != "" {
			fmt.Fprintf(b, " model=%s", s.Model)
		}
		if s.Attempts != 0 {
			fmt.Fprintf(b, " attempts=%d", s.Attempts)
		}
		if s.Deduped != nil && *s.Deduped {
			b.WriteString(" deduped")
		}
		if s.Text != nil {
			fmt.Fprintf(b, " text=%q", *s.Text)
		}
		if s.Refusal {
			b.WriteString(" refusal")
		}
		for _, c := range s.ToolCalls {
			fmt.Fprintf(b, " tool_call=%s%s", c.Name, c.Arguments)
		}
		if s.FinishReason != "" {
			fmt.Fprintf(b, " finish=%s", s.FinishReason)
		}
		if a := s.Agent; a != nil {
			fmt.Fprintf(b, " model_calls=%d tool_calls=%d blocked=%d", a.Steps, a.ToolCalls, a.Blocked)
			if a.Stop != "" {
				fmt.Fprintf(b, " stop=%s", a.Stop)
			}
		}
		if s.Output != nil {
			fmt.Fprintf(b, " output=%q", *s.Output)
		}
		if s.Result != nil {
			j, _ := json.Marshal(s.Result)
			fmt.Fprintf(b, " result=%s", j)
		}
		if s.Admitted != nil {
			fmt.Fprintf(b, " admitted=%d", len(*s.Admitted))
		}
		if g := s.Grounding; g != nil {
			fmt.Fprintf(b, " prompt=%d dropped=%d refused=%d block=%q", len(g.Prompt), len(g.Dropped), len(g.Refused), g.Block)
		}
		if c := s.Checkpoint; c != nil {
			fmt.Fprintf(b, " version=%d status=%s messages=%d tools=%d fields=%d", c.Version, c.Status, c.Messages, c.Tools, c.Fields)
		}
		if e := s.Error; e != nil {
			fmt.Fprintf(b, " error=%s", e.Kind)
			if e.Layer != "" {
				fmt.Fprintf(b, " layer=%s", e.Layer)
			}
			fmt.Fprintf(b, ": %s", e.Message)
		}
		b.WriteByte('\n')
		writeSteps(b, s.Nested, indent+"  ")
	}
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, m[n])
	}
	return strings.Join(parts, " ")
}
