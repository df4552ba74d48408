package server_test

// Terminology search benchmarks: a value-set or hierarchy search next to
// the plain token search that names the same codes, in the same loop, so
// the ratio is the cost of expanding the value set from stored resources.
// Figures and commands: docs/performance.md, section "Terminology searches".

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"fhirstore/store"
)

const benchCS = "http://bench.example.org/CodeSystem/groups"

// benchCodeSystem has 10 groups g0..g9 of 10 codes each (c00..c99).
func benchCodeSystem() string {
	var groups []string
	for g := 0; g < 10; g++ {
		var codes []string
		for c := 0; c < 10; c++ {
			codes = append(codes, fmt.Sprintf(`{"code":"c%d%d","display":"Code %d%d"}`, g, c, g, c))
		}
		groups = append(groups, fmt.Sprintf(`{"code":"g%d","display":"Group %d","concept":[%s]}`, g, g, strings.Join(codes, ",")))
	}
	return `{"resourceType":"CodeSystem","url":"` + benchCS + `","status":"active","content":"complete","concept":[` + strings.Join(groups, ",") + `]}`
}

// seedBenchConditions stores the code system, a value set of group g0 and
// n Conditions, the i-th coded c<i mod 100>.
func seedBenchConditions(b *testing.B, e *env, n int) {
	b.Helper()
	ctx := context.Background()
	for _, r := range []struct{ typ, body string }{
		{"CodeSystem", benchCodeSystem()},
		{"ValueSet", `{"resourceType":"ValueSet","url":"http://bench.example.org/ValueSet/g0","status":"active",
			"compose":{"include":[{"system":"` + benchCS + `","filter":[{"property":"concept","op":"is-a","value":"g0"}]}]}}`},
	} {
		if _, err := e.store.Create(ctx, e.tenant, r.typ, []byte(r.body), store.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	create := func(i int) error {
		body := fmt.Sprintf(`{"resourceType":"Condition","subject":{"reference":"Patient/p%d"},"code":{"coding":[{"system":%q,"code":"c%02d"}]}}`, i%500, benchCS, i%100)
		_, err := e.store.Create(ctx, e.tenant, "Condition", []byte(body), store.WriteOptions{})
		return err
	}
	if err := create(0); err != nil {
		b.Fatal(err)
	}
	seedParallel(b, 1, n, create)
}

// groupCodes is the token list naming group g0 and its ten codes.
func groupCodes() string {
	codes := []string{benchCS + "|g0"}
	for c := 0; c < 10; c++ {
		codes = append(codes, fmt.Sprintf("%s|c0%d", benchCS, c))
	}
	return strings.Join(codes, ",")
}

func BenchmarkTerminologySearch(b *testing.B) {
	e := newEnv(b)
	n := searchBenchSize()
	seedBenchConditions(b, e, n)
	q := url.QueryEscape
	cases := []struct{ name, plain, query string }{
		{"in", "code=" + q(groupCodes()), "code:in=" + q("http://bench.example.org/ValueSet/g0")},
		{"below", "code=" + q(groupCodes()), "code:below=" + q(benchCS+"|g0")},
		{"filter-eq", "code=" + q(benchCS+"|c07"), "_filter=" + q("code eq "+benchCS+"|c07")},
		{"filter-or", "code=" + q(benchCS+"|c07,"+benchCS+"|c08"), "_filter=" + q("code eq "+benchCS+"|c07 or code eq "+benchCS+"|c08")},
		{"filter-not", "code:not=" + q(benchCS+"|c07"), "_filter=" + q("not (code eq "+benchCS+"|c07)")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			plain, query := "/Condition?_count=10&"+c.plain, "/Condition?_count=10&"+c.query
			if a, z := e.get(plain).JSON(b)["total"], e.get(query).JSON(b)["total"]; fmt.Sprint(a) != fmt.Sprint(z) || a == nil {
				b.Fatalf("totals differ: %s %v, %s %v", c.plain, a, c.query, z)
			}
			var plainTime, queryTime time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				e.get(plain)
				mid := time.Now()
				e.get(query)
				plainTime, queryTime = plainTime+mid.Sub(start), queryTime+time.Since(mid)
			}
			b.ReportMetric(float64(plainTime.Microseconds())/1000/float64(b.N), "plain-ms/op")
			b.ReportMetric(float64(queryTime.Microseconds())/1000/float64(b.N), "query-ms/op")
			b.ReportMetric(float64(queryTime)/float64(plainTime), "ratio")
		})
	}
}
