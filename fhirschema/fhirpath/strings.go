package fhirpath

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"html"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// stringFunctions: the string manipulation functions.
var stringFunctions = []*function{
	{name: "indexOf", minArgs: 1, maxArgs: 1, impl: strFn2(func(s, sub string) Node {
		if sub == "" {
			return intNode(0)
		}
		i := strings.Index(s, sub)
		if i < 0 {
			return intNode(-1)
		}
		return intNode(int64(utf8.RuneCountInString(s[:i])))
	})},
	{name: "substring", minArgs: 1, maxArgs: 2, impl: fnSubstring},
	{name: "startsWith", minArgs: 1, maxArgs: 1, impl: strFn2(func(s, p string) Node { return boolNode(strings.HasPrefix(s, p)) })},
	{name: "endsWith", minArgs: 1, maxArgs: 1, impl: strFn2(func(s, p string) Node { return boolNode(strings.HasSuffix(s, p)) })},
	{name: "contains", minArgs: 1, maxArgs: 1, impl: strFn2(func(s, p string) Node { return boolNode(strings.Contains(s, p)) })},
	{name: "upper", impl: strFn1(func(s string) Node { return strNode(strings.ToUpper(s)) })},
	{name: "lower", impl: strFn1(func(s string) Node { return strNode(strings.ToLower(s)) })},
	{name: "length", impl: strFn1(func(s string) Node { return intNode(int64(utf8.RuneCountInString(s))) })},
	{name: "trim", impl: strFn1(func(s string) Node { return strNode(strings.TrimSpace(s)) })},
	{name: "toChars", impl: fnToChars},
	{name: "replace", minArgs: 2, maxArgs: 2, impl: fnReplace},
	{name: "matches", minArgs: 1, maxArgs: 1, impl: fnMatches},
	{name: "matchesFull", minArgs: 1, maxArgs: 1, impl: fnMatches},
	{name: "replaceMatches", minArgs: 2, maxArgs: 2, impl: fnReplaceMatches},
	{name: "split", minArgs: 1, maxArgs: 1, impl: fnSplit},
	{name: "join", maxArgs: 1, impl: fnJoin},
	{name: "encode", minArgs: 1, maxArgs: 1, impl: fnCodec(true)},
	{name: "decode", minArgs: 1, maxArgs: 1, impl: fnCodec(false)},
	{name: "escape", minArgs: 1, maxArgs: 1, impl: fnEscape(true)},
	{name: "unescape", minArgs: 1, maxArgs: 1, impl: fnEscape(false)},
}

// strFn1 builds a function of the input string alone.
func strFn1(f func(string) Node) func(*evalCtx, *callExpr, []Node) ([]Node, error) {
	return func(_ *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		s, ok, err := strInput(call, in)
		if err != nil || !ok {
			return nil, err
		}
		return []Node{f(s)}, nil
	}
}

// strFn2 builds a function of the input string and one string argument.
func strFn2(f func(s, arg string) Node) func(*evalCtx, *callExpr, []Node) ([]Node, error) {
	return strWithArg(func(_ *callExpr, s, arg string) ([]Node, error) { return []Node{f(s, arg)}, nil })
}

// strWithArg builds a function of the input string and one string
// argument that may fail or give nothing; either being empty gives empty.
func strWithArg(f func(call *callExpr, s, arg string) ([]Node, error)) func(*evalCtx, *callExpr, []Node) ([]Node, error) {
	return func(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
		s, ok, err := strInput(call, in)
		if err != nil || !ok {
			return nil, err
		}
		a, ok, err := c.strArg(call, 0)
		if err != nil || !ok {
			return nil, err
		}
		return f(call, s, a)
	}
}

func fnSubstring(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	s, ok, err := strInput(call, in)
	if err != nil || !ok {
		return nil, err
	}
	start, ok, err := c.intArg(call, 0)
	if err != nil || !ok {
		return nil, err
	}
	runes := []rune(s)
	if start < 0 || start >= int64(len(runes)) {
		return nil, nil
	}
	end := int64(len(runes))
	if len(call.args) > 1 {
		n, ok, err := c.intArg(call, 1)
		if err != nil {
			return nil, err
		}
		if ok {
			end = min(end, start+max(n, 0))
		}
	}
	return []Node{strNode(string(runes[start:end]))}, nil
}

func fnToChars(_ *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	s, ok, err := strInput(call, in)
	if err != nil || !ok {
		return nil, err
	}
	var out []Node
	for _, r := range s {
		out = append(out, strNode(string(r)))
	}
	return out, nil
}

func fnReplace(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	s, ok, err := strInput(call, in)
	if err != nil || !ok {
		return nil, err
	}
	pat, ok1, err := c.strArg(call, 0)
	if err != nil {
		return nil, err
	}
	sub, ok2, err := c.strArg(call, 1)
	if err != nil || !ok1 || !ok2 {
		return nil, err
	}
	if pat == "" {
		var b strings.Builder
		b.WriteString(sub)
		for _, r := range s {
			b.WriteRune(r)
			b.WriteString(sub)
		}
		return []Node{strNode(b.String())}, nil
	}
	return []Node{strNode(strings.ReplaceAll(s, pat, sub))}, nil
}

