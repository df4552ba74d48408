package fhirschema

import (
	"strings"
	"time"
)

// periodInOrder is the native test of per-1 (a Period does not end before
// it starts), as R5 corrects it: the earliest instant the start may name
// is not after the latest instant the end may name, each value standing
// for the whole of its precision (1990 is all of 1990). A date without a
// time of day has no time zone: two such values are compared as written;
// beside a value with a time zone, one without may be in any zone (+14:00
// at the earliest, -12:00 at the latest), as FHIRPath's lowBoundary() and
// highBoundary() have it. known is false when a value does not parse.
func periodInOrder(v any) (holds, known bool) {
	p, _ := v.(map[string]any)
	start, _ := p["start"].(string)
	end, _ := p["end"].(string)
	if start == "" || end == "" {
		return true, true
	}
	lo, loZoned, ok1 := instantRange(start, false)
	hi, hiZoned, ok2 := instantRange(end, true)
	if !ok1 || !ok2 {
		return false, false
	}
	if loZoned != hiZoned {
		if !loZoned {
			lo = lo.Add(-14 * time.Hour)
		} else {
			hi = hi.Add(12 * time.Hour)
		}
	}
	return !lo.After(hi), true
}

// dateLayouts are the forms of a FHIR date or dateTime, most precise first,
// with the unit each form's value spans.
var dateLayouts = []struct {
	layout string
	zoned  bool
	span   func(time.Time) time.Time
}{
	{time.RFC3339Nano, true, func(t time.Time) time.Time { return t }},
	{"2006-01-02", false, func(t time.Time) time.Time { return t.AddDate(0, 0, 1).Add(-time.Nanosecond) }},
	{"2006-01", false, func(t time.Time) time.Time { return t.AddDate(0, 1, 0).Add(-time.Nanosecond) }},
	{"2006", false, func(t time.Time) time.Time { return t.AddDate(1, 0, 0).Add(-time.Nanosecond) }},
}

// instantRange returns the first (or, with last, the final) instant a FHIR
// date or dateTime names, and whether it carries a time zone. A dateTime
// with seconds names the instants of that second.
func instantRange(s string, last bool) (t time.Time, zoned, ok bool) {
	for _, l := range dateLayouts {
		parsed, err := time.Parse(l.layout, s)
		if err != nil {
			continue
		}
		if !last {
			return parsed, l.zoned, true
		}
		if l.zoned && !strings.Contains(s, ".") {
			return parsed.Add(time.Second - time.Nanosecond), true, true
		}
		return l.span(parsed), l.zoned, true
	}
	return time.Time{}, false, false
}
