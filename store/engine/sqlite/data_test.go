package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The synthetic data of the plan tests and benchmarks: current rows of an
// Observation collection and history rows, shaped like the store's
// (about 40 index entries per current row).

const (
	patients  = 1000
	codeCount = 200
	loinc     = "http://loinc.org"
	ucum      = "http://unitsofmeasure.org"
)

var (
	dataEpoch = time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)
	families  = []string{"smith", "smithers", "jones", "johnson", "brown", "baker", "miller", "moore", "garcia", "martin", "lee", "walker", "white", "harris", "clark", "lewis", "young", "king", "scott", "green"}
)

// obsCode is the code of observation i: code 0 for one in ten, the others
// skewed towards the first codes.
func obsCode(r *rand.Rand) int {
	if r.IntN(10) == 0 {
		return 0
	}
	u := r.Float64()
	return 1 + int(float64(codeCount-1)*u*u)
}

// observation is the current row of Observation i.
func observation(i int, r *rand.Rand) bson.D {
	id := fmt.Sprintf("obs%07d", i)
	code := obsCode(r)
	c := fmt.Sprintf("%d-%d", 1000+code, code%10)
	patient := fmt.Sprintf("Patient/p%d", r.IntN(patients))
	at := dataEpoch.Add(time.Duration(r.Int64N(int64(10 * 365 * 24 * time.Hour)))).Truncate(time.Second)
	updated := dataEpoch.Add(10*365*24*time.Hour + time.Duration(i)*time.Second + time.Duration(r.IntN(1000))*time.Millisecond)
	value := float64(r.IntN(2000)) / 10
	family := families[r.IntN(len(families))] + fmt.Sprintf("%03d", r.IntN(50))
	status := []string{"final", "amended", "preliminary"}[r.IntN(3)]
	category := []string{"vital-signs", "laboratory", "survey"}[r.IntN(3)]
	display := fmt.Sprintf("observation code %d display", code)
	idx := bson.D{
		{Key: "code", Value: bson.A{loinc + "|" + c, c, loinc + "|"}},
		{Key: "code:text", Value: bson.A{display}},
		{Key: "patient", Value: bson.A{patient}},
		{Key: "subject", Value: bson.A{patient}},
		{Key: "subject:identifier", Value: bson.A{"urn:mrn|" + patient[8:]}},
		{Key: "date", Value: bson.A{bson.D{{Key: "lo", Value: at}, {Key: "hi", Value: at.Add(time.Second - time.Millisecond)}}}},
		{Key: "status", Value: bson.A{status, "http://hl7.org/fhir/observation-status|" + status}},
		{Key: "category", Value: bson.A{category, "http://terminology.hl7.org/CodeSystem/observation-category|" + category, "http://terminology.hl7.org/CodeSystem/observation-category|"}},
		{Key: "value-quantity", Value: bson.A{bson.D{{Key: "lo", Value: value - 0.05}, {Key: "hi", Value: value + 0.05}, {Key: "s", Value: ucum + "|mg"}, {Key: "u", Value: "mg"}}}},
		{Key: "identifier", Value: bson.A{"urn:obs|" + id, id}},
		{Key: "encounter", Value: bson.A{fmt.Sprintf("Encounter/e%d", r.IntN(20000))}},
		{Key: "performer", Value: bson.A{fmt.Sprintf("Practitioner/pr%d", r.IntN(300)), "Organization/o1"}},
		{Key: "family", Value: bson.A{family}},
	}
	sortDoc := bson.D{
		{Key: "code", Value: bson.D{{Key: "a", Value: c}, {Key: "d", Value: c}}},
		{Key: "status", Value: bson.D{{Key: "a", Value: status}, {Key: "d", Value: status}}},
		{Key: "patient", Value: bson.D{{Key: "a", Value: patient}, {Key: "d", Value: patient}}},
		{Key: "value-quantity", Value: bson.D{{Key: "a", Value: value}, {Key: "d", Value: value}}},
	}
	resource := bson.D{
		{Key: "resourceType", Value: "Observation"}, {Key: "id", Value: id},
		{Key: "status", Value: status},
		{Key: "code", Value: bson.D{{Key: "coding", Value: bson.A{bson.D{{Key: "system", Value: loinc}, {Key: "code", Value: c}, {Key: "display", Value: display}}}}}},
		{Key: "subject", Value: bson.D{{Key: "reference", Value: patient}}},
		{Key: "effectiveDateTime", Value: at.Format(time.RFC3339)},
		{Key: "valueQuantity", Value: bson.D{{Key: "value", Value: value}, {Key: "unit", Value: "mg"}, {Key: "system", Value: ucum}, {Key: "code", Value: "mg"}}},
		{Key: "text", Value: bson.D{{Key: "status", Value: "generated"}, {Key: "div", Value: "<div xmlns=\"http://www.w3.org/1999/xhtml\">" + strings.Repeat(display+" ", 12) + "</div>"}}},
	}
	return bson.D{
		{Key: "_id", Value: id}, {Key: "vid", Value: int32(1)}, {Key: "lastUpdated", Value: updated},
		{Key: "deleted", Value: false}, {Key: "method", Value: "POST"},
		{Key: "resource", Value: resource},
		{Key: "numText", Value: bson.A{bson.D{{Key: "p", Value: "valueQuantity.value"}, {Key: "t", Value: fmt.Sprint(value)}}}},
		{Key: "idx", Value: idx}, {Key: "sort", Value: sortDoc},
	}
}

// historyRow is version v of Observation i in the history collection.
func historyRow(i, v int, r *rand.Rand) bson.D {
	id := fmt.Sprintf("obs%07d", i)
	return bson.D{
		{Key: "_id", Value: fmt.Sprintf("Observation/%s/%d", id, v)},
		{Key: "type", Value: "Observation"}, {Key: "id", Value: id}, {Key: "vid", Value: int32(v)},
		{Key: "lastUpdated", Value: dataEpoch.Add(time.Duration(i*3+v) * time.Second)},
		{Key: "method", Value: "PUT"},
		{Key: "resource", Value: bson.D{{Key: "resourceType", Value: "Observation"}, {Key: "id", Value: id}, {Key: "note", Value: strings.Repeat("x", 200+r.IntN(200))}}},
	}
}

// fill inserts n observations and about n history rows, in batches of 500.
func fill(tb testing.TB, e *Engine, n int) {
	tb.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, uint64(n)))
	obs := e.Database("bench").Collection("Observation")
	hist := e.Database("bench").Collection("history")
	batch := make([]any, 0, 500)
	flush := func(c interface {
		InsertMany(context.Context, []any) error
	}) {
		if len(batch) == 0 {
			return
		}
		if err := c.InsertMany(ctx, batch); err != nil {
			tb.Fatalf("fill: %v", err)
		}
		batch = batch[:0]
	}
	for i := range n {
		batch = append(batch, observation(i, r))
		if len(batch) == cap(batch) {
			flush(obs)
		}
	}
	flush(obs)
	for i := 0; i < n/2; i++ {
		for v := 1; v <= 1+i%3; v++ {
			batch = append(batch, historyRow(i, v, r))
			if len(batch) == cap(batch) {
				flush(hist)
			}
		}
	}
	flush(hist)
}
