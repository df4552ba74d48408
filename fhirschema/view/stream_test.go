package view_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"fhirstore/fhirschema/view"
)

func idView(t *testing.T) *view.View {
	t.Helper()
	v, err := view.Compile([]byte(`{"resource":"Patient","select":[{"column":[{"name":"id","path":"id"},{"name":"g","path":"name.given"}]}]}`), view.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func patientJSON(i int, given string) []byte {
	return fmt.Appendf(nil, `{"resourceType":"Patient","id":"p%05d","name":[{"given":[%s]}]}`, i, given)
}

// TestStreamKeepsTheOrderOfTheResources: rows come out in the order the
// resources went in, whatever the workers.
func TestStreamKeepsTheOrderOfTheResources(t *testing.T) {
	var got []string
	s := idView(t).NewStream(context.Background(), 4, func(row []any) error {
		got = append(got, row[0].(string))
		return nil
	})
	for i := range 1000 {
		if err := s.Add(patientJSON(i, `"A"`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1000 {
		t.Fatalf("%d rows", len(got))
	}
	for i, id := range got {
		if id != fmt.Sprintf("p%05d", i) {
			t.Fatalf("row %d is %s", i, id)
		}
	}
}

// TestStreamStopsAtTheFirstError: an evaluation error or an error of emit
// stops the stream; Add then says so and Close returns the error.
func TestStreamStopsAtTheFirstError(t *testing.T) {
	s := idView(t).NewStream(context.Background(), 2, func([]any) error { return nil })
	var addErr error
	for i := 0; i < 5000 && addErr == nil; i++ {
		given := `"A"`
		if i == 100 {
			given = `"A","B"`
		}
		addErr = s.Add(patientJSON(i, given))
	}
	var ee *view.EvalError
	if err := s.Close(); !errors.As(err, &ee) || ee.Resource != "Patient/p00100" {
		t.Errorf("Close: %v", err)
	}
	if !errors.Is(addErr, view.ErrStopped) {
		t.Errorf("Add kept accepting after the error: %v", addErr)
	}
	stop := errors.New("enough")
	n := 0
	s = idView(t).NewStream(context.Background(), 2, func([]any) error {
		if n++; n == 10 {
			return stop
		}
		return nil
	})
	for i := 0; i < 5000 && s.Add(patientJSON(i, `"A"`)) == nil; i++ {
	}
	if err := s.Close(); !errors.Is(err, stop) || n != 10 {
		t.Errorf("Close: %v after %d rows", err, n)
	}
}
