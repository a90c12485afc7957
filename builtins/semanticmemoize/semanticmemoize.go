package semanticmemoize

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentc-dev/agentc/builtins/internal/chatcache"
	"github.com/agentc-dev/agentc/builtins/memoize"
	"github.com/agentc-dev/agentc/internal/jsonnum"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "semantic_memoize"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat, plan.StageTool},
		Traits:  []runtime.Trait{runtime.TraitCaches, runtime.TraitShortCircuits, runtime.TraitSideEffectSensitive},
		Doc:     "near-duplicate reuse over a vector index; read-only calls only",
		New:     New,
	})
}

// scoreTolerance is how far below the threshold a score may round and still
// count as a hit.
const scoreTolerance = 1e-6

// New returns a semantic_memoize layer with the schema's defaults (threshold
// 0.95, ttl 10m, scope run).
func New() runtime.Middleware {
	return &SemanticMemoize{Threshold: 0.95, TTL: runtime.Duration(10 * time.Minute), Scope: "run"}
}

// SemanticMemoize is the semantic_memoize middleware; its exported fields
// are its config (schemas/semantic_memoize.cue).
type SemanticMemoize struct {
	Threshold float64          `json:"threshold"`
	TTL       runtime.Duration `json:"ttl"`
	Scope     string           `json:"scope"`
	Index     string           `json:"index,omitempty"`

	name  string
	index runtime.VectorIndex
	embed runtime.Embedder
	// digester makes the digests the entries hold of a call's arguments
	// and request: keyed with settings.digest_key_env.
	digester runtime.Digester
	logger   *slog.Logger
	warned   sync.Map
	// random draws the ids of replayed calls (none are: see WrapChat).
	random runtime.Random
}

// Provision resolves the index and the embedder.
func (m *SemanticMemoize) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	m.logger = b.Logger
	m.embed = b.Embedder()
	m.digester = b.Digester()
	m.random = b.Random()
	idx, err := b.VectorIndex(m.Index)
	if err != nil {
		return err
	}
	m.index = idx
	return nil
}

// Validate checks the threshold and the scope.
func (m *SemanticMemoize) Validate() error {
	switch {
	case !(m.Threshold > 0 && m.Threshold <= 1):
		return fmt.Errorf("threshold must be in (0, 1], got %g", m.Threshold)
	case m.Scope != "run" && m.Scope != "key" && m.Scope != "global":
		return fmt.Errorf(`scope must be "run", "key" or "global", got %q`, m.Scope)
	case m.TTL <= 0:
		return errors.New("ttl must be positive")
	}
	return nil
}

// partition returns the index partition of a call: scope "run" keys it on
// the run's tenant and id, "key" on its tenant alone, "global" on neither
// (each quoted, so no tenant or run id passes for another pair).
func (m *SemanticMemoize) partition(stage string, run runtime.Run, target string) string {
	var scope string
	switch m.Scope {
	case "key":
		scope = strconv.Quote(run.Tenant)
	case "run":
		scope = strconv.Quote(run.Tenant) + strconv.Quote(run.ID)
	}
	// Each part quoted, so that no part can pass for two and the partition
	// holds no NUL byte, which a PostgreSQL text column refuses.
	part := "agentc/semantic_memoize"
	for _, p := range []string{m.name, stage, m.Scope, scope, target} {
		part += "/" + strconv.Quote(p)
	}
	return part
}

// StateKeys implements runtime.StateKeyer: the partition of a sample call.
func (m *SemanticMemoize) StateKeys(at runtime.StateSite) []runtime.StateKey {
	m.name = at.Name()
	return []runtime.StateKey{{Store: runtime.StoreName(m.Index), Key: m.partition(string(at.Stage), at.Run(), "sample-target"), Digests: runtime.DigestsKeyed,
		What: "cached entries", Then: "every call misses until the index fills again, and the old entries stay until their ttl"}}
}

// toolCandidates is how many nearest entries a tool call's lookup examines
// for one whose arguments equal the call's.
const toolCandidates = 8

// lookup embeds text and returns its vector and the value of the nearest
// entry that scores at least the threshold and that accept (when not nil)
// accepts, among the k nearest. A nil vector means the embedder failed: the
// call runs and is not stored.
func (m *SemanticMemoize) lookup(ctx context.Context, part, text string, k int, accept func([]byte) ([]byte, bool)) ([]float32, []byte, bool) {
	vec, err := m.embed.Embed(ctx, text)
	if err != nil {
		if ctx.Err() == nil {
			m.logger.WarnContext(ctx, "semantic_memoize: embedding failed; the call runs uncached", "error", err)
		}
		return nil, nil, false
	}
	matches, err := m.index.Query(ctx, part, vec, k)
	if err != nil {
		if ctx.Err() == nil {
			m.logger.WarnContext(ctx, "semantic_memoize: index query failed; treating as a miss", "error", err)
		}
		return vec, nil, false
	}
	for _, match := range matches {
		// The tolerance absorbs float32 rounding, so that threshold 1
		// matches an identical input.
		if match.Score+scoreTolerance < m.Threshold {
			break
		}
		if accept == nil {
			return vec, match.Value, true
		}
		if v, ok := accept(match.Value); ok {
			return vec, v, true
		}
	}
	return vec, nil, false
}

