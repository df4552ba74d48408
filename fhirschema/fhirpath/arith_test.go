package fhirpath_test

import (
	"testing"

	"fhirstore/fhirschema/fhirpath"
)

// TestCalendarArithmeticAndBounds covers what the official suite leaves
// out: month ends, durations finer than a date's precision, overflow,
// leading zeros and calendar durations written as FHIR Quantities.
func TestCalendarArithmeticAndBounds(t *testing.T) {
	empty := map[string]any{"resourceType": "Basic"}
	for expr, want := range map[string]string{
		"@2024-01-31 + 1 month":                 `["2024-02-29"]`,
		"@2024-02-29 + 1 year":                  `["2025-02-28"]`,
		"@2024-03-31 - 1 month":                 `["2024-02-29"]`,
		"@2016 + 365 days":                      `["2017"]`,
		"@2016-01 + 45 days":                    `["2016-02"]`,
		"@2014-01-25T14:30 + 90 minutes":        `["2014-01-25T16:00"]`,
		"@2014-01-25 + 2 weeks":                 `["2014-02-08"]`,
		"(@2024-01-31 + 1 month) = @2024-02-29": `[true]`,
		"2147483647 + 1":                        `[]`,
		"00.50":                                 `[0.50]`,
		"7 days":                                `[{"code":"d","system":"http://unitsofmeasure.org","unit":"day","value":7}]`,
		"4.5 'mg'":                              `[{"code":"mg","system":"http://unitsofmeasure.org","unit":"mg","value":4.5}]`,
		"1 'g' = 1000 'mg'":                     `[true]`,
		"1 'kg/m2' = 1000 'g/m2'":               `[true]`,
		"1 year = 1 'a'":                        `[]`,
		"1 year ~ 1 'a'":                        `[true]`,
		"(1 | 2 | 2 | 1.0).count()":             `[2]`,
		"(1).repeat(iif($this < 100, $this + 1, {})).count()": `[99]`,
	} {
		if got := eval(t, fhirpath.Env{}, empty, expr); got != want {
			t.Errorf("%s = %s, want %s", expr, got, want)
		}
	}
}