// regex returns the compiled regular expression of argument 0.
func (c *evalCtx) regex(call *callExpr) (*regexp.Regexp, bool, error) {
	if call.re != nil {
		return call.re, true, nil
	}
	pat, ok, err := c.strArg(call, 0)
	if err != nil || !ok {
		return nil, false, err
	}
	re, err := compileRegex(pat)
	if err != nil {
		return nil, false, execErr(call.pos, "bad regular expression: %v", err)
	}
	return re, true, nil
}

// compileRegex compiles a FHIRPath regular expression in single-line mode.
func compileRegex(pat string) (*regexp.Regexp, error) {
	return regexp.Compile("(?s)" + pat)
}

func fnMatches(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	s, ok, err := strInput(call, in)
	if err != nil || !ok {
		return nil, err
	}
	re, ok, err := c.regex(call)
	if err != nil || !ok {
		return nil, err
	}
	if call.fn.name == "matchesFull" {
		loc := re.FindStringIndex(s)
		return boolOut(loc != nil && loc[0] == 0 && loc[1] == len(s) || fullMatch(re, s)), nil
	}
	return boolOut(re.MatchString(s)), nil
}

// fullMatch reports whether re matches the whole of s.
func fullMatch(re *regexp.Regexp, s string) bool {
	full, err := regexp.Compile(`^(?:` + strings.TrimPrefix(re.String(), "(?s)") + `)$`)
	return err == nil && full.MatchString(s)
}

func fnReplaceMatches(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	s, ok, err := strInput(call, in)
	if err != nil || !ok {
		return nil, err
	}
	re, ok, err := c.regex(call)
	if err != nil || !ok {
		return nil, err
	}
	sub, ok, err := c.strArg(call, 1)
	if err != nil || !ok {
		return nil, err
	}
	if re.String() == "(?s)" {
		return []Node{strNode(s)}, nil
	}
	return []Node{strNode(re.ReplaceAllString(s, sub))}, nil
}

func fnSplit(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	s, ok, err := strInput(call, in)
	if err != nil || !ok {
		return nil, err
	}
	sep, ok, err := c.strArg(call, 0)
	if err != nil || !ok {
		return nil, err
	}
	var out []Node
	for _, part := range strings.Split(s, sep) {
		out = append(out, strNode(part))
	}
	return out, nil
}

func fnJoin(c *evalCtx, call *callExpr, in []Node) ([]Node, error) {
	sep, _, err := c.strArg(call, 0)
	if err != nil {
		return nil, err
	}
	parts := make([]string, 0, len(in))
	for _, n := range in {
		s, ok := n.Value.(string)
		if !ok {
			return nil, execErr(call.pos, "join() needs Strings")
		}
		parts = append(parts, s)
	}
	return []Node{strNode(strings.Join(parts, sep))}, nil
}

// fnCodec builds encode(format) and decode(format): hex, base64, urlbase64.
func fnCodec(encode bool) func(*evalCtx, *callExpr, []Node) ([]Node, error) {
	return strWithArg(func(call *callExpr, s, format string) ([]Node, error) {
		var enc interface {
			EncodeToString([]byte) string
			DecodeString(string) ([]byte, error)
		}
		switch format {
		case "hex":
			if encode {
				return []Node{strNode(hex.EncodeToString([]byte(s)))}, nil
			}
			b, err := hex.DecodeString(s)
			if err != nil {
				return nil, nil
			}
			return []Node{strNode(string(b))}, nil
		case "base64":
			enc = base64.StdEncoding
		case "urlbase64":
			enc = base64.URLEncoding
		default:
			return nil, execErr(call.pos, "unknown encoding %q", format)
		}
		if encode {
			return []Node{strNode(enc.EncodeToString([]byte(s)))}, nil
		}
		b, err := enc.DecodeString(s)
		if err != nil {
			return nil, nil
		}
		return []Node{strNode(string(b))}, nil
	})
}

// fnEscape builds escape(target) and unescape(target): html, json.
func fnEscape(escape bool) func(*evalCtx, *callExpr, []Node) ([]Node, error) {
	return strWithArg(func(call *callExpr, s, target string) ([]Node, error) {
		switch {
		case target == "html" && escape:
			return []Node{strNode(htmlEscaper.Replace(s))}, nil
		case target == "html":
			return []Node{strNode(html.UnescapeString(s))}, nil
		case target == "json" && escape:
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s)
			out := strings.TrimSuffix(b.String(), "\n")
			return []Node{strNode(out[1 : len(out)-1])}, nil
		case target == "json":
			var out string
			if json.Unmarshal([]byte(`"`+jsonQuotes.Replace(s)+`"`), &out) != nil {
				return nil, nil
			}
			return []Node{strNode(out)}, nil
		case target == "url" && escape:
			return []Node{strNode(url.QueryEscape(s))}, nil
		case target == "url":
			out, err := url.QueryUnescape(s)
			if err != nil {
				return nil, nil
			}
			return []Node{strNode(out)}, nil
		}
		return nil, execErr(call.pos, "unknown escape target %q", target)
	})
}

// htmlEscaper escapes the characters HTML gives meaning to.
var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// jsonQuotes escapes the bare quotes of a string to unescape as JSON.
var jsonQuotes = strings.NewReplacer(`\\`, `\\`, `\"`, `\"`, `"`, `\"`)
