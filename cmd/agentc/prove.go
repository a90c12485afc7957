package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/prove"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// proveReport is one policy's exploration, as `agentc prove -json` prints
// it.
type proveReport struct {
	Policy          string  `json:"policy"`
	K               int     `json:"k"`
	Copies          int     `json:"copies"`
	Targets         int     `json:"targets"`
	Symmetric       int     `json:"symmetric"`
	States          int     `json:"states"`
	Pruned          int     `json:"pruned"`
	ElapsedMS       int64   `json:"elapsed_ms"`
	StatesPerSecond float64 `json:"states_per_second"`
	// Clean is true only when something was explored to the end and no
	// invariant was violated: a policy with nothing to call, one with a
	// model or tool that no explored call reached (NotExplored), or whose
	// exploration a bound stopped, is not proved clean.
	Clean bool `json:"clean"`
	// Complete is false when a bound (Bound: "max_states", "timeout",
	// "interrupted") stopped the exploration before every script up to k
	// was run; ProvedK is then the depth every target was explored to, and
	// TargetsDone the targets explored to k.
	Complete    bool   `json:"complete"`
	Bound       string `json:"bound,omitempty"`
	ProvedK     int    `json:"proved_k"`
	TargetsDone int    `json:"targets_done"`
	// Plan is the plan file the counterexamples replay against when the
	// policy does not vet (agentc run refuses the policy itself).
	Plan       string          `json:"plan,omitempty"`
	Violations []proveViolated `json:"violations"`
	// NotExplored lists the models and tools no explored call reached,
	// with why (prove.Unexplored).
	NotExplored []proveUnexplored `json:"not_explored,omitempty"`
}

// proveUnexplored is a model or tool no explored call reached.
type proveUnexplored struct {
	Target string `json:"target"`
	Reason string `json:"reason"`
}

// proveViolated is one counterexample of a report.
type proveViolated struct {
	Invariant string   `json:"invariant"`
	Message   string   `json:"message"`
	Target    string   `json:"target"`
	Script    []string `json:"script"`
	Copies    int      `json:"copies"`
	// Scenario is the file the counterexample was written to, which
	// `agentc run POLICY SCENARIO` replays.
	Scenario string   `json:"scenario"`
	Trace    []string `json:"trace"`
	// Interleaving is set when the violation shows only when the
	// concurrent copies interleave as they did.
	Interleaving bool `json:"interleaving,omitempty"`
}