func (m *SemanticMemoize) store(ctx context.Context, part, text string, vec []float32, v any) {
	if vec == nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		m.logger.DebugContext(ctx, "semantic_memoize: result does not encode as JSON; not cached", "error", err)
		return
	}
	if err := m.index.Upsert(context.WithoutCancel(ctx), part, m.digester.Text(text), vec, b, m.TTL.D()); err != nil {
		m.logger.WarnContext(ctx, "semantic_memoize: index write failed; result not cached", "error", err)
	}
}

// Transcript renders a chat request's messages as the text that is embedded:
// one "role: content" line per message ("role (name): content" for a message
// naming its author, so that two group chats differing only in who said what
// are told apart), its content the message's text (Content and text parts),
// then its images and PDF documents (by a digest of their URL: a data: URL
// holds the whole image or document), tool calls and tool results.
func Transcript(msgs []runtime.Message) string {
	var b strings.Builder
	for i := range msgs {
		msg := &msgs[i]
		b.WriteString(msg.Role)
		if msg.Name != "" {
			b.WriteString(" (")
			b.WriteString(msg.Name)
			b.WriteByte(')')
		}
		b.WriteString(": ")
		text := msg.Text()
		b.WriteString(text)
		sep := text != ""
		item := func() {
			if sep {
				b.WriteByte(' ')
			}
			sep = true
		}
		for _, p := range msg.Parts {
			switch p.Type {
			case runtime.PartImage, runtime.PartDocument:
				sum := sha256.Sum256([]byte(p.ImageURL))
				item()
				b.WriteByte('[')
				b.WriteString(p.Type)
				b.WriteByte(' ')
				b.WriteString(hex.EncodeToString(sum[:8]))
				b.WriteByte(']')
			case runtime.PartToolResult:
				item()
				b.WriteString("[result ")
				b.WriteString(p.ToolCallID)
				b.WriteString(": ")
				b.WriteString(p.Text)
				b.WriteByte(']')
			}
		}
		for _, tc := range msg.ToolCalls {
			item()
			b.WriteString("[call ")
			b.WriteString(tc.Name)
			b.WriteByte(' ')
			b.Write(tc.Arguments)
			b.WriteByte(']')
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// chatKey splits a chat request into the part that must match exactly and
// the text that is embedded. The exact part is the digest of memoize's key
// input (memoize.ChatKeyInput) of the request with only its system messages:
// the model, the instructions, the tools offered, tool_choice, the response
// format, sampling, stop sequences, max_tokens and the other parameters;
// and of the conversation's images and documents (attachments). The
// embedded text is the transcript of the other messages (of all of them when
// there are no others): a long system prompt shared by two requests would
// otherwise make any two questions look alike.
func chatKey(d runtime.Digester, req *runtime.ChatRequest) (exact, text string, err error) {
	shape := *req
	shape.Messages = nil
	var conversation []runtime.Message
	for i := range req.Messages {
		if req.Messages[i].Role == "system" || req.Messages[i].Role == "developer" {
			shape.Messages = append(shape.Messages, req.Messages[i])
		} else {
			conversation = append(conversation, req.Messages[i])
		}
	}
	input, err := memoize.ChatKeyInput(&shape)
	if err != nil {
		return "", "", err
	}
	if len(conversation) == 0 {
		conversation = req.Messages
	}
	attached, err := json.Marshal(attachments(conversation))
	if err != nil {
		return "", "", err
	}
	h := d.New()
	h.Write(input)
	h.Write(attached)
	return hex.EncodeToString(h.Sum(nil)), Transcript(conversation), nil
}

// attachment is an image or a document of a conversation as the exact part
// of a chat key holds it: the message it is in and all it is.
type attachment struct {
	Message int                 `json:"m"`
	Part    runtime.ContentPart `json:"p"`
}

// attachments returns the images and documents of msgs, which must match
// exactly: the embedding reads one as a digest among the words, which an
// embedder that reads meaning scores alike, so the same question about
// another screenshot or another PDF would otherwise get this one's answer.
func attachments(msgs []runtime.Message) []attachment {
	var out []attachment
	for i := range msgs {
		for _, p := range msgs[i].Parts {
			if p.Type == runtime.PartImage || p.Type == runtime.PartDocument {
				p.CacheControl = nil
				out = append(out, attachment{i, p})
			}
		}
	}
	return out
}

// WrapChat implements runtime.ChatWrapper. Only plain answers to plain
// conversations are reused: a conversation that holds a tool call or a
// tool result bypasses the layer, and an answer that calls a tool is
// neither stored nor replayed (see usesTools).
func (m *SemanticMemoize) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		if usesTools(c.Request.Messages) {
			return next(ctx, c, yield)
		}
		part, text, err := chatKey(m.digester, &c.Request)
		if err != nil { // no canonical form: the call bypasses the layer
			return next(ctx, c, yield)
		}
		part = m.partition(plan.StageChat, c.Meta.Run, part)
		vec, hit, ok := m.lookup(ctx, part, text, 1, nil)
		if ok {
			e, err := memoize.DecodeEntry(hit)
			switch {
			case err != nil:
				m.logger.WarnContext(ctx, "semantic_memoize: a cached entry does not decode; treating it as a miss", "error", err)
			case len(e.ToolCalls) == 0:
				chatcache.Replay(c, e, m.random, yield)
				return nil
			}
		}
		e, err := chatcache.Record(ctx, c, next, yield)
		if e == nil || len(e.ToolCalls) > 0 {
			return err
		}
		m.store(ctx, part, text, vec, e)
		return nil
	}
}

// usesTools reports whether msgs hold a tool call or a tool result. The
// similarity of two transcripts is no identity of what they ask: a call
// the model proposed for "transfer 100 EUR" would, replayed for "transfer
// 900 EUR", run the transfer of 100 again (and, with scope key or global,
// in another run); an answer to a conversation holding a tool result
// reports on that result ("Done: 100 EUR sent.", "Your balance is 500"),
// and a near-duplicate conversation holds another result, which differs in
// a digit the similarity barely sees. So such conversations are not looked
// up nor stored, and an answer that calls a tool is not stored either:
// the model is asked.
func usesTools(msgs []runtime.Message) bool {
	for i := range msgs {
		m := &msgs[i]
		if len(m.ToolCalls) > 0 || m.Role == "tool" || m.ToolCallID != "" {
			return true
		}
		for _, p := range m.Parts {
			if p.Type == runtime.PartToolResult {
				return true
			}
		}
	}
	return false
}

// WrapTool implements runtime.ToolWrapper.
func (m *SemanticMemoize) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if !memoize.Cacheable(c.Tool) {
			if _, seen := m.warned.LoadOrStore(c.Name, struct{}{}); !seen {
				m.logger.WarnContext(ctx, "semantic_memoize does not cache this tool: it is side-effecting, secret_result or not declared", "tool", c.Name)
			}
			return next(ctx, c)
		}
		args, err := json.Marshal(c.Args)
		if err != nil {
			return next(ctx, c)
		}
		digest, err := NormalizedArgsDigest(m.digester, c.Args)
		if err != nil {
			return next(ctx, c)
		}
		text := string(args)
		part := m.partition(plan.StageTool, c.Meta.Run, c.Name)
		// The similarity only finds candidates: a candidate is reused only
		// when its arguments equal the call's after normalisation, so that
		// a call for another customer or order never gets its result.
		vec, hit, ok := m.lookup(ctx, part, text, toolCandidates, func(b []byte) ([]byte, bool) {
			var e toolEntry
			if json.Unmarshal(b, &e) != nil || e.Args != digest || e.Result == nil {
				return nil, false
			}
			return e.Result, true
		})
		if ok {
			var v any
			if jsonnum.Decode(hit, &v) == nil {
				c.Meta.Cached = true
				return v, nil
			}
		}
		v, err := next(ctx, c)
		if err == nil {
			if res, merr := json.Marshal(v); merr != nil {
				m.logger.DebugContext(ctx, "semantic_memoize: result does not encode as JSON; not cached", "error", merr)
			} else {
				m.store(ctx, part, text, vec, toolEntry{Args: digest, Result: res})
			}
		}
		return v, err
	}
}

