package search_test

import (
	"testing"
	"time"

	"fhirstore/search"
)

func TestDateRangeCoversTheValuesPrecision(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	tests := []struct {
		name, in, lo, hi string
	}{
		{"a year covers the year", "2024", "2024-01-01T00:00:00Z", "2024-12-31T23:59:59.999999999Z"},
		{"a month covers the month (leap February)", "2024-02", "2024-02-01T00:00:00Z", "2024-02-29T23:59:59.999999999Z"},
		{"a date covers the day", "2024-03-01", "2024-03-01T00:00:00Z", "2024-03-01T23:59:59.999999999Z"},
		{"minutes cover the minute", "2024-03-01T10:05Z", "2024-03-01T10:05:00Z", "2024-03-01T10:05:59.999999999Z"},
		{"seconds cover the second", "2024-03-01T10:05:07Z", "2024-03-01T10:05:07Z", "2024-03-01T10:05:07.999999999Z"},
		{"milliseconds cover the millisecond", "2024-03-01T10:05:07.123Z", "2024-03-01T10:05:07.123Z", "2024-03-01T10:05:07.123999999Z"},
		{"a zone offset is honoured", "2024-03-01T10:05:07+02:00", "2024-03-01T08:05:07Z", "2024-03-01T08:05:07.999999999Z"},
		{"a time without zone is UTC", "2024-03-01T10:05:07", "2024-03-01T10:05:07Z", "2024-03-01T10:05:07.999999999Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := search.ParseDateRange(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Lo.Equal(utc(tt.lo)) || !r.Hi.Equal(utc(tt.hi)) {
				t.Fatalf("got [%s, %s], want [%s, %s]", r.Lo.Format(time.RFC3339Nano), r.Hi.Format(time.RFC3339Nano), tt.lo, tt.hi)
			}
		})
	}
}

func TestMalformedDatesAreRejected(t *testing.T) {
	for _, in := range []string{"", "24", "2024-13", "2024-02-30", "2024-1-01", "2024-03-01T25:00Z", "2024-03-01 10:00", "yesterday", "2024-03-01T10:05:07.123+2"} {
		if _, err := search.ParseDateRange(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