func cmdProve(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "prove")
	k := fs.Int("k", 3, "explore every fault script up to `N` attempt outcomes per call")
	asJSON := fs.Bool("json", false, "print the reports as a JSON array")
	outDir := fs.String("o", ".", "write counterexample scenarios to `DIR`")
	maxStates := fs.Int("maxstates", 0, "stop exploring a policy after `N` states, not proven (0: no bound)")
	timeout := fs.Duration("timeout", 0, "stop exploring a policy after `D` of wall time, not proven (0: no bound)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	if *k < 1 || *k > 8 {
		return fail(env, "prove: -k %d: the depth must be between 1 and 8", *k)
	}
	if *maxStates < 0 {
		return fail(env, "prove: -maxstates %d: want 0 (no bound) or more", *maxStates)
	}
	if *timeout < 0 {
		return fail(env, "prove: -timeout %s: want 0 (no bound) or more", *timeout)
	}
	policies, err := expandPaths(fs.Args())
	if err != nil {
		return fail(env, "%v", err)
	}
	var reports []*proveReport
	problems, unproven := false, false
	written := map[string]bool{}
	for _, paths := range policies {
		c, err := compiler.Compile(ctx, paths, compiler.Options{Timeout: env.timeout})
		if err != nil {
			return fail(env, "%v", err)
		}
		if err := printDiagnostics(env, c.Diagnostics.Relative(env.wd).Sort(), "text"); err != nil {
			return fail(env, "%v", err)
		}
		label := policyLabel(env, paths)
		p, vets := c.Plan, c.Plan != nil
		if !vets {
			// A policy that breaks an ordering rule is explored all the
			// same: prove shows what its faults do.
			c, err = compiler.Compile(ctx, paths, compiler.Options{Timeout: env.timeout, NoOrderCheck: true})
			if err != nil {
				return fail(env, "%v", err)
			}
			p = c.Plan
		}
		if p == nil {
			fmt.Fprintf(env.stderr, "agentc: %s does not compile: nothing to prove\n", label)
			problems = true
			continue
		}
		dir := policyDir(paths[0])
		r, err := prove.Explore(ctx, p, prove.Options{Depth: *k, Dir: dir, PosDir: rel(env, dir), MaxStates: *maxStates, Timeout: *timeout,
			ProgressEvery: proveProgressEvery, Progress: func(pr prove.Progress) {
				fmt.Fprintf(env.stderr, "agentc: %s: %d states, running scripts of length %d, %d of %d targets explored to k=%d, %s so far\n",
					label, pr.States, pr.Depth, pr.Done, pr.Targets, *k, pr.Elapsed.Round(time.Second))
			}})
		if err != nil && (r == nil || r.Bound != prove.BoundInterrupted) {
			// The policy's, not the command's: said, and the next
			// policy explored.
			reportUnexplored(env, label, c, err)
			problems = true
			continue
		}
		// Interrupted, r is what was explored: reported as not proven.
		rep := &proveReport{Policy: label, K: r.Depth, Copies: r.Copies, Targets: r.Targets, Symmetric: r.Symmetric,
			States: r.States, Pruned: r.Pruned, ElapsedMS: r.Elapsed.Milliseconds(), StatesPerSecond: r.StatesPerSecond(),
			Clean:    len(r.Violations) == 0 && r.Targets > 0 && r.Complete() && len(r.Unexplored) == 0,
			Complete: r.Complete(), Bound: r.Bound, ProvedK: r.Proved, TargetsDone: r.Done, Violations: []proveViolated{}}
		if !r.Complete() {
			unproven = true
		}
		// agentc run refuses a policy that does not vet: its
		// counterexamples replay against its plan, written beside them.
		replayWith := label
		if !vets && len(r.Violations) > 0 {
			file, err := writePlan(*outDir, label, dir, c, written)
			if err != nil {
				return fail(env, "%v", err)
			}
			replayWith = rel(env, file)
			rep.Plan = replayWith
		}
		for _, v := range r.Violations {
			file, err := writeCounterexample(*outDir, label, v, written)
			if err != nil {
				return fail(env, "%v", err)
			}
			rep.Violations = append(rep.Violations, proveViolated{Invariant: v.Invariant, Message: v.Message, Target: v.Target,
				Script: v.Script, Copies: v.Copies, Scenario: rel(env, file), Trace: v.Trace, Interleaving: v.Interleaving})
			if !*asJSON {
				if err := v.WriteText(env.stdout); err != nil {
					return fail(env, "%v", err)
				}
				fmt.Fprintf(env.stdout, "  replay: agentc run %s %s\n", shellQuote(replayWith), shellQuote(rel(env, file)))
			}
		}
		for _, u := range r.Unexplored {
			rep.NotExplored = append(rep.NotExplored, proveUnexplored(u))
			if !*asJSON {
				fmt.Fprintf(env.stdout, "%s: not explored: %s\n", u.Target, u.Reason)
			}
		}
		if !rep.Clean && (len(rep.Violations) > 0 || rep.Targets == 0 || len(rep.NotExplored) > 0) {
			problems = true
		}
		reports = append(reports, rep)
		if !*asJSON {
			fmt.Fprintf(env.stdout, "%s: %d targets, %d states (%d pruned) in %s, %.0f states/s: %s\n", label, rep.Targets, rep.States,
				rep.Pruned, r.Elapsed.Round(time.Millisecond), rep.StatesPerSecond, verdict(rep, *maxStates, *timeout))
		}
		if r.Bound == prove.BoundInterrupted {
			break // the policies after it are not explored either
		}
	}
	if *asJSON {
		if reports == nil {
			reports = []*proveReport{}
		}
		if err := writeJSON(env.stdout, reports); err != nil {
			return fail(env, "%v", err)
		}
	}
	switch {
	case problems:
		return exitProblems
	case unproven:
		return exitNotProven
	}
	return exitOK
}

