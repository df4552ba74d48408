package fhirpath

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Precisions of a date, date-time or time, coarsest first.
const (
	precYear = iota + 1
	precMonth
	precDay
	precHour
	precMinute
	precSecond // seconds, with any fraction
)

// moment is a parsed date, date-time or time with its precision.
type moment struct {
	year, month, day, hour, minute, second, nanos int
	frac                                          string // the fraction digits as written
	prec                                          int
	hasTZ                                         bool
	tzMin                                         int // zone offset in minutes
	isTime                                        bool
	isDateTime                                    bool
}

// parseMoment parses a FHIR date or date-time ("2014-01-25T14:30:00Z",
// "2014-01", "2015T") or, with isTime, a time ("14:30:00.5").
func parseMoment(s string, isTime bool) (moment, bool) {
	m := moment{isTime: isTime}
	if isTime {
		s = strings.TrimPrefix(s, "T")
		return m, m.parseClock(s, true)
	}
	date, clock, hasT := strings.Cut(s, "T")
	m.isDateTime = hasT
	parts := strings.Split(date, "-")
	if len(parts) > 3 || len(parts[0]) != 4 {
		return m, false
	}
	fields := []*int{&m.year, &m.month, &m.day}
	limits := []int{9999, 12, 31}
	for i, p := range parts {
		if (i > 0 && len(p) != 2) || !allDigits(p) {
			return m, false
		}
		*fields[i], _ = strconv.Atoi(p)
		if (i > 0 && *fields[i] < 1) || *fields[i] > limits[i] {
			return m, false
		}
		m.prec = i + 1
	}
	if m.prec == precDay && m.day > daysIn(m.year, m.month) {
		return m, false
	}
	if clock == "" {
		return m, !hasT || true
	}
	if m.prec != precDay {
		return m, false
	}
	return m, m.parseClock(clock, false)
}

// parseClock parses hh[:mm[:ss[.fff]]][zone] into m.
func (m *moment) parseClock(s string, isTime bool) bool {
	if !isTime {
		if i := strings.IndexAny(s, "Z+-"); i >= 0 {
			if !m.parseZone(s[i:]) {
				return false
			}
			s = s[:i]
		}
	}
	if frac, rest, ok := cutFraction(s); ok {
		m.frac, s = frac, rest
		if frac == "" {
			return false
		}
		n, _ := strconv.Atoi((frac + "000000000")[:9])
		m.nanos = n
	}
	parts := strings.Split(s, ":")
	if len(parts) > 3 || (isTime && false) {
		return false
	}
	fields := []*int{&m.hour, &m.minute, &m.second}
	limits := []int{23, 59, 59}
	base := precHour
	for i, p := range parts {
		if len(p) != 2 || !allDigits(p) {
			return false
		}
		*fields[i], _ = strconv.Atoi(p)
		if *fields[i] > limits[i] {
			return false
		}
		m.prec = base + i
	}
	return m.frac == "" || m.prec == precSecond
}

// cutFraction splits "14:30:00.123" into "123" and "14:30:00".
func cutFraction(s string) (frac, rest string, ok bool) {
	i := strings.IndexByte(s, '.')
	if i < 0 {
		return "", s, false
	}
	frac = s[i+1:]
	if !allDigits(frac) {
		return "", s, true
	}
	return frac, s[:i], true
}

