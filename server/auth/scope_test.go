package auth_test

import (
	"testing"

	"fhirstore/server/auth"
)

func TestParseScope(t *testing.T) {
	cases := []struct {
		in    string
		ok    bool
		ctx   auth.Context
		typ   string
		perms string
	}{
		{"patient/Observation.read", true, auth.PatientContext, "Observation", "rs"},
		{"user/*.write", true, auth.UserContext, "*", "cud"},
		{"system/*.*", true, auth.SystemContext, "*", "cruds"},
		{"user/Patient.rs", true, auth.UserContext, "Patient", "rs"},
		{"system/Encounter.cruds", true, auth.SystemContext, "Encounter", "cruds"},
		{"patient/*.d", true, auth.PatientContext, "*", "d"},
		{"user/Patient.sr", false, "", "", ""},                      // out of order
		{"user/Patient.rrs", false, "", "", ""},                     // repeated
		{"user/Patient.x", false, "", "", ""},                       // unknown letter
		{"user/Patient.", false, "", "", ""},                        // no permission
		{"user/Patient.rs?category=vital-signs", false, "", "", ""}, // query restriction
		{"group/Patient.rs", false, "", "", ""},                     // unknown context
		{"user/patient.rs", false, "", "", ""},                      // not a type name
		{"openid", false, "", "", ""},
		{"launch/patient", false, "", "", ""},
		{"", false, "", "", ""},
	}
	for _, c := range cases {
		s, ok := auth.ParseScope(c.in)
		if ok != c.ok || ok && (s.Context != c.ctx || s.Type != c.typ || s.Perms != c.perms) {
			t.Errorf("ParseScope(%q) = %+v, %v; want %v %s/%s.%s", c.in, s, ok, c.ok, c.ctx, c.typ, c.perms)
		}
	}
}

func TestDecide(t *testing.T) {
	scopes := auth.ParseScopes([]string{"patient/*.rs", "user/Practitioner.r", "openid"})
	cases := []struct {
		patient, typ string
		i            auth.Interaction
		want         auth.Reach
	}{
		{"p1", "Observation", auth.Search, auth.PatientOnly},
		{"p1", "Practitioner", auth.Read, auth.Full}, // a user scope reaches further
		{"p1", "Practitioner", auth.Search, auth.PatientOnly},
		{"p1", "Observation", auth.Create, auth.Denied},
		{"", "Observation", auth.Read, auth.Denied}, // a patient scope without a patient claim
	}
	for _, c := range cases {
		if got := auth.Decide(scopes, c.patient, c.typ, c.i); got != c.want {
			t.Errorf("Decide(%s, %s, patient %q) = %v, want %v", c.typ, c.i, c.patient, got, c.want)
		}
	}
}
