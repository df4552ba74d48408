package fhirschema

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxString is the largest string or markdown FHIR allows: 1 MB of characters.
const maxString = 1024 * 1024

// maxFraction is the most digits of a second's fraction a time may carry
// (nanoseconds).
const maxFraction = 9

// primitiveCheck tells what is wrong with a primitive value of one type, ""
// when nothing is, and the issue code: structure for a value of the wrong
// JSON type, value for one outside the type's domain.
type primitiveCheck func(v any) (problem, code string)

// primitiveChecks holds the value domain of every FHIR primitive type, as
// the R4 datatypes page defines it.
var primitiveChecks = map[string]primitiveCheck{
	"boolean":      jsonBool,
	"integer":      jsonInt(math.MinInt32, "a signed 32-bit integer"),
	"unsignedInt":  jsonInt(0, "an integer from 0 to 2147483647"),
	"positiveInt":  jsonInt(1, "an integer from 1 to 2147483647"),
	"decimal":      jsonDecimal,
	"string":       jsonString(checkString),
	"markdown":     jsonString(checkString),
	"code":         jsonString(checkCode),
	"id":           jsonString(matches(idPattern, "1 to 64 letters, digits, '-' and '.'")),
	"oid":          jsonString(matches(oidPattern, "urn:oid: followed by an OID")),
	"uuid":         jsonString(matches(uuidPattern, "urn:uuid: followed by a lower-case UUID")),
	"uri":          jsonString(checkURI),
	"url":          jsonString(checkURI),
	"canonical":    jsonString(checkURI),
	"base64Binary": jsonString(checkBase64),
	"date":         jsonString(temporal(datePattern, "YYYY, YYYY-MM or YYYY-MM-DD")),
	"dateTime":     jsonString(temporal(dateTimePattern, "YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm:ss(.sss)+zz:zz")),
	"instant":      jsonString(temporal(instantPattern, "YYYY-MM-DDThh:mm:ss(.sss)+zz:zz, with a time zone")),
	"time":         jsonString(temporal(timePattern, "hh:mm:ss(.sss), without a time zone")),
	"xhtml":        xhtml,
}