// reportUnexplored reports the policy labelled label, compiled in c, that
// could not be explored: a layer that does not build is named at its place
// in the policy.
func reportUnexplored(env *cliEnv, label string, c *compiler.Compilation, err error) {
	le := (*runtime.LayerError)(nil)
	if !errors.As(err, &le) {
		fmt.Fprintf(env.stderr, "agentc: %s: %v: nothing proved\n", label, err)
		return
	}
	fmt.Fprintf(env.stderr, "%s: %v\n", cmp.Or(layerPlace(env, c, le), label), le)
	fmt.Fprintf(env.stderr, "agentc: %s does not build: nothing to prove\n", label)
}

// layerPlace returns the position in the policy compiled in c of the layer
// that did not build, relative to the working directory ("" when the plan
// has none).
func layerPlace(env *cliEnv, c *compiler.Compilation, le *runtime.LayerError) string {
	if c.Policy == nil {
		return le.Pos
	}
	return placeIn(env, c.Policy.Dir, le.Pos)
}

// placeIn returns pos, a position in the policy in dir, relative to the
// working directory.
func placeIn(env *cliEnv, dir, pos string) string {
	if pos == "" || filepath.IsAbs(pos) {
		return pos
	}
	return rel(env, plan.PosIn(dir, pos))
}

// proveProgressEvery is how often a long exploration says how far it has
// come, on standard error.
const proveProgressEvery = 10 * time.Second

// exitNotProven is prove's exit code when a bound stopped an exploration
// before it found a violation: nothing was proved, nothing was refuted.
const exitNotProven = 3

func verdict(r *proveReport, maxStates int, timeout time.Duration) string {
	if r.Targets == 0 {
		return "nothing explored: the policy declares no model or tool to call"
	}
	if r.Clean {
		return fmt.Sprintf("proved clean at k=%d", r.K)
	}
	if len(r.NotExplored) > 0 && len(r.Violations) == 0 && r.Complete {
		return fmt.Sprintf("not proved: no explored call reached %s (see above); no invariant violated at k=%d", unexploredNames(r), r.K)
	}
	stopped := ""
	if !r.Complete {
		bound := "interrupted"
		switch r.Bound {
		case prove.BoundMaxStates:
			bound = fmt.Sprintf("bound reached (-maxstates %d)", maxStates)
		case prove.BoundTimeout:
			bound = fmt.Sprintf("bound reached (-timeout %s)", timeout)
		}
		depth := fmt.Sprintf("every script up to k=%d ran on all %d targets", r.ProvedK, r.Targets)
		if r.ProvedK == 0 {
			depth = "not every script of length 1 ran"
		} else if len(r.Violations) == 0 {
			depth = fmt.Sprintf("clean up to k=%d (every script up to that length ran on all %d targets)", r.ProvedK, r.Targets)
		}
		stopped = fmt.Sprintf("%s after %d states; %s, %d of %d targets explored to k=%d", bound, r.States, depth, r.TargetsDone, r.Targets, r.K)
		if len(r.Violations) == 0 {
			return "not proven: " + stopped
		}
	}
	ids := map[string]bool{}
	var names []string
	for _, v := range r.Violations {
		if !ids[v.Invariant] {
			ids[v.Invariant] = true
			names = append(names, v.Invariant)
		}
	}
	plural := "s"
	if len(r.Violations) == 1 {
		plural = ""
	}
	found := fmt.Sprintf("%d counterexample%s at k=%d (%s)", len(r.Violations), plural, r.K, strings.Join(names, ", "))
	if stopped != "" {
		found += "; exploration stopped: " + stopped
	}
	if len(r.NotExplored) > 0 {
		found += "; not explored: " + unexploredNames(r)
	}
	return found
}

func unexploredNames(r *proveReport) string {
	var names []string
	for _, u := range r.NotExplored {
		names = append(names, u.Target)
	}
	return strings.Join(names, ", ")
}

