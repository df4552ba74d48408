package subscription

import (
	"context"
	"encoding/json"

	"fhirstore/store"
)

// checkTopic checks a Basic resource that carries a SubscriptionTopic
// (422 with the issues at their elements); other Basic resources pass.
func (c *checker) checkTopic(ctx context.Context, in store.Validation) error {
	var b basicTopic
	if json.Unmarshal(in.Body, &b) != nil || !b.isTopic() {
		return nil
	}
	topic, issues := ParseTopic(c.reg, in.Body)
	coded := false
	for _, cd := range b.Code.Coding {
		coded = coded || (cd.System == fhirTypesCS && cd.Code == "SubscriptionTopic")
	}
	if !coded {
		issues = append(issues, topicIssue("code", "a topic's code is %s|SubscriptionTopic, which makes it searchable", fhirTypesCS))
	}
	if len(issues) == 0 && c.topics != nil {
		if c.topics.builtin[topic.URL] != nil {
			issues = append(issues, topicIssue("extension", "the topic url %s is a built-in topic's", topic.URL))
		} else if other, err := c.topics.Find(ctx, in.Tenant, topic.URL); err == nil && other != nil && other.ID != b.ID {
			issues = append(issues, topicIssue("extension", "Basic/%s is the topic %s already", other.ID, topic.URL))
		}
	}
	if len(issues) > 0 {
		return &store.InvalidError{Issues: issues}
	}
	if c.topics != nil && !in.Check {
		c.topics.forget(in.Tenant) // written now: read again from the next lookup on
	}
	return nil
}