var (
	idPattern   = regexp.MustCompile(`^[A-Za-z0-9\-.]{1,64}$`)
	oidPattern  = regexp.MustCompile(`^urn:oid:[0-2](\.(0|[1-9][0-9]*))+$`)
	uuidPattern = regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	intPattern  = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)
	// The groups of the temporal patterns: year, month, day, hour, minute,
	// second, fraction, zone; absent parts are empty.
	datePattern     = regexp.MustCompile(`^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?()()()()()$`)
	dateTimePattern = regexp.MustCompile(`^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2}))?)?)?$`)
	instantPattern  = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$`)
	timePattern     = regexp.MustCompile(`^()()()(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?()$`)
)

func jsonBool(v any) (string, string) {
	if _, ok := v.(bool); !ok {
		return "a boolean must be the JSON true or false", "structure"
	}
	return "", ""
}

// jsonInt accepts a JSON number without fraction or exponent from min to
// the largest signed 32-bit integer.
func jsonInt(min int64, what string) primitiveCheck {
	return func(v any) (string, string) {
		n, ok := v.(json.Number)
		if !ok {
			return "the value must be a JSON number: " + what, "structure"
		}
		s := string(n)
		if !intPattern.MatchString(s) {
			return "the value " + s + " is not " + what + " (no fraction, no exponent)", "value"
		}
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || i < min || i > math.MaxInt32 {
			return "the value " + s + " is not " + what, "value"
		}
		return "", ""
	}
}

// jsonDecimal accepts any JSON number: JSON's number grammar is the one FHIR
// gives decimal.
func jsonDecimal(v any) (string, string) {
	if _, ok := v.(json.Number); !ok {
		return "a decimal must be a JSON number", "structure"
	}
	return "", ""
}

// jsonString checks that a value is a non-empty JSON string and then its
// content.
func jsonString(check func(string) string) primitiveCheck {
	return func(v any) (string, string) {
		s, ok := v.(string)
		if !ok {
			return "the value must be a JSON string", "structure"
		}
		if s == "" {
			return "empty strings are not allowed in FHIR JSON; leave the element out", "value"
		}
		if problem := check(s); problem != "" {
			return problem, "value"
		}
		return "", ""
	}
}

func matches(re *regexp.Regexp, what string) func(string) string {
	return func(s string) string {
		if !re.MatchString(s) {
			return "the value " + strconv.Quote(clip(s)) + " is not " + what
		}
		return ""
	}
}

// checkString: at least one character that is not white space, at most
// 1 MB, and no control character but tab, carriage return and line feed
// (XML, the other format, cannot carry them).
func checkString(s string) string {
	if strings.TrimSpace(s) == "" {
		return "blank strings are not allowed in FHIR JSON"
	}
	if len(s) > maxString && utf8.RuneCountInString(s) > maxString {
		return "the string is longer than 1 MB"
	}
	for _, r := range s {
		if r < 0x20 && r != '\t' && r != '\r' && r != '\n' {
			return "the string contains the control character " + strconv.QuoteRune(r)
		}
	}
	return ""
}

// checkCode: no leading or trailing white space and no white space other
// than single spaces inside.
func checkCode(s string) string {
	prevSpace := true
	for _, r := range s {
		switch {
		case r == ' ' && !prevSpace:
			prevSpace = true
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return "the code " + strconv.Quote(clip(s)) + " has white space other than single spaces between words"
		default:
			prevSpace = false
		}
	}
	if prevSpace {
		return "the code " + strconv.Quote(clip(s)) + " ends with a space"
	}
	return ""
}

// checkURI: a URI (uri, url, canonical) has no white space or control
// character.
func checkURI(s string) string {
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return "the URI " + strconv.Quote(clip(s)) + " contains white space"
		}
	}
	return ""
}

// checkBase64: groups of four characters of the base64 alphabet, padding
// only at the end; white space between characters is allowed.
func checkBase64(s string) string {
	n, pad := 0, 0
	for _, r := range s {
		switch {
		case r == ' ' || r == '\t' || r == '\r' || r == '\n':
			continue
		case r == '=':
			pad++
		case pad > 0:
			return "base64 padding ('=') may only end the value"
		case r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+' || r == '/':
		default:
			return "the value contains " + strconv.QuoteRune(r) + ", which is not in the base64 alphabet"
		}
		n++
	}
	if n%4 != 0 || pad > 2 {
		return "base64 content is made of groups of four characters"
	}
	return ""
}

// xhtml checks a narrative; what is wrong with one is reported as invalid
// content rather than as a bad value.
func xhtml(v any) (string, string) {
	s, ok := v.(string)
	if !ok {
		return "the narrative must be a JSON string", "structure"
	}
	if _, err := CheckXHTML(s); err != nil {
		return "the narrative is not well-formed XHTML: " + err.Error(), "invalid"
	}
	return "", ""
}

// temporal checks the format of a date, dateTime, instant or time and that
// it names a real moment: a day the month has, an hour below 24, at most
// nine digits of fraction, a zone from -14:00 to +14:00.
func temporal(re *regexp.Regexp, format string) func(string) string {
	return func(s string) string {
		m := re.FindStringSubmatch(s)
		if m == nil {
			return "the value " + strconv.Quote(clip(s)) + " is not of the form " + format
		}
		if p := moment(m[1:]); p != "" {
			return "the value " + strconv.Quote(clip(s)) + " " + p
		}
		return ""
	}
}

// moment checks the parts a temporal pattern matched: year, month, day,
// hour, minute, second, fraction, zone.
func moment(p []string) string {
	year, month, day := atoi(p[0]), atoi(p[1]), atoi(p[2])
	switch {
	case p[0] != "" && year == 0:
		return "has year 0000, which does not exist"
	case p[1] != "" && (month < 1 || month > 12):
		return "has no month " + p[1]
	case p[2] != "" && (day < 1 || day > daysIn(year, month)):
		return "is not a day of the calendar"
	case p[3] != "" && (atoi(p[3]) > 23 || atoi(p[4]) > 59 || atoi(p[5]) > 60):
		return "is not a time of the day"
	case len(p[6]) > maxFraction:
		return "has more than nine digits of fractional seconds"
	case len(p[7]) == 6 && !validZone(p[7]):
		return "has a time zone outside -14:00 to +14:00"
	}
	return ""
}

func validZone(z string) bool {
	h, m := atoi(z[1:3]), atoi(z[4:6])
	return m < 60 && (h < 14 || h == 14 && m == 0)
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	if r := []rune(s); len(r) > 64 {
		return string(r[:61]) + "..."
	}
	return s
}
