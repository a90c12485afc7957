package compiler

import "github.com/agentc-dev/agentc/dsl"

// Rule describes a diagnostic rule id.
type Rule struct {
	ID       string
	Severity dsl.Severity
	Title    string
	// Doc says what the rule reports and why it matters (docs/rules.md
	// shows it).
	Doc string
}

// loadRules are the rules of the load-policy stage.
var loadRules = []Rule{
	{"cue/syntax", dsl.Error, "CUE parse error, or a file that is not a policy file", `
A file does not parse as CUE, or is not a policy file at all: an empty
file, a file without a package clause or of another package than its
neighbours, a file over 4 MiB, a file that is not UTF-8 text or not a
regular file, nesting deeper than 200 levels, an expression chaining more
than 1,000 operators, or an evaluation that runs over its deadline (10 s,
AGENTC_TIMEOUT). Nothing else is checked until the files load. An
unclosed bracket is reported where its closer is missing, naming it; a
regular expression's ` + "`\\d`" + ` in a "..." string and a # comment are told what CUE
writes instead (` + "`\\\\d`" + ` or a raw string ` + "`#\"\\d\"#`" + `; //).`},
	{"schema/unknown-middleware", dsl.Error, "use names no builtin or registered middleware", `
An entry's use names neither a builtin nor a middleware the host registered
with runtime.Register. The message suggests the closest known id ("retyr":
did you mean "retry"?).`},
	{"schema/unknown-field", dsl.Error, "a field the closed definition does not allow", `
Every definition is closed: a field the policy, an entry's builtin or a
tool declaration does not define is an error at the field, with the
closest allowed name when one is near, or the field other gateways'
names stand for (rps: rate, max_retries: max_attempts, window: per). A
misspelt field would otherwise be
ignored and its layer run with the default. An entry's unknown field is
reported beside its other errors (tools: "refund" written as a string),
in the same round. A model, tool, store, key, MCP
server or state field declared under a label that is not a name ("my
model", "2fa") is reported here too, as not a name.`},
	{"schema/invalid-value", dsl.Error + "/" + dsl.Warning, "wrong type, out of bounds, or not one of the allowed values", `
A value has the wrong type, lies outside its bounds, is not one of the
allowed values, is not a valid duration, regular expression, JSON Schema or
grounding template (a render template that does not parse, or reads a
field its data lacks), or breaks a rule between fields (two entries of one
chain with the same name, a guard with both deny and require, a fallback
naming one model twice, a tool-chain entry scoped with an empty tools
list, which applies it to every tool, two keys with one secret, a
credential written in an MCP server's env, a JSON Schema whose required
names a property its properties do not describe, or that holds a key that
is no keyword but close to one that validates, such as maxLenght, or a
property written beside properties instead of under it: validators ignore
both, and the check is not made, a JSON Schema file that gives a key of
one object twice: encoding/json keeps the last, so a maximum written with
the first would be dropped unseen, a state handler that can change nothing:
a redact on a field whose schema holds no string, a truncate on one that
holds no string and no list, such as an integer, whose value then reaches
the sinks as it came), or is left open where
the schema has a default (a disjunction without a default of the policy's
own, such as max_attempts: 3 | 4, or a bound, such as >2: CUE would
silently take the schema's default, 3, a choice the policy did not make). The message gives the field's path and what it
accepts, and for common slips the fix: a bare number where a duration
goes ("60s"), a unit spelt out or spaced ("1min", "10 s"), a day unit
("1d": "24h"), a URL or a path where egress wants a host, an
extension without its dot ("txt": ".txt"), a string written in single
quotes, which CUE reads as bytes ('retry': "retry"), a name, URL, region code or
constraint id that does not match its pattern (said in words, not as the
regular expression), a key where keys wants its SHA-256, a URL or a non-name where a field
names an environment variable, one chain declared twice (two lists,
in one file or two, that CUE joins entry by entry), a name holding a
character outside ASCII, such as a Cyrillic look-alike of a Latin letter
or an invisible one (the character and its code point: U+0430, a Cyrillic
letter; a CEL predicate's cel/syntax error names it too), a JSON Schema
keyword's value outside its enumeration (type: "nubmer": "number", "int":
"integer"), and a regular expression's construct that RE2 syntax does not
have, placed at it: a lookbehind or lookahead ((?<=, (?!), a
backreference (\1), an atomic group or a possessive quantifier.
A fault in a JSON Schema file the policy names (args: "refund.json") is
placed at its line and column in that file, with a note of the place the
policy names it.
A middleware's own check of its config (a rate_limit's per of "0s", a
retry's max_delay below its initial_delay) is reported at the field, under
its path (chains.chat[0].per: must be positive), in the same round as the
schema's errors elsewhere in the policy, and so is the check of a model's
provider fields (an unknown provider); an entry or a model whose own value
has an error, or an entry in which one was reported, is checked once that
is fixed.

A value the schema accepts but that is almost surely a slip is a warning:
a JSON Schema format close to one JSON Schema defines but not one of them
("urii", "date_time"), which validators take for a format of the
policy's own;
a usd_per_mtok_* price below 0.001, a price per token written where the
field wants the price of one million tokens (0.000003 for 3,
which makes the meter count a millionth of the spend), on a model or its
long_context tier; a long_context usd_per_mtok_in or usd_per_mtok_out
below its model's own, which counts a long call below a short one's
price and below the provider's premium; a long_context tier that omits a cache price
(usd_per_mtok_cached, usd_per_mtok_cache_write,
usd_per_mtok_cache_write_1h) its model gives, which prices those tokens of
a long call at the tier's input price; a retry with
max_attempts: 1 and no breaker, attempt_timeout or idle_timeout, which never runs
a call again (max_attempts counts the first attempt); a rate_limit whose
burst is below its rate and that lets one call through less often than
once a minute (per/rate over 1m: rate: 1000, per: "720h" spaces calls 43
minutes apart, and mode "wait" holds a call that long), which is most
often meant as a quota: burst equal to rate, or a meter with budget:
calls and a window, makes one; a store url
carrying a password (redis://:secret@host, postgres://user:pw@host/db, a
password= parameter), which agentc explain hides but the plan agentc build
writes keeps as given: name the variable holding the url with url_env (a
webhook state sink's url with a password is warned at the same way).`},
	{"schema/case-collision", dsl.Error, "two properties of one object of a tool's args schema whose names differ only in case", `
A tool's args schema declares, for one object, two properties whose names
differ only in case (amount and Amount; Unicode case folding, as Go's
encoding/json matches a member to a struct's field: ſku is sku). A tool
that decodes its arguments case-insensitively reads both as one field,
the last given winning, while a predicate reads each by its exact name:
{"order_id": "A1", "amount": 5, "Amount": 500} passes a guard's deny
"args.amount > 100.0", which reads 5, and the tool refunds 500; a call
giving Amount alone passes every check of amount, the schema's own bounds
included. The error is at the second property written (for a schema read
from a file, at its line in the file), wherever the
object sits (nested, under items, in a definition). The properties of
an object's allOf branches (nested allOf too) are the object's, as every
branch applies to it: orderId in one branch and orderid in another, or
one beside the object's own properties, are twins too (a name two
branches both constrain is one property), and so, at any depth, are the
properties of a property two of them declare (line.sku beside the
object's own properties, line.SKU in a branch), as both schemas
describe the one value. The tool chain
refuses a call whose arguments give two such members of one object, and
agentc serve a proposed call that repeats a key in any case, but a call
giving the other spelling alone is still let through: rename one of them.`},
	{"schema/missing-field", dsl.Error, "a required field is absent", `
A field the definition requires is absent: fallback without models, a
guard without deny or require, a model with provider but no model id. The
diagnostic sits at the struct that lacks the field.`},
	{"schema/bad-reference", dsl.Error, "a model, tool, store or entry name that is not declared", `
A name refers to something the policy does not declare: a model named by
fallback, hedge, judge or compaction that is not in models, a tool in
tools: scoping (unless mcp servers or settings.allow_undeclared_tools let
tools the policy does not declare run), a store, an entry named by a constraint, a tool's url_arg
or path_arg absent from its args schema, an idempotent key_args argument
that a side-effecting tool it applies to does not declare in an args
schema closed by additionalProperties: false (no call could carry it, and
a call without it is refused, so no call of the tool would run; an open
schema gets a guard/inert warning), or a JSON Schema file that cannot be
read inside the policy directory.`},
	{"schema/stage", dsl.Error, "a builtin used in a chain whose stage it does not support", `
A builtin sits in a chain whose stage it does not support (fallback in the
tool chain), an entry outside the tool chain is scoped with tools:, or a
constraint restricted to one stage names, as outer or inner, a builtin that
chain cannot hold and no entry of it (the constraint would never apply).
The message lists the stages the builtin supports.`},
}