// policyLabel names a policy in reports, and as the POLICY argument of the
// agentc run that replays a counterexample: its directory (or file),
// relative to the working directory.
func policyLabel(env *cliEnv, paths []string) string {
	if len(paths) == 1 {
		return rel(env, paths[0])
	}
	return rel(env, filepath.Dir(paths[0]))
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// writeCounterexample writes the scenario of v into dir, named after the
// policy, the invariant and the target, and returns the file's path.
func writeCounterexample(dir, policy string, v *prove.Counterexample, written map[string]bool) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := fileBase(policy) + "." + strings.Trim(unsafeName.ReplaceAllString(v.Invariant+"."+v.Target, "_"), "_")
	file := filepath.Join(dir, name+".json")
	for i := 2; written[file]; i++ {
		file = filepath.Join(dir, fmt.Sprintf("%s.%d.json", name, i))
	}
	written[file] = true
	b, err := v.ScenarioJSON()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return "", err
	}
	return file, nil
}

// writePlan writes the plan of c, the policy in policyDir, into dir, named
// after the policy, and returns the file's path. agentc run resolves a
// plan's relative paths against the plan file's directory: the plan written
// names the policy's files from dir (see rebasePlan).
func writePlan(dir, policy, policyDir string, c *compiler.Compilation, written map[string]bool) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	file := filepath.Join(dir, fileBase(policy)+".plan.json")
	written[file] = true
	p, err := rebasePlan(c.Plan, policyDir, dir)
	if err != nil {
		return "", err
	}
	b, err := plan.Encode(p)
	if err != nil {
		return "", err
	}
	return file, os.WriteFile(file, b, 0o644)
}

// rebasePlan returns a copy of p whose relative paths, which name files
// from the directory from, name the same files from the directory to: the
// roots of its file_check layers and the files of its sqlite stores (the
// paths a plan's layers and stores resolve with runtime.Deps.Dir). A path
// is absolute when it cannot be written relative to to.
func rebasePlan(p *plan.Plan, from, to string) (*plan.Plan, error) {
	absFrom, err := filepath.Abs(from)
	if err != nil {
		return nil, err
	}
	absTo, err := filepath.Abs(to)
	if err != nil {
		return nil, err
	}
	rebase := func(path string) string {
		if path == "" || filepath.IsAbs(path) {
			return path
		}
		abs := filepath.Join(absFrom, path)
		if r, err := filepath.Rel(absTo, abs); err == nil {
			return r
		}
		return abs
	}
	rebaseChain := func(stage plan.Stage, chain []plan.Layer) ([]plan.Layer, error) {
		chain = slices.Clone(chain)
		for i, l := range chain {
			if l.Use != "file_check" {
				continue
			}
			var cfg map[string]json.RawMessage
			if err := json.Unmarshal(l.Config, &cfg); err != nil {
				return nil, fmt.Errorf("chains.%s[%d] %q: config: %w", stage, i, l.Name, err)
			}
			var roots []string
			if err := json.Unmarshal(cfg["roots"], &roots); err != nil {
				return nil, fmt.Errorf("chains.%s[%d] %q: roots: %w", stage, i, l.Name, err)
			}
			for j, r := range roots {
				roots[j] = rebase(r)
			}
			var err error
			if cfg["roots"], err = json.Marshal(roots); err != nil {
				return nil, err
			}
			if chain[i].Config, err = json.Marshal(cfg); err != nil {
				return nil, err
			}
		}
		return chain, nil
	}
	q := *p
	for _, c := range []struct {
		stage plan.Stage
		chain *[]plan.Layer
	}{{plan.StageChat, &q.Chains.Chat}, {plan.StageTool, &q.Chains.Tool}, {plan.StageTurn, &q.Chains.Turn}} {
		if *c.chain, err = rebaseChain(c.stage, *c.chain); err != nil {
			return nil, err
		}
	}
	if p.Stores != nil {
		q.Stores = make(map[string]plan.Store, len(p.Stores))
		for name, st := range p.Stores {
			st.Path = rebase(st.Path)
			q.Stores[name] = st
		}
	}
	return &q, nil
}

func fileBase(policy string) string {
	base := filepath.Base(filepath.Clean(policy))
	if base == "." || base == string(filepath.Separator) {
		base = "policy"
	}
	return strings.Trim(unsafeName.ReplaceAllString(base, "_"), "_")
}

// shellQuote quotes s for a shell when it holds anything but plain path
// characters.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
