package search

import (
	"fmt"
	"regexp"
	"time"
)

// fhirDate matches the FHIR date, dateTime and instant forms: a year, year-month,
// date, or date-time with optional fractional seconds and zone.
var fhirDate = regexp.MustCompile(`^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$`)

// DateRange is the closed range of instants a FHIR date value stands for at
// its precision: "2024" covers the whole year, "2024-03-01T10:00Z" one minute.
type DateRange struct {
	Lo, Hi time.Time
}

// ParseDateRange parses a FHIR date, dateTime or instant. A time without a
// zone is taken as UTC.
func ParseDateRange(s string) (DateRange, error) {
	m := fhirDate.FindStringSubmatch(s)
	if m == nil {
		return DateRange{}, fmt.Errorf("%q is not a FHIR date or dateTime", s)
	}
	layout, value := "2006", m[1]
	step := func(t time.Time) time.Time { return t.AddDate(1, 0, 0) }
	switch {
	case m[4] != "":
		layout, value = "2006-01-02T15:04", s[:16]
		step = func(t time.Time) time.Time { return t.Add(time.Minute) }
		if m[6] != "" {
			layout, value = "2006-01-02T15:04:05", s[:19]
			step = func(t time.Time) time.Time { return t.Add(time.Second) }
		}
		if m[7] != "" {
			layout, value = layout+".999999999", value+m[7]
			step = fractionStep(len(m[7]) - 1)
		}
		if m[8] != "" {
			layout, value = layout+"Z07:00", value+m[8]
		}
	case m[3] != "":
		layout, value = "2006-01-02", s
		step = func(t time.Time) time.Time { return t.AddDate(0, 0, 1) }
	case m[2] != "":
		layout, value = "2006-01", s
		step = func(t time.Time) time.Time { return t.AddDate(0, 1, 0) }
	}
	lo, err := time.Parse(layout, value)
	if err != nil {
		return DateRange{}, fmt.Errorf("%q is not a valid date: %w", s, err)
	}
	lo = lo.UTC()
	return DateRange{Lo: lo, Hi: step(lo).Add(-time.Nanosecond)}, nil
}

func fractionStep(digits int) func(time.Time) time.Time {
	d := time.Second
	for i := 0; i < digits; i++ {
		d /= 10
	}
	return func(t time.Time) time.Time { return t.Add(d) }
}