// parseZone parses Z or ±hh:mm.
func (m *moment) parseZone(z string) bool {
	m.hasTZ = true
	if z == "Z" {
		return true
	}
	if len(z) != 6 || z[3] != ':' || !allDigits(z[1:3]) || !allDigits(z[4:]) {
		return false
	}
	h, _ := strconv.Atoi(z[1:3])
	mi, _ := strconv.Atoi(z[4:])
	m.tzMin = h*60 + mi
	if z[0] == '-' {
		m.tzMin = -m.tzMin
	}
	return true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// daysIn returns the number of days of a month.
func daysIn(year, month int) int {
	return time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// momentOf parses a date, date-time or time node.
func momentOf(n Node) (moment, bool) {
	s, ok := n.Value.(string)
	if !ok {
		return moment{}, false
	}
	k := kindOf(n)
	m, ok := parseMoment(s, k == kTime)
	if k == kDateTime {
		m.isDateTime = true
	}
	return m, ok
}

// utc returns the moment shifted to UTC when it has a zone and a time.
func (m moment) utc() moment {
	if !m.hasTZ || m.prec < precHour || m.isTime {
		return m
	}
	t := m.time().Add(-time.Duration(m.tzMin) * time.Minute)
	out := m
	out.year, out.month, out.day = t.Year(), int(t.Month()), t.Day()
	out.hour, out.minute = t.Hour(), t.Minute()
	out.tzMin = 0
	return out
}

// time returns the moment as a time.Time in a fixed zone (missing fields
// are their minimum).
func (m moment) time() time.Time {
	month, day := max(m.month, 1), max(m.day, 1)
	return time.Date(m.year, time.Month(month), day, m.hour, m.minute, m.second, m.nanos, time.FixedZone("", m.tzMin*60))
}

// compareMoments compares a and b field by field down to the coarser
// precision: ok is false when they are equal that far but differ in
// precision (the answer is unknown).
func compareMoments(a, b moment) (cmp int, ok bool) {
	if a.hasTZ && b.hasTZ {
		a, b = a.utc(), b.utc()
	} else if a.hasTZ != b.hasTZ && a.prec >= precHour && b.prec >= precHour && !a.isTime {
		return 0, false
	}
	af, bf := a.fields(), b.fields()
	lo, hi := 0, precSecond
	if a.isTime {
		lo = precHour - 1
	}
	for p := lo; p < hi; p++ {
		if p >= a.prec || p >= b.prec {
			if a.prec == b.prec {
				return 0, true
			}
			return 0, false
		}
		if af[p] != bf[p] {
			return sign(af[p] - bf[p]), true
		}
	}
	return sign(a.nanos - b.nanos), true
}

func (m moment) fields() [6]int {
	return [6]int{m.year, m.month, m.day, m.hour, m.minute, m.second}
}

func sign(i int) int {
	switch {
	case i < 0:
		return -1
	case i > 0:
		return 1
	}
	return 0
}

// format writes the moment at its precision.
func (m moment) format() string {
	var b strings.Builder
	if !m.isTime {
		fmt.Fprintf(&b, "%04d", m.year)
		if m.prec >= precMonth {
			fmt.Fprintf(&b, "-%02d", m.month)
		}
		if m.prec >= precDay {
			fmt.Fprintf(&b, "-%02d", m.day)
		}
		if m.prec < precHour {
			return b.String()
		}
		b.WriteByte('T')
	}
	fmt.Fprintf(&b, "%02d", m.hour)
	if m.prec >= precMinute {
		fmt.Fprintf(&b, ":%02d", m.minute)
	}
	if m.prec >= precSecond {
		fmt.Fprintf(&b, ":%02d", m.second)
		if m.frac != "" {
			b.WriteString("." + m.frac)
		}
	}
	if m.hasTZ && !m.isTime {
		if m.tzMin == 0 {
			b.WriteString("Z")
		} else {
			z := m.tzMin
			s := "+"
			if z < 0 {
				s, z = "-", -z
			}
			fmt.Fprintf(&b, "%s%02d:%02d", s, z/60, z%60)
		}
	}
	return b.String()
}

// dateLiteral parses @2014-01-25, @2014-01-25T14:30Z, @2015T or @T14:30.
func dateLiteral(t token) (Node, error) {
	text := t.text
	if strings.HasPrefix(text, "T") {
		if strings.ContainsAny(text, "Z+-") {
			return Node{}, &Error{Kind: "execution", Pos: t.pos, Msg: "a time has no time zone: @" + text}
		}
		m, ok := parseMoment(text[1:], true)
		if !ok {
			return Node{}, syntaxErr(t.pos, "bad time @%s", text)
		}
		return Node{Value: m.format(), Type: sysTime}, nil
	}
	m, ok := parseMoment(text, false)
	if !ok {
		return Node{}, syntaxErr(t.pos, "bad date or date-time @%s", text)
	}
	if m.isDateTime {
		return Node{Value: m.format(), Type: sysDateTime}, nil
	}
	return Node{Value: m.format(), Type: sysDate}, nil
}

// momentNode is a computed date, date-time or time like like.
func momentNode(m moment, like Node) Node {
	t := sysDate
	switch kindOf(like) {
	case kDateTime:
		t = sysDateTime
	case kTime:
		t = sysTime
	}
	return Node{Value: m.format(), Type: t}
}

// addDuration adds q (a calendar or UCUM time quantity, times sign) to m:
// years and months keep the day of the month, clamped to the month's last
// day; a duration finer than m's precision is converted to that precision
// and truncated (@2016 + 365 days is @2017).
func addDuration(m moment, q Quantity, sign int) (moment, bool) {
	unit := calendarOf(q.Unit)
	if unit == "" || q.Unit == "a" || q.Unit == "mo" {
		return m, false
	}
	v := q.Value * float64(sign)
	if unit != "millisecond" {
		v = float64(int64(v))
	}
	if !m.isTime {
		unit, v = coarsen(m.prec, unit, v)
	}
	switch unit {
	case "year":
		return addMonths(m, int(v)*12), true
	case "month":
		return addMonths(m, int(v)), true
	case "week":
		unit, v = "day", v*7
	}
	return addClock(m, unit, v), true
}

// coarsen expresses a duration in the unit of a date's precision when the
// duration is finer: days as months (30) or years (365), months as years.
func coarsen(prec int, unit string, v float64) (string, float64) {
	days := map[string]float64{"week": 7, "day": 1, "hour": 1.0 / 24, "minute": 1.0 / 1440,
		"second": 1.0 / 86400, "millisecond": 1.0 / 86400000}
	switch {
	case prec == precYear && unit == "month":
		return "year", float64(int64(v / 12))
	case prec == precYear && days[unit] > 0:
		return "year", float64(int64(v * days[unit] / 365))
	case prec == precMonth && days[unit] > 0:
		return "month", float64(int64(v * days[unit] / 30))
	case prec == precDay && days[unit] > 0 && days[unit] < 1:
		return "day", float64(int64(v * days[unit]))
	}
	return unit, v
}

// addMonths adds n months, keeping the day within the new month.
func addMonths(m moment, n int) moment {
	total := m.year*12 + (max(m.month, 1) - 1) + n
	m.year, m.month = total/12, total%12+1
	if m.prec < precMonth {
		m.month = 0
	}
	if m.day > 0 {
		m.day = min(m.day, daysIn(m.year, m.month))
	}
	return m
}

// addClock adds a duration of days or finer.
func addClock(m moment, unit string, v float64) moment {
	d := map[string]time.Duration{"day": 24 * time.Hour, "hour": time.Hour, "minute": time.Minute,
		"second": time.Second, "millisecond": time.Millisecond}[unit]
	t := m.time().Add(time.Duration(v * float64(d)))
	out := m
	if !m.isTime {
		out.year, out.month, out.day = t.Year(), int(t.Month()), t.Day()
	}
	out.hour, out.minute, out.second, out.nanos = t.Hour(), t.Minute(), t.Second(), t.Nanosecond()
	if out.frac != "" || out.nanos != 0 {
		out.frac = fmt.Sprintf("%03d", out.nanos/1e6)
		if out.prec < precSecond {
			out.frac = ""
		}
	}
	return out
}

// calendarOf maps a calendar keyword or UCUM time unit to a calendar unit.
func calendarOf(unit string) string {
	switch unit {
	case "year", "a":
		return "year"
	case "month", "mo":
		return "month"
	case "week", "wk":
		return "week"
	case "day", "d":
		return "day"
	case "hour", "h":
		return "hour"
	case "minute", "min":
		return "minute"
	case "second", "s":
		return "second"
	case "millisecond", "ms":
		return "millisecond"
	}
	return ""
}

// calendarUnits maps the calendar duration keywords of quantity literals
// to their singular form.
var calendarUnits = map[string]string{
	"year": "year", "years": "year", "month": "month", "months": "month", "week": "week",
	"weeks": "week", "day": "day", "days": "day", "hour": "hour", "hours": "hour",
	"minute": "minute", "minutes": "minute", "second": "second", "seconds": "second",
	"millisecond": "millisecond", "milliseconds": "millisecond",
}
