package security

// Building blocks for the default patterns. They match the normalized text: lower case, words
// separated by exactly one space.
//
// The patterns aim at instructions addressed to the assistant. Words that also name ordinary
// things in developer and support requests are left out or need a qualifier: verbs such as
// drop and override (tables, CSS rules) only count with second-person framing ("your
// instructions"); messages, context, commands, orders and configuration are not instruction
// nouns; "my" and "our" mark the user's own earlier requests, which a user may retract.
const (
	// verbIgnore may precede "previous instructions" and similar.
	verbIgnore = `(?:ignore|disregard|forget|overrule|discard|abandon)`
	// verbIgnoreYour needs a second-person object ("bypass your restrictions").
	verbIgnoreYour = `(?:ignore|disregard|forget|override|overrule|bypass|discard|abandon)`
	filler         = `(?:(?:all|any|every|each|of|the|your|these|those|this|that|its|previous|prior|above|earlier|preceding|former|foregoing|old|existing|current|initial|original)\s){0,6}`
	temporal       = `(?:previous|prior|above|earlier|preceding|former|foregoing|old|existing|initial|original|past)`
	// qualifier is the one word allowed between a temporal word and a directive noun
	// ("previous system instructions").
	qualifier = `(?:(?:system|safety|ai|assistant|model|user|developer|operator|security|content|moderation|ethical|chat|conversation|given|stated|provided|written|hidden|secret|internal|default|original|initial)\s)?`
	directive = `(?:instructions?|prompts?|directives?|rules|guidelines|guidance|programming|constraints|restrictions|guardrails|safeguards)`
	// yourDirective is a directive noun after "your".
	yourDirective = `(?:instructions|rules|guidelines|programming|restrictions|directives|constraints|guardrails)`
	systemWord    = `(?:system|developer|dev|hidden|secret|internal|initial|original|pre)`
	// strongSystem names the assistant's own instructions without a second-person "your".
	strongSystem = `(?:(?:system|developer|hidden|secret)\s?(?:prompt|instructions?|message|guidelines|persona)|(?:dev|internal|pre)\s?prompt)`
	// revealFiller may sit between a reveal verb and what is revealed when it is not "your ...".
	revealFiller = `(?:(?:me|us|to me|back|the|its|all|full|entire|exact|complete|whole|original|initial|hidden|secret|verbatim|word for word|of)\s)`
)

// builtinPattern is a default pattern with the hints that let Detect skip most of the text:
// every alternative of a normalized pattern begins with one of its start words, and a raw
// pattern cannot match unless one of its needles occurs.
type builtinPattern struct {
	Pattern
	starts  []string
	needles []string
}

var ignoreVerbs = []string{"ignore", "disregard", "forget", "override", "overrule", "bypass", "discard", "abandon"}