// toolEntry is the stored value of a tool call: the digest of its
// normalised arguments and its result.
type toolEntry struct {
	Args   string          `json:"args"`
	Result json.RawMessage `json:"result"`
}

// NormalizedArgsDigest returns the digest, made with d (runtime.Digester.Args:
// the hex SHA-256, or with a digest key its keyed form), of the canonical
// JSON of a tool call's arguments after normalisation: every string value
// is trimmed, its runs of white space collapsed to one space and its case
// folded; object keys and booleans are kept as they are, numbers as the
// arguments' digest writes them (runtime.ToolCall.ArgsDigest: 0 and -0
// alike). Two calls reuse each other's result only when their digests are
// equal.
func NormalizedArgsDigest(d runtime.Digester, args map[string]any) (string, error) {
	return d.Args(normalize(args))
}

// normalize returns v with its strings normalised (see NormalizedArgsDigest);
// values of other types are returned as they are.
func normalize(v any) any {
	switch v := v.(type) {
	case string:
		return foldString(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = normalize(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalize(x)
		}
		return out
	case []string:
		out := make([]string, len(v))
		for i, x := range v {
			out[i] = foldString(x)
		}
		return out
	}
	return v
}

func foldString(s string) string {
	return strings.ToLower(strings.ToUpper(strings.Join(strings.Fields(s), " ")))
}

var (
	_ runtime.ChatWrapper = (*SemanticMemoize)(nil)
	_ runtime.ToolWrapper = (*SemanticMemoize)(nil)
)
