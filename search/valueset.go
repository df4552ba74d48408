package search

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// terminologyModifiers are the token modifiers answered from stored
// terminology resources: the relation their code set stands for.
var terminologyModifiers = map[string]string{"in": "in", "not-in": "in", "below": "below", "above": "above"}

// codeSetCondition reads :in and :not-in (a ValueSet by canonical URL or
// ValueSet/id) and :below and :above (system|code in a stored CodeSystem's
// hierarchy) into a deferred $in (or $nin) of the codes they stand for.
// Several values are a union; :not-in excludes every code of the union.
func codeSetCondition(field, name, modifier string, values []string) (bson.D, func(bson.Raw) bool, error) {
	d := &Deferred{Field: field, Not: modifier == "not-in"}
	for _, v := range values {
		set, err := codeSet(name, terminologyModifiers[modifier], v)
		if err != nil {
			return nil, nil, err
		}
		d.Codes = append(d.Codes, set)
	}
	return bson.D{{Key: field, Value: d}}, nil, nil
}

// codeSet is the code set of one value of a terminology modifier.
func codeSet(name, relation, v string) (*CodeSet, error) {
	if relation == "in" {
		if strings.TrimSpace(v) == "" {
			return nil, errorf(name, "a value set URL or ValueSet/id is needed")
		}
		return &CodeSet{Param: name, Relation: relation, ValueSet: v}, nil
	}
	system, code, ok := strings.Cut(v, "|")
	if !ok || system == "" || code == "" {
		return nil, errorf(name, "the :%s modifier takes system|code (the code system must be stored as a CodeSystem), not %q", relation, v)
	}
	return &CodeSet{Param: name, Relation: relation, System: system, Code: code}, nil
}