func words(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var builtinPatterns = []builtinPattern{
	{
		starts: ignoreVerbs,
		Pattern: Pattern{ID: "ignore-previous-instructions", Regex: `\b` + verbIgnore + `\s` + filler + temporal + `\s` + qualifier + directive + `\b` +
			`|\b` + verbIgnoreYour + `\s(?:all\s(?:of\s)?)?your\s` + qualifier + yourDirective + `\b` +
			`|\b` + verbIgnore + `\sall\s(?:of\s)?` + yourDirective + `\b` +
			`|\b(?:ignore|disregard|forget)\s(?:everything|anything|all|what(?:ever)?)\s(?:(?:that|you|was|were|have|has|had|been|s|ve|said|told|written|stated|given|is)\s){0,4}` +
			`(?:above|previously|so far|until now|(?:before|prior|earlier)(?:\s(?:this|that|now|and|then)\b|$))` +
			`|\bforget\s(?:everything|all|what)\s(?:(?:that|you)\s)?(?:were|was|have been|ve been|had been|have|know)\s(?:told|taught|instructed|given|learned)\b`},
	},
	{
		starts: words(ignoreVerbs, []string{"violate"}),
		Pattern: Pattern{ID: "disregard-system-prompt", Regex: `\b(?:ignore|disregard|override|overrule|bypass|discard|abandon|violate)\s(?:(?:the|this|that|all|any|of)\s){0,3}` +
			`(?:` + strongSystem + `|your\s` + systemWord + `\s?(?:prompt|message|instructions?|rules|policy|policies|guidelines|persona))\b` +
			`|\bforget\s(?:(?:all|any|of)\s){0,2}your\s` + systemWord + `\s?(?:prompt|message|instructions?|rules|policy|policies|guidelines|persona)\b`},
	},
	{
		starts: []string{"reveal", "show", "print", "display", "output", "repeat", "recite", "leak", "dump", "expose", "disclose", "share", "echo", "tell", "give", "send", "write", "spell", "paste", "copy", "what"},
		Pattern: Pattern{ID: "reveal-system-prompt", Regex: `\b(?:reveal|show|print|display|output|repeat|recite|leak|dump|expose|disclose|share|echo|tell me|give me|send me|write out|spell out|paste|copy)\s` +
			`(?:(?:me|us|to me|back|all|of)\s){0,3}your\s(?:(?:full|entire|exact|complete|whole|verbatim)\s){0,2}` + systemWord + `\s?(?:prompt|instructions?|message|rules|configuration|config|directives?|guidelines)\b` +
			`|\b(?:reveal|show|print|display|output|repeat|recite|leak|dump|expose|disclose|share|echo|tell me|give me|send me|write out|spell out|paste|copy)\s` +
			revealFiller + `{0,5}(?:(?:system|developer|dev|hidden|secret|internal|pre)\s?prompt|(?:system|hidden|secret)\s?(?:instructions?|directives?))\b` +
			`|\bwhat\s(?:is|are|were|was)\s(?:your\s(?:exact\s|full\s|original\s|initial\s|hidden\s|secret\s|system\s){0,2}(?:prompt|instructions|system message)` +
			`|the\s(?:exact\s|full\s|original\s|initial\s|hidden\s|secret\s){0,2}system\s(?:prompt|instructions))\b` +
			`|\b(?:repeat|print|output|recite)\s(?:the\s|all\s|every\s)?(?:words|text|everything|lines|tokens)\s(?:above|before this|preceding)\b`},
	},
	{
		starts: []string{"you", "do", "dan", "jailbreak", "jailbreaked", "jailbreaking", "act", "behave", "respond", "pretend", "roleplay", "role", "stay"},
		Pattern: Pattern{ID: "role-override-dan", Regex: `\byou\s(?:are|re|will be|shall be)\s(?:now\s|from now on\s)?(?:dan|stan|dude|a dan|an? (?:unfiltered|unrestricted|uncensored|unaligned|jailbroken|evil)\s(?:ai|model|assistant|chatbot|llm|version))\b` +
			`|\bdo anything now\b|\bdan mode\b|\bjailbreak(?:ed|ing)?\s(?:mode|prompt|enabled|activated)\b` +
			`|\b(?:act|behave|respond|pretend|roleplay|role play)\s(?:to be\s|as\s|like\s)(?:dan|an? (?:unfiltered|unrestricted|uncensored|unaligned|jailbroken|evil)\b)` +
			`|\bstay in character\b.{0,40}\b(?:no matter|whatever|regardless)\b`},
	},
	{
		starts: []string{"enable", "activate", "enter", "switch", "turn", "unlock", "start", "engage", "go", "developer", "god", "sudo", "jailbreak", "unrestricted"},
		Pattern: Pattern{ID: "developer-mode", Regex: `\b(?:enable|activate|enter|switch to|switch into|turn on|unlock|start|engage|go into)\s(?:the\s|your\s)?(?:developer|god|sudo|unrestricted|jailbreak|dan|evil)\smode\b` +
			`|\b(?:developer|god|sudo|jailbreak|unrestricted)\smode\s(?:is\s)?(?:enabled|activated|on|unlocked|engaged)\b`},
	},
	{
		starts: []string{"pretend", "imagine", "act", "assume", "suppose", "you", "no", "not", "bypass", "disable", "turn", "remove", "ignore", "deactivate"},
		Pattern: Pattern{ID: "no-restrictions", Regex: `\b(?:pretend|imagine|act as if|assume|suppose)\s(?:that\s)?you\s(?:have|had|are|were)\s(?:no|not bound by|free from|freed from|without|released from)\s(?:any\s)?(?:restrictions|rules|filters|limitations|limits|guidelines|content policy|policies|constraints|ethics|morals|guardrails)\b` +
			`|\b(?:you\s(?:are|re)\s)?(?:no longer|not)\s(?:bound|restricted|limited|constrained)\sby\s(?:any\s|your\s|the\s)?(?:rules|restrictions|guidelines|policies|content policy|openai|anthropic|ethics|filters|guardrails)\b` +
			`|\b(?:bypass|disable|turn off|remove|ignore|deactivate)\s(?:(?:all|the|any)\s){0,2}` +
			`(?:(?:safety|ethical|moderation)\s(?:filters?|guidelines|restrictions|policy|policies|protocols|guardrails)|content\s(?:policy|policies|guidelines|restrictions)` +
			`|your\s(?:(?:all|the|any)\s)?(?:safety|content|ethical|moderation)\s(?:filters?|guidelines|restrictions|policy|policies|protocols|measures|checks|guardrails))\b`},
	},
	{
		starts: []string{"your", "from", "new", "updated", "revised"},
		Pattern: Pattern{ID: "new-instructions", Regex: `\byour\snew\s(?:instructions|rules|directives|system prompt|task|role|objective)\s(?:are|is|follow)\b` +
			`|\bfrom now on\s(?:you\s(?:will|must|shall|should)\s)?(?:ignore|disregard|no longer|only obey|obey only|answer without)\b` +
			`|\b(?:new|updated|revised)\ssystem\s(?:prompt|message|instructions?)\b`},
	},
	{
		needles: []string{"<|", "[", "<<", "##"},
		Pattern: Pattern{ID: "chat-template-token", Raw: true, Regex: `(?i)<\|\s*(?:im_start|im_end|system|endoftext|start_header_id|end_header_id|eot_id|begin_of_text)\s*\|>|\[/?INST\]|<</?SYS>>|(?m)^\s*#{2,}\s*(?:system|instruction|new instructions?)\s*:`},
	},
}
