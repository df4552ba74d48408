package store

import (
	"bytes"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/document"
)

// TestRowsMarshalAsTheirFields: the rows' own MarshalBSON encodes what
// bson.Marshal encodes of their fields by reflection, with every
// omitempty field empty and set.
func TestRowsMarshalAsTheirFields(t *testing.T) {
	type plainStored storedDoc // the same fields and tags, without the method
	type plainHistory historyDoc
	res, _ := bson.Marshal(bson.D{{Key: "resourceType", Value: "Patient"}})
	at := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	texts := []document.NumText{{Path: "a", Text: "1.50"}}
	stored := []storedDoc{
		{ID: "p1", VID: 1, LastUpdated: at},
		{ID: "p1", VID: 1 << 40, LastUpdated: at, Deleted: true, Method: "PUT", Resource: res, NumText: texts, Idx: res, Sort: res},
		{NumText: []document.NumText{}},
	}
	for _, d := range stored {
		compareRow(t, d, plainStored(d))
	}
	history := []historyDoc{
		{Key: "Patient/p1/1", Type: "Patient", ID: "p1", VID: 1, LastUpdated: at, Method: "POST"},
		{Key: "k", Type: "Patient", ID: "p1", VID: 2, LastUpdated: at, Method: "DELETE", Resource: res, NumText: texts, Txn: "t1"},
		{},
	}
	for _, d := range history {
		compareRow(t, d, plainHistory(d))
	}
}

func compareRow(t *testing.T, row bson.Marshaler, plain any) {
	t.Helper()
	got, err := row.MarshalBSON()
	want, werr := bson.Marshal(plain)
	if err != nil || werr != nil || !bytes.Equal(got, want) {
		t.Errorf("%+v: MarshalBSON %x (%v), by reflection %x (%v)", row, got, err, want, werr)
	}
	viaMarshal, err := bson.Marshal(row)
	if err != nil || !bytes.Equal(viaMarshal, want) {
		t.Errorf("%+v: bson.Marshal of the row %x (%v), want %x", row, viaMarshal, err, want)
	}
}