// celRules are the rules of the compile-cel stage.
var celRules = []Rule{
	{"cel/syntax", dsl.Error, "CEL parse error", `
A CEL predicate (a guard's deny or require, an entry's when, the policy's
admit, a constraint's when) does not parse, is longer than 4 KiB, nests
deeper than 48 levels, or holds an invalid regular expression, or a
duration or timestamp constant CEL cannot convert (duration('1d') or
duration('10 minutes'): '24h', '10m'; timestamp('2025-01-31'): an RFC 3339
time with its zone), which fails every evaluation that reaches it. The column
points inside the CUE string, at the offending token. A habit of another
language gets what CEL writes instead: = for ==, and, or and not for &&,
|| and !, <> for !=, and a regular expression's ` + "`\\.`" + ` in a CEL string
(the CEL text needs ` + "`\\\\.`" + `, written ` + "`\"\\\\\\\\.\"`" + ` in a CUE string).`},
	{"cel/type", dsl.Error, "undeclared reference, undefined field, or no matching overload", `
A predicate does not type-check against the variables of its stage: an
undeclared variable (one of another stage, such as args in a chat guard, is
named as such, with the variables the stage has; a misspelt one, such as
arg or valeu, with the closest variable: args, value), a field its type does not have (args is typed from the
tool's JSON Schema, so a misspelt argument is caught here), an optional
field read without has(), or an operator applied to the wrong types
(len(x), 'sub' in s and list.contains(x) get the CEL for them: size(x),
s.contains('sub'), x in list; a comparison of a field with a constant of
another type, args.amount == 0 where amount is a JSON Schema number, a
double, is placed at the constant, with the one to write: 0.0), or a
comparison of a field with null: a JSON null reads as absent, so where a
field is null the read is a "no such key" error and has() is false, and
args.note == null (a string), args.tags == null (a list) or args.ship ==
null (an object, even one the schema requires, which CEL's own checker
lets through) never holds and a deny with it never fires; the error names
the test to write: !has(args.ship). So does a variable of the stage, or
an object field of one, compared with null (args == null, request.params
== null, response.usage != null): it is always there. A
constraint's when is checked against the config types of the layers its
outer and inner designate (outer.trial for an audit layer is caught, with
the closest field: trail); the map idioms evaluation accepts over a config
('k' in inner, inner['k'], size(inner)) are not refused. In an entry not scoped to tools, args is
untyped, but reading an argument that no declared tool's schema has, or a
field of an object argument that no schema of the object has
(args.shipping.zipp), is an error too: the read would fail, and a guard
block, on every call. So is reading, or testing with has(), an argument
none of the declared tools a test of tool.name narrows the call to has
in its closed schema (tool.name == 'refund' && args.iban == 'x' where
only transfer declares iban; tool.name in ['a', 'b'] && ..., tool.name !=
'refund' || ..., a conditional's condition), as in an entry scoped to
them. A read guarded by a presence test (has(args.x) &&
...) cannot fail and is not reported, but the test, has(args.x) of an
argument no schema has, is always false and is. So is a field of an
argument every schema that lists it types as no object (args.amount.x,
amount a number): the read fails on each call with amount, has() of it is
always false (an evaluation error for a list). Nothing is said when a
tool may send arguments no schema lists: a declared tool whose args
schema (or the object's) is not closed (no properties,
additionalProperties not false, patternProperties, allOf, anyOf, oneOf,
$ref, if, dependentSchemas or unevaluatedProperties at its top level),
settings.allow_undeclared_tools, or MCP servers. Comparing an argument
with a constant of another kind than its schema's in an entry not scoped
to tools is an error at the constant where every declared tool whose
schema lists the argument types it otherwise: a call's arguments are
checked against its tool's schema before any layer, so args.amount ==
'100' (!=, in) where amount is a number, or args.query == 5 where query is
a string, is always false and a deny with it never fires, the refund of
100 running, and args.amount == null never holds (a null reads as
absent: where a schema lets amount be null, a type list with "null" or
nullable: true, has(args.amount) is false for it and the read a "no
such key" error; test has(args.amount) instead);
args.amount > '100' (<, <=, >=) cannot be evaluated, and
the guard fails as its on_error says on every call that reaches it, with
a message about overloads (nothing is said where undeclared or MCP tools
may be called). In an entry scoped to tools, args is typed and these are
overload errors of CEL's. In the chat stage a tool call's args (in
response.tool_calls, or a message's tool_calls) is a map of any keys to
CEL; where a name test narrows the call to declared tools
(response.tool_calls.exists(c, c.name == 'transfer' && c.args.ammount >
1000.0), c.name in ['a', 'b'] && ..., or c.name != 'transfer' || ... in an
all(); the condition of a filter() narrows the calls of the macro it is
chained into, response.tool_calls.filter(c, c.name == 'transfer').exists(c,
...), and a map()'s filter its transform; a call read by a constant index
is narrowed by a name test of the same element, size(response.tool_calls)
> 0 && response.tool_calls[0].name == 'transfer' &&
response.tool_calls[0].args.ammount > 1000.0, and an element of a
filter() by its condition), reading an argument none of their args schemas has, all closed,
is an error with the argument meant: a call its tool accepts never
carries it, so the read fails, or has() of it ('ammount' in c.args) is false, on every one (of
a call in a message's tool_calls, the client's, a cel/untyped-args
warning). A phase "after"
predicate's result is checked the same way against the result_schema of
the tools its entry applies to (every declared tool when it is unscoped):
result.stauts, result['stauts'] or has(result.stauts) where no schema
lists the field is an error, with the closest field (the read fails
whenever the result lacks it, and has() of it is always false, so a deny
testing it never fires). A result_schema that leaves the result open
(additionalProperties, patternProperties, a composition or a reference)
is not checked. A custom invariant's reads are checked against the run's
trace as agentc run -json prints it: a field the trace does not have
(executions.tool, audit.all(a, a.tol == ...), meter.cals) or a model or
tool the policy does not declare read from executions
(executions.tools.refnd) is an error, with the closest name: the read
fails on every run and prove reports the invariant violated, whatever the
policy does (and has() of it is always false).`},
	{"cel/not-bool", dsl.Error, "a predicate whose type is not bool", `
A predicate type-checks but does not yield a bool (args.amount rather than
args.amount > 100.0), so it could never decide.`},
	{"cel/cost", dsl.Error, "estimated cost unbounded or above the limit", `
The static cost estimate of a predicate is unbounded (a comprehension over
an untyped value, or a membership test in one: 'x' in item.metadata.tags,
reported at the value; no schema sizes a meta or metadata value, so no
limit admits it) or above settings.cel_cost_limit (default 1,000,000).
Sizes come from the schema's maxLength and maxItems; give them to bound a
scan over a string or a list. Where no schema can (the chat, turn and
admit variables), strings are assumed 32 KiB, lists 256 elements and a
message's content 16 KiB, so a scan of the transcript is estimated for
4 MiB, the request body agentc serve admits by default. The message names
the sizes assumed and what lowers the estimate: contains() instead of
matches(), content_filter for regular expressions over the messages, or a
higher settings.cel_cost_limit.`},
	{"cel/untyped-args", dsl.Warning, "a predicate reads args, or a field of a result, where no tool schema types it", `
A predicate reads args in an entry that is not scoped with tools: to tools
whose JSON Schema types them, so a misspelt argument cannot be caught at
vet time and fails at run time instead. Scope the entry to its tools. In
an entry scoped to them, a read of a field below an argument its schema
leaves untyped (args.opts.sudo where opts is {type: "object"} with no
properties, or its additionalProperties open; args.amount.value where
amount has no type; an element of a list argument whose items have no
properties or no type, read by index, args.items[0].x, or through a
macro's variable, args.items.exists(i, i.x == 1)) is warned about at the
read: a misspelt field is not caught there either, and the field may hold
a value of any type, so deny: "args.opts.sudo == true" lets
{opts: {sudo: "true"}} through.
Declare the object's properties. A map whose values the schema types
(additionalProperties: {type: "string"}) is not reported. So is, in an
entry scoped to tools, a comparison (==, != or in) of an argument its
schema lets be a number or a string (type: ["string", "integer"], an
anyOf of both, no type at all) with a constant a call may send in the
other kind: deny: "args.account == '12345'" lets {"account": 12345}
through, as a number never equals a string (and 'true' a boolean); the
warning is at the constant, once for an in list, and not given where the
predicate also compares the argument with the other spelling
(args.account == '12345' || args.account == 12345). The
warning is also given for a phase "after" predicate that reads a field of result
(result.status) where a tool it applies to declares no result_schema:
declare the tool's result_schema. A predicate that reads result whole
(type(result) == string, result.contains('x')) is not reported. A chat
predicate that reads an argument of a proposed tool call without
narrowing the call to a tool (response.tool_calls.exists(c,
has(c.args.ammount)), response.tool_calls[0].args.ammount) is warned about where no declared tool's args
schema has the argument and all are closed, and only declared tools run
(cel/type says the same of a call narrowed by c.name == '...'). A call
read from request.messages (a message's tool_calls) is the client's
history, which the tool chain never checked: the same read of one
narrowed by its name is this warning, not cel/type's error.`},
	{ruleConstant, dsl.Error + "/" + dsl.Warning, "a predicate with one value for every call that leaves its layer inert", `
A predicate that reads no variable of its stage ("false", "1 > 2",
"'a' == 'b'") has the same value for every call. When that value makes
the layer do nothing, the policy says one thing and enforces another: an
entry's when that is always false (the layer never runs), a guard's deny
that is always false or require that is always true (the guard never
blocks), a state handler's deny that is always false (it never vetoes). A
constant that blocks every call (deny: "true") fails closed and
is not reported. A predicate that reads variables has one value too when
a term decides it whatever they hold: a constant that absorbs its && or
|| (args.amount > 100.0 || true, ... && false), or comparisons of one
field (or of its size()) with numbers that cannot all hold (args.amount
< 0.0 && args.amount > 10.0) or, for an int or a size(), whose
alternatives cover every number (args.count >= 0 || args.count < 0; a
double or dyn field may hold NaN, which satisfies no comparison, so
item.score >= 0.0 || item.score < 0.0 is not reported), equalities of one field with
two strings (tool.name == 'a' && tool.name == 'b'; a field of an element
read by a constant index is one field, response.tool_calls[0].name;
messages is request.messages, so size(messages) and
size(request.messages) are one field too), or inequalities
joined by || (tool.name != 'a' || tool.name != 'b', always true), a
presence test beside its negation (has(args.note) && !has(args.note)
never holds, has(args.note) || !has(args.note) always does), a presence
test of an argument the tool's args schema requires, at every level of
its path, with a type that rejects null (the layer tools refuses a call
whose arguments do not match the schema before any layer runs, so
has(args.order_id) always holds and a when: "!has(args.order_id)" never
does; an untyped argument may be null, which has() reads as absent), a
membership in an empty list (tool.name in []), or a matches() (a
matches_any() all of whose patterns are such) with a constant pattern
that can match no text, which is always false: $ without the m flag
matches only at the end of the text, so args.iban.matches('^xx$[0-9]+')
requires text after the end (guard/inert says the same of a layer's
config patterns). Each term that decides the predicate alone is a
finding of its own, at the term (size(args.to) < 1 && size(args.to) > 5
&& args.amount > 10.0 && args.amount < 5.0 gets two; a field compared
with a third string is not another). Such a test that does not decide the predicate
(args.iban == 'x' || args.iban.matches('^xx$[0-9]+')) is a dead term: an
error where it can let calls through (in a deny or a when, under no
negation; in a require or an admit, under one), a warning where it can
only block more. So is each such pattern of a matches_any() list beside
patterns that can match (matches_any(args.q, ['(?i)^delete', 'drop$table'])):
the test is the || of its patterns, and the pattern is reported at its
position, with the same severity. So is a part that does not decide the
predicate, nested under an ||, a ! or a ternary, whose terms cannot all
hold, or one of which always holds, by the relations above (args.amount
> 100.0 || (args.count == 1 && args.count == 2)): an error where the value
it is stuck at makes a deny or a when hold for fewer calls, or a require
or an admit for more (or it is an argument of a function), a warning
where it can only block more; one value compared twice, a double's
comparisons (NaN) and tests in two comprehensions are not such a part. So is an after-phase turn
guard that reads status alone and has one value for both statuses it
sees, ok and failed (status != 'ok' && status != 'failed',
status.startsWith('block')): a turn that ended blocked, over budget or in
doubt is returned without running it. A guard's deny and require are read
together with its when, as the guard runs only where the when holds: a
deny that cannot hold where the when does (when: "args.currency ==
'EUR'", deny: "args.currency == 'USD' && args.amount > 100.0") never
blocks, nor does a require the when makes always true (when: "args.count
> 10", require: "args.count > 5"; or args.amount, a number, compared with
10.0 and 5.0), nor a deny that needs an argument absent where the when
tests it present (when: "has(args.approved_by)", deny: "args.amount >
100.0 && !has(args.approved_by)"). An after-phase guard's are not read together: the layers
inside it may rewrite what its when read (a fallback the request's model)
before the predicate reads it. The parts that read the call
are dead: an error where the value leaves the layer inert (an admit
always true admits every item), a warning where it makes the layer act
on every call (a deny that blocks every call, a when always true, an
admit that drops every item). A custom invariant that reads a part of the
run's trace nothing in the policy fills is warned about at the read: meter
(the chat chain's meter's ledger) is all zeros in every run of a policy
whose chat chain has no meter, and audit empty in every run of one nothing
of which writes audit records (no audit layer, grounding record_grounding
nor state sink "audit"), so meter.usd <= 2.5 or audit.all(a, ...)
decides nothing and prove finds the policy clean whatever it spends or
records.`},
	{ruleUnknownValue, dsl.Error, "a field compared with a value it never holds", `
A predicate compares a field whose values are known with a constant that
is not one of them, so the comparison never holds and a guard that
denies with it never fires. An error for tool.name in the tool stage: the
tools an entry scoped with tools: sees are those, an unscoped entry's are
the declared tools, as a call of another is refused (nothing is said when
settings.allow_undeclared_tools or MCP servers let others be called). A
warning for request.model and response.model with a model the policy does
not declare, response.finish_reason with anything but stop, length,
tool_calls, content_filter, pause_turn or '', request.params.response_format
with anything but text, json_object, json_schema or '' (none set), and a
message's role with anything but system, user, assistant or tool: a host
may register an undeclared model client, send another finish reason or
format type, or build messages of another role. So is run.meta.tenant or
run.meta.key compared with a tenant or a key name no declared key has,
where the policy declares keys: agentc serve sets them from the key it
admitted (a host embedding agentc may set others; without keys the host
names the tenant, and nothing is said). So, too, is a read in the chat or
tool stage of a key of run.meta other than those two, where the policy
declares keys (run.meta.?tenat.orValue('') == 'retail', has(run.meta.kye),
'region' in run.meta): serve never sets it, so a test of it never holds
under agentc serve; the closest key is the did-you-mean. Not in a policy
with a turn chain: a host's agent turns run it, and the host sets
run.meta as it likes. The same holds of the
name of a tool offered (request.tools), called (response.tool_calls) or
called earlier (a message's tool_calls) in the chat stage, compared with a
name no declared tool has where only declared tools run: a warning, as a
host may offer another and a model may name one. A warning, too, for a
field of a tool's result in a phase "after" predicate, compared with a
string its tools' result_schemas never declare (result.status == 'error'
where the enum is ok and failed): the result is not checked against the
schema before the predicate reads it, but a deny with it never fires on
the results the tool declares. A model's provider id
(request.model == 'gpt-4.1-mini' where the policy names that model fast),
or an API's word for what agentc reports under its own (a finish reason
'max_tokens' or 'end_turn', a role 'developer'), gets the value the field
holds as its did-you-mean (fast; length, stop; system). A field of an
element read by a constant index holds what the field of every element
does (messages[0].role a role, response.tool_calls[0].name a tool's
name, args.items[0].sku its schema's values), and messages is
request.messages. An after-phase turn
guard that reads status alone and tests status != with a status it never
sees gets a warning: the test is always true, and cel/constant says what
that makes of the guard (a deny that blocks every turn fails closed, a
warning; a require that never blocks, an error). Elsewhere a != with a
value the field never holds is always true too, an == always false, and
the severity follows what that makes of the predicate: a warning where it
can only make it fail closed, a != in a deny or a when (tool.name !=
'serch' && ... blocks more calls than written, never fewer) or an == in a
require (it blocks more calls), an error where it can let calls through
(an == in a deny; a != in a require, an admit, an invariant; either under
a negation) or where its effect is not known (an argument of a function). ==
and != compare, and so does in with a list of constants (a constant of a
list that also holds a possible value is a warning: it is dead, the test
is not); inside a macro the variable stands for the list's elements
(request.messages.exists(m, m.role == 'usr')), and a list mapped to a
field of another's elements holds that field's values ('refnd' in
response.tool_calls.map(c, c.name)), as a list argument holds its items'
('fsat' in args.tags). An argument tested against
a list mixing kinds (args.amount in ['1', 2], amount a number in every
schema that lists it) gets the warning at each constant of another kind:
a call's arguments are checked against its tool's schema, and the list
holds dyn values, so CEL accepts it even where args is typed. In the tool
stage an argument's values are those its tool's args schema allows, since
a call's arguments are checked against it before any layer: an enum or a
const of strings (args.currency == 'JPY' where its enum is EUR and USD
never holds; 'usd' gets 'USD' as its did-you-mean), one of numbers
(args.level == 7), and a number's minimum, maximum, exclusiveMinimum and
exclusiveMaximum (args.amount > 10000.0 where its maximum is 5000 never
holds, whichever side the constant is on; args.amount <= 5000.0 always
does), with the severities above, but for one case: where the severity
would be an error and no allowed value is near the constant (no
did-you-mean), it is a warning, as the calls the test misses carry values
the schema refuses and none gets through by it ('usd' stays an error: the
test was likely meant for 'USD'). A state handler's deny reads the value
the same way: a value is checked against its field's schema before the
handlers, so value.tier == 'platinum' where the enum is gold and std is a
warning, and 'gld' an error with 'gold' as its did-you-mean; its numbers
are read as an argument's (value.seats > 20 where its maximum is 10 never
holds, a warning; value.seats <= 10 always does). A field
read with a default (args.?tier.orValue('') == 'gld') compares as the
field does, unless the default is the constant or in the list (then the
test holds where the field is absent). An entry
scoped to several tools sees
the union of their values, an unscoped one the union over the declared
tools. Nothing is said where a call may carry a value no schema lists:
undeclared tools allowed, a tool in scope without an args schema, an
unscoped entry where another tool's schema lets the argument in without
describing it (additionalProperties not false), an enum holding null or
values of another kind, an argument a file_check path_arg names (the
layer hands the layers inside it the resolved real path). Nor for a test
that can only make the predicate fail open and restates a bound or checks
a sign (args.amount <= 0.0 where its exclusiveMinimum is 0, args.top_k >
50 where its maximum is 50, args.amount < 0.0): a policy may hold
whatever the schema says. The names in
response.tool_calls and request.tools are not checked: the tools a request
offers are the caller's. A constraint's when is checked the same way
against the schemas of the layers its outer and inner designate: a config
field of fixed values (a log's level, a rate_limit's mode, an on_error)
compared with a string it never takes (outer.level == 'debugg') is an
error, since the schema refuses any other value and the constraint never
applies; so is a numeric config field the schema bounds (a retry's
max_attempts, 1 to 10; a nested struct's field by its path, a retry's
breaker.failures, 1 to 1000: outer.breaker.failures > 5000,
inner['budget']['calls'] < 1) compared with a number beyond the bounds
(outer.max_attempts > 100, inner.rate < 0, outer.max_attempts in [20,
30]; a number of a list that also holds a possible one is a warning), while a test it makes always
true (inner.rate < 2000000000) is a warning, and one that restates a bound
or checks a sign (outer.max_attempts >= 1) is not reported. So is, in a custom invariant, target.name compared with a name
that is neither a declared model nor a declared tool, an audit record's
tool with an undeclared tool, target.stage with anything but chat or tool,
or 'refnd' in executions.tools: prove calls only what the policy declares,
so target.name != 'refnd' || ... is always true and the invariant never
fires. A startsWith(), endsWith(), contains() or matches() test with a
constant, in a deny, a require or an admit, of a field whose values are
known (any of the above: an argument its schema's enum holds to,
tool.name, request.model) is tested against each of them, and one that
none passes is reported as an == would be, with the spelling a value
passes, the case aside, as its did-you-mean
(args.currency.startsWith('btc') where the enum is USD, EUR and BTC:
'BTC'; tool.name.startsWith('Delete') where the tool is delete_file;
args.currency.matches('^btc$'): '(?i)^btc$'); a when's such test is
guard/inert's. In an entry scoped to tools, a string argument whose
schema gives it a pattern holds only what the pattern matches: an ==
(or !=) with a constant no scoped tool's pattern matches, and a
startsWith(), endsWith(), contains() or matches() test with a constant
that no value the pattern matches passes, are reported the same way
(args.iban.startsWith('ir') where the pattern is
^[A-Z]{2}[0-9]{2}[A-Z0-9]{4,30}$: 'IR'; args.iban.endsWith('x'):
'X'; args.iban.contains('-'); args.file.endsWith('.PDF') where the
pattern ends in \.pdf$: '.pdf'; args.iban.matches('^[a-z]')). The
pattern and the test are each read as a search (a match anywhere in the
text, ^ and $ at its ends), and the test is reported only where no
string matches both: so a prefix is decided only by a pattern anchored
at its start, a suffix by one anchored at its end, a part by one
anchored at both. What that cannot decide is taken to let a value
through: an assertion other than ^, $, \A and \z (\b, and ^ or $ under
(?m)) is taken to hold, and two patterns whose joint walk takes more
than 200000 steps (a pair of states looked at, an instruction followed,
a range of characters compared) to meet. The result of url_host(), lower(), lowerAscii() and
upperAscii() is held to its form the same way: url_host() returns the
host lower-cased, without a trailing dot, port or brackets, lower()
(lowerAscii(): its ASCII letters) lower-cased and upperAscii() its ASCII
letters upper-cased, so url_host(args.url) == 'Evil.com', == 'evil.com.'
or in ['https://evil.com'] never holds, nor endsWith('.Evil.com'), nor a
startsWith() or contains() of a part with a capital (or, for a host, a /,
?, #, @ or space), nor args.kind.upperAscii() == 'wire', nor a matches()
whose every match needs a letter of the case the function never writes
(lower(args.memo).matches('BTC'); a pattern with (?i), or a class
holding a lower-case letter, may match); the did-you-mean is the constant
in that form ('evil.com'), and the severity follows what the dead test
makes of the predicate, as above. So is url_path(), which returns the
path alone, decoded, its repeated slashes joined, its . and .. segments
resolved, its backslashes read as slashes, and never a ";" nor a segment
that ends in a dot or a space or holds ":$": url_path(args.url).startsWith('https://api.example.com/v1/admin'),
startsWith('/v1//admin'), startsWith('/v1/%61dmin'), startsWith('/v1\\admin'),
startsWith('/v1/admin./'), == '/v1/x/../admin', == '/v1/admin::$DATA',
contains('/../') and contains(';') never hold (did you mean '/v1/admin'?); a . or .. at an
end of the constant that the path may go on from (startsWith('/v1/..'),
of /v1/..x) is not a segment, and capitals are not reported, as
url_path() keeps them.`},
	{ruleUncheckedKey, dsl.Warning, "a predicate reads a key of an optional map, or an invariant a field the trace may leave out, without testing it first", `
A predicate reads a key of a map whose keys nothing guarantees, where no
presence test guards the read: item.metadata.KEY in admit (whatever the
retriever attached), run.meta.KEY (what the host gave the run),
session.meta.KEY in the turn stage, request.params.metadata.KEY in the
chat stage (what the caller sent), a map below the args of an entry scoped
to tools (args.headers['X-Debug'], headers an object whose keys are free,
unless each scoped tool's schema requires the key), written m.KEY or
m['KEY']. Where the key
is absent the read fails, and the predicate fails as its place does on an
evaluation error, which the message says: admit fails closed (the item is
dropped even where the predicate meant to keep it: item.metadata.tier !=
'inferred' drops every item without a tier); a guard with on_error
"closed" blocks the call (deny: "run.meta.tier == 'free'" blocks every
call of a run without a tier), one with on_error "open" lets it through
unchecked; an entry's when applies its layer; a state handler refuses the
value. That holds unless the rest of the predicate decides it (in
item.metadata.tier == 'gold' || item.score > 0.9 an item without a tier
is admitted when its score is above 0.9, and refused otherwise). Test the
key first, !has(run.meta.tier) || ... or 'tier' in run.meta && ..., or
read it with a default, run.meta.?tier.orValue('').

So is a read of an argument, in a tool-stage entry not scoped to tools,
that a declared tool's args schema does not require: on that tool's calls the
argument may be absent (deny: "args.amount > 100.0" blocks every call of
a search tool, "no such key: amount"). Scope the entry with tools:, or
test the argument first. A predicate that reads tool.name is not
reported: it may decide before the read (tool.name == 'refund' && ...),
nor is a tool the entry's when leaves out whatever the call (when:
"tool.url_arg != ''" for a tool without url_arg): the when runs first.
Nothing is said where undeclared or MCP tools may be called.

A custom invariant is warned about the same way when it reads a field that
the run's trace leaves out where it is empty (the fields agentc run -json
omits, such as a step's error, absent on a step that did not fail, or the
attempts of a concurrent step), where no presence test guards the read.
On a run with a record that lacks the field the read fails, and prove
reports the invariant violated with the evaluation error, unless the rest
of the invariant decides it: steps.all(s, s.error.kind != 'in_doubt') is
violated by every run with a step that succeeded. has(s.error.kind) reads
s.error and fails the same way. A step's outcome and an audit record's
tool are read freely: the trace leaves them out only on records prove
does not make (an admit step that succeeded, the audit records of a
turn). Test the field first, steps.all(s, !has(s.error) ||
s.error.kind != 'in_doubt') or has(s.error) && ...; an invariant cannot
use the optional syntax (s.?error).`},
	{ruleUncheckedIndex, dsl.Error + "/" + dsl.Warning, "a predicate reads an element of a list by a constant index without testing the list's size", `
A predicate reads an element of a list whose size nothing fixes by a
constant index, where no test of the list's size guards the read: in the
chat stage the transcript (request.messages, or messages, one list: a
test of either guards a read of the other), a message's or
the answer's tool calls (response.tool_calls, m.tool_calls), the tools
offered or the stop sequences; in the tool stage an argument every
schema that lists it types as an array, where the index is at or past
its minItems (the least of those schemas', 0 where one has none: the
layer tools refuses a call whose arguments do not match the schema
before a guard reads them; prefixItems fixes no size); in either an
element of a filter() (or of a map() with a condition) of any list,
which keeps none where no element matches, and of a map() of such a
list, which has as many elements. Where the list is too short the read
fails (index out of bounds), and the predicate fails as its place does
on an evaluation error, which the message says: deny:
"response.tool_calls[0].name == 'refund'" fails on every answer without
tool calls, and with on_error "closed" (the default) blocks every answer
in text; deny: "response.tool_calls.filter(c, c.name ==
'refund')[0].args.amount > 100.0" every answer without a refund call.
That is an error where nothing else in the predicate can decide it
before the read; a warning where another term may (a term of an && or an
|| beside it that does not read the list by an index that fails wherever
this read does: at this index or past it, or any negative index for a
negative one; a read below the least size minItems or a guard gives
never fails; a conditional's branch, a macro's step), and for the first
message of the transcript, empty only in a request without messages. A guard is a term beside the
read in an && that bounds the size from below (size(l) > 0, size(l) >=
1, 1 <= size(l), l.size() != 0, !(size(l) == 0), size(l) == 2, size(l) >
0u, double(size(l)) > 0.5, or l.exists(...), l.exists_one(...), !l.all(...)
or x in l, which hold only for a list with an element; for l.filter(c,
P), its own size or l.exists(c, P) with the same condition or one of its
&& terms (l.exists(c, P && Q)), whatever its variable's name and the
order of an =='s sides, !l.all(c, !P) or x in l.map(c, f) for P f == x,
and not a test of l), one beside it in an
|| that bounds it from above (size(l) == 0 || ..., size(l) < 2 || ...
for l[1]; size(l) == 1 || ... where the least size is 1), or a conditional's condition, in either order (CEL evaluates
every term of an && and an || whatever their order), and so does the
entry's when, which runs first (not a phase "after" guard's: the layers
inside it may rewrite what the when read); a when that tests the list in
another way (l != [], l.filter(...).size() > 0 for l[0]) makes the read a
warning. Test
the size first, size(response.tool_calls) > 0 && ..., or read the
element as an optional, response.tool_calls[?0].name.orValue('') ==
'refund'. An index written as a constant expression (1 - 1) is read as
its value; a negative one (request.messages[-1]) fails on every list,
whatever guards it, an error where nothing else can decide it, the
entry's when included (the last element is l[size(l) - 1], behind
size(l) > 0 && ...). An index that is not a constant is not reported.
Each index of a list read unguarded is a finding of its own, at its
first read, with its own severity and size test (messages[1] and
messages[2] are two); a read of the same element again is not another.`},
	{ruleLooseMatch, dsl.Warning, "a test that lets a call through holds for values that merely contain what it reads", `
A predicate lets a call through on a test that holds for more values than
it reads as. matches() and matches_any() find the pattern anywhere in the
value: require: "args.path.matches('/srv/data/[a-z]+\\.txt')" lets
through "/etc/passwd#/srv/data/a.txt", and deny:
"!args.role.matches('admin|support')" lets through "notadmin". A pattern
is loose unless it is anchored in every branch of an alternation
('^/srv/a/|/srv/b/' anchors the first branch only): at its end, $ or \z,
which says where it matches ('@corp\\.example$'), or at its start, ^
(without the m flag) or \A, where it also ends with .*, which says any
rest is meant ('^/srv/public/.*'), or with a /, a prefix test as
startsWith('/srv/a/') is ('^/srv/a/'), or with a group each branch of
which ends so ('^https://api\\.example\\.com(/|$)'). One anchored at its start alone
matches a value that merely begins with a match:
require: "args.path.matches('^/srv/data/[a-z]+\\.txt')" lets through
"/srv/data/a.txt/../../../etc/passwd"; anchor it at both ends
('^...$'). One that begins with .* says it matches anywhere and is not
reported either; one anchored under the m flag
('(?m)^...$') matches a value one line of which matches. A host tested
with url_host(...).endsWith('example.com') (or lower() of it) lets
through evilexample.com, endsWith('localhost') evillocalhost, and
contains('example.com') example.com.evil.example: test
== 'example.com' || endsWith('.example.com'). So does a host matched
with a pattern anchored at its end whose name does not begin at a label
boundary: url_host(args.url).matches('example\\.com$'), in matches() or a
matches_any() list, lets through evilexample.com; write
'(^|\\.)example\\.com$', '\\.example\\.com$' or '^example\\.com$'. So does
a whole URL matched with a pattern that lets the host's name begin
anywhere in a label: args.url.matches('^https://[^/]*example\\.com/')
lets through https://evilexample.com/; write '^https://([^/.]+\\.)*example\\.com/'
(a pattern whose first label may be any label, [a-z]+\\.example\\.com, is
not reported). So does one that lets the host's name go on:
args.url.matches('^https://api\\.example\\.com.*') lets through
https://api.example.com.evil.example; end the host with a / or (/|$). So
does a host matched with a pattern not anchored at its end:
url_host(args.url).matches('.*\\.example\\.com') lets through
a.example.com.evil.example; end it with $. So does the URL a tool's
url_arg names matched with a pattern that begins with .* and names a
scheme ('.*://api\\.example\\.com/.*' lets through
https://evil.example/?u=://api.example.com/) or tested with contains()
of a host's name, with a scheme or not (args.url.contains('api.example.com')
lets through https://evil.example/api.example.com; not of a file's name,
'report.pdf', nor of a path, '/v1/'): test url_host(). A test
that is the condition of a ternary with a constant branch is read as the
|| or && it is: endsWith('example.com') ? true : false lets
evilexample.com through as the bare test does. So does a URL tested with
startsWith('https://api.example.com'), a prefix of
https://api.example.com.evil.example/ and https://api.example.com@evil.example/:
write startsWith('https://api.example.com/'). So does a prefix test of
the path a tool's path_arg names (startsWith('/srv/data/'), or a pattern
anchored at its start that also matches the prefix followed by
/../../etc/passwd, such as '^/srv/data/' or '^/srv/data/.*', or by /..,
'^/srv/data/[^/]+$', or a value it matches with a traversal after the
whole of it or a part of it that ends in a /: '^/srv/(data|reports).*'
and '^/srv/(data|reports)/' match /srv/data/../../etc/passwd,
'^/srv/data/.*\\.csv$' /srv/data/../../x/.csv,
while '^/srv/(data|reports)/[a-z0-9_]+\\.csv$' matches none) where no
file_check layer covers the tool (one with a when does not, as the calls
it skips reach the tool as spelled): args.path.startsWith('/srv/data/')
lets through /srv/data/../../etc/passwd, which names /etc/passwd; test
path_clean(args.path), the path with . and .. resolved, or add a
file_check layer (a test beside it of the same path for "..",
!args.path.contains('..'), is not reported, nor one written with
contains_any(), matches_any(), a pattern that finds every ..
segment, such as '(^|/)\\.\\.(/|$)', or a test of its segments,
'..' in args.path.split('/') or args.path.split('/').all(s, s != '..'), but for one that lets a path
ending in /.. through, !args.path.contains('../') or
contains('/../'): /srv/data/.. names /srv; a test of one element of a
list (args.files[0].path) is beside a prefix test of that element alone,
not of another nor of every element; beside it is a conjunct of
it where the predicate lets the call through, so one in another branch,
args.path.startsWith('/srv/data/') || args.path.contains('..'), or one
a disjunct can make moot, && (!args.path.contains('..') || args.note ==
'x'), excuses nothing, and so for each test said to be beside another
below; so is a conjunct of the body of an all() that holds there, or of
an exists() that fails there, over the same list, which holds for each
element: args.files.all(f, f.path.startsWith('/srv/')) &&
args.files.all(f, !f.path.contains('..')) in a require is not
reported, and args.files.exists(f, !f.path.contains('..')) in its place,
which one element may pass alone, excuses nothing; and so is the
condition of a conditional whose other branch is the constant that does
not let the call through, args.path.contains('..') ? false :
args.path.startsWith('/srv/data/')). A path_arg below the top
of the arguments (/request/path, /files/*/path) is read through its
object (args.request.path), a constant index (args.files[0].path) or
the variable of a macro over the list, a filter() of it or a map() of
it to the path (args.files.all(f, f.path.startsWith('/srv/data/')),
args.files.map(f, f.path).all(p, p.startsWith('/srv/data/'))), an
optional read of either is one of it (args.files[?0].path.orValue(''),
args.request.?path.value()), and
a test of lower() or lowerAscii() of the path (or URL) is one of it. Such a prefix test
of a path is reported on the side that blocks too, as a path names a
file under the prefix without beginning with it: deny:
"args.path.startsWith('/etc/')" lets through /srv/../etc/passwd, and,
beside a test of the path for "..", /./etc/passwd and //etc/passwd;
test path_clean(args.path) or add a file_check layer (a prefix of / or
./ alone, or one beginning with ~ or ., is not one, nor is a test beside
one of path_clean() of the same path with the same prefix or pattern;
a pattern whose literal start names nothing below the root,
'^/(etc|root)/passwd$', names what a value it matches does). So does a prefix
test of the URL a tool's url_arg names that reaches past the root of the
URL's path (startsWith('https://api.example.com/v1/public/'), or a
pattern anchored at its start that also matches the prefix followed by
/../../admin or /%2e%2e/%2e%2e/admin), whatever egress allows, as it
checks the host alone:
https://api.example.com/v1/public/../../admin, which a WHATWG URL
parser, fetch and many servers resolve to /admin, and %2e%2e, which
they read as .., get through; test url_host(args.url) ==
'api.example.com' && url_path(args.url).startsWith('/v1/public/'), the
host and the path as a server routes it (a test of url_path() is not
reported); a test beside it of the same URL for ".."
and for "%" (!args.url.contains('..') && !args.url.contains('%')) is not
reported (one for '%2e' alone lets %2E%2E through), and a prefix that ends at the root of the path
('https://api.example.com/') is not one, nor one that reaches into the
query or fragment ('https://api.example.com/search?q='), after which a
../ is no part of the path. Such a prefix test of a URL is reported on
the side that blocks too, as a URL reaches the path a server routes
without beginning with the prefix: deny:
"args.url.startsWith('https://api.example.com/v1/admin')" lets through
https://api.example.com/v1/x/../admin, https://API.example.com/v1/admin,
https://api.example.com:443/v1/admin, https://u@api.example.com/v1/admin
and https://api.example.com/v1/%61dmin; test
url_host(args.url) == 'api.example.com' &&
url_path(args.url).startsWith('/v1/admin'). So does a prefix test of a
path whose constant does not end in a / where it lets calls through:
url_path(args.url).startsWith('/v1/public') lets through /v1/publicity
and /v1/public-secrets, paths beside /v1/public rather than below it, and
path_clean(args.path).startsWith('/srv/data') /srv/data-secrets; write
startsWith('/v1/public/'), or == '/v1/public' ||
startsWith('/v1/public/') where /v1/public itself is meant. That holds
for a test of url_path() or path_clean() (or lower() of one) whatever it
reads, in any stage, for a pattern anchored at its start that matches
its literal prefix followed by -secrets ('^/v1/public.*'; '^/v1/public(/.*)?$'
is tight), and for the path a path_arg names (a file_check layer or not,
as a sibling inside its roots passes it; not where the sibling is
outside the roots of a layer covering each tool in scope, which refuses
it: startsWith('/srv/data') with roots ['/srv/data'], whether it tests
the path or path_clean() of it, the real path the layer hands on) or
the URL a url_arg names
tested as they are, in the one warning that reports their traversals or,
where tests beside it excuse those, alone; the root and a prefix that
names none below it (~, .) are not one, nor is a prefix whose last
character is not a letter or a digit ('/tmp/upload-', '/srv/report.',
'/v1/items:', the start of a name by design), nor a pattern that
follows its prefix with a class of characters without a / ('^/v1/agent[^/]*(/.*)?$',
which says how the name goes on). On the side that blocks
(deny: "url_path(args.url).startsWith('/v1/admin')", which also blocks
/v1/administrators) it blocks more than written and is not reported. A constant written as a
concatenation ('https://' + 'api.example.com') is read as the string it
makes, and the variable of exists() or all() over a list of constants
(['example.com', 'example.org'].exists(d, ...endsWith(d))) as each of
them. A warning at the constant,
where the test lets calls through: in a require, or admit (which keeps an
item), under no negation; in a deny, or a when (which skips its layer),
under one, and for a path's or a URL's prefix test also where it blocks. The same
test on the side that blocks (deny: "args.cmd.matches('rm -rf')")
blocks more values than written, never fewer, and is not reported (but
for the path's or the URL's prefix, which the value need not begin with); nor is a test beside a conjunct that pins
the host of the URL it reads (args.url.startsWith('https://api.example.com')
&& url_host(args.url) == 'api.example.com'), nor one in the when of a
layer whose skipping lets nothing through (retry, fallback, hedge,
memoize, semantic_memoize, compaction, checkpoint), nor a pattern on a
field whose values are known (tool.name among the declared tools, a
declared model's name, an argument its schema's enum holds to), which
selects among them and lets no other value through. Write '^...$' to
match the whole value, or begin the pattern with .* where a match
anywhere is meant.`},
}

// Rules lists every rule id the compiler reports, with its severity, title
// and documentation.
func Rules() []Rule {
	var out []Rule
	out = append(out, loadRules...)
	out = append(out, celRules...)
	out = append(out, orderRules()...)
	out = append(out, baselineRules...)
	return out
}
