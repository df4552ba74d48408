package store

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// Notification is one change queued for one subscription until its
// endpoint has acknowledged it.
type Notification struct {
	// Key is unique per subscription and version: "<subscription id>|Type/id/vid".
	Key          string `bson:"_id"`
	Subscription string `bson:"sub"`
	Type         string `bson:"type"`
	ID           string `bson:"id"`
	VID          int    `bson:"vid"`
	// Method is the interaction of the change: POST, PUT or DELETE.
	Method string `bson:"method"`
	// At is when the version was written; a subscription's notifications
	// go out in this order, which is version order for each resource.
	At time.Time `bson:"at"`
	// Attempts counts failed deliveries; Next is when to try again.
	Attempts int       `bson:"attempts"`
	Next     time.Time `bson:"next"`
	// Error is the last failure.
	Error string `bson:"error,omitempty"`
}

// NotificationKey is the key of the notification of change to subscription sub.
func NotificationKey(sub, change string) string { return sub + "|" + change }

// notificationOrder is the order a subscription's queue is sent in.
var notificationOrder = bson.D{{Key: "at", Value: 1}, {Key: "type", Value: 1}, {Key: "id", Value: 1}, {Key: "vid", Value: 1}}

// QueueNotifications stores notifications (those already queued are kept
// as they are) and then removes the outbox rows of the changes handled.
func (s *Store) QueueNotifications(ctx context.Context, tenant string, notes []*Notification, handled []string) error {
	if len(notes) > 0 {
		if err := s.ensureNotificationIndexes(ctx, tenant); err != nil {
			return err
		}
		docs := make([]any, len(notes))
		for i, n := range notes {
			docs[i] = n
		}
		err := s.tenantDB(tenant).Collection(notificationsCollection).InsertMany(ctx, docs)
		if err != nil && !onlyDuplicates(err) {
			return dbError("queue notifications", err)
		}
	}
	return s.DoneChanges(ctx, tenant, handled)
}

func (s *Store) ensureNotificationIndexes(ctx context.Context, tenant string) error {
	key := tenant + "/" + notificationsCollection
	if _, done := s.indexed.Load(key); done {
		return nil
	}
	keys := append(bson.D{{Key: "sub", Value: 1}}, notificationOrder...)
	err := s.tenantDB(tenant).Collection(notificationsCollection).CreateIndexes(ctx, []engine.Index{{Name: "sub_at", Keys: keys}})
	if err != nil {
		return dbError("create notification indexes of "+tenant, err)
	}
	s.indexed.Store(key, true)
	return nil
}

// Notifications returns up to limit of a subscription's queued
// notifications, oldest first.
func (s *Store) Notifications(ctx context.Context, tenant, sub string, limit int) ([]*Notification, error) {
	cur, err := s.tenantDB(tenant).Collection(notificationsCollection).Find(ctx, bson.D{{Key: "sub", Value: sub}},
		&engine.FindOptions{Sort: notificationOrder, Limit: int64(limit)})
	if err != nil {
		return nil, dbError("read notifications", err)
	}
	var out []*Notification
	if err := engine.All(ctx, cur, &out); err != nil {
		return nil, dbError("read notifications", err)
	}
	return out, nil
}

// NotificationsSent removes delivered notifications from their queues.
func (s *Store) NotificationsSent(ctx context.Context, tenant string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := s.tenantDB(tenant).Collection(notificationsCollection).DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}})
	return dbError("clear notifications", err)
}

// NotificationFailed records a failed attempt (n's Attempts, Next and Error).
func (s *Store) NotificationFailed(ctx context.Context, tenant string, n *Notification) error {
	_, err := s.tenantDB(tenant).Collection(notificationsCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: n.Key}}, n, false)
	return dbError("record failed notification", err)
}

// DropNotifications removes every queued notification of a subscription.
func (s *Store) DropNotifications(ctx context.Context, tenant, sub string) error {
	_, err := s.tenantDB(tenant).Collection(notificationsCollection).DeleteMany(ctx, bson.D{{Key: "sub", Value: sub}})
	return dbError("drop notifications", err)
}

// PendingNotifications counts the notifications queued in a tenant and
// the changes in its outbox not yet matched.
func (s *Store) PendingNotifications(ctx context.Context, tenant string) (queued, unmatched int64, err error) {
	db := s.tenantDB(tenant)
	if queued, err = db.Collection(notificationsCollection).Count(ctx, bson.D{}); err != nil {
		return 0, 0, dbError("count notifications", err)
	}
	unmatched, err = db.Collection(outboxCollection).Count(ctx, bson.D{})
	return queued, unmatched, dbError("count outbox rows", err)
}

// TopicEvent is one event of a topic-based subscription: the change that
// triggered it, numbered from 1 per subscription without gaps. The events
// stay after delivery, for the $events operation.
type TopicEvent struct {
	// Key is unique per subscription and version: "<subscription id>|Type/id/vid".
	Key          string `bson:"_id"`
	Subscription string `bson:"sub"`
	Number       int64  `bson:"n"`
	Type         string `bson:"type"`
	ID           string `bson:"id"`
	VID          int    `bson:"vid"`
	// Method is the interaction of the change: POST, PUT or DELETE.
	Method string    `bson:"method"`
	At     time.Time `bson:"at"`
}

const (
	topicEventsCollection  = "topicEvents"
	topicCursorsCollection = "topicCursors"
)

// RecordTopicEvents stores events (an event whose key is stored already
// keeps its stored number).
func (s *Store) RecordTopicEvents(ctx context.Context, tenant string, events []*TopicEvent) error {
	if len(events) == 0 {
		return nil
	}
	coll := s.tenantDB(tenant).Collection(topicEventsCollection)
	key := tenant + "/" + topicEventsCollection
	if _, done := s.indexed.Load(key); !done {
		if err := coll.CreateIndexes(ctx, []engine.Index{{Name: "sub_n", Keys: bson.D{{Key: "sub", Value: 1}, {Key: "n", Value: 1}}}}); err != nil {
			return dbError("create topic event indexes of "+tenant, err)
		}
		s.indexed.Store(key, true)
	}
	docs := make([]any, len(events))
	for i, ev := range events {
		docs[i] = ev
	}
	if err := coll.InsertMany(ctx, docs); err != nil && !onlyDuplicates(err) {
		return dbError("record topic events", err)
	}
	return nil
}

// TopicEventsByKey returns the stored events among keys, by key.
func (s *Store) TopicEventsByKey(ctx context.Context, tenant string, keys []string) (map[string]*TopicEvent, error) {
	out := map[string]*TopicEvent{}
	if len(keys) == 0 {
		return out, nil
	}
	cur, err := s.tenantDB(tenant).Collection(topicEventsCollection).Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}}, nil)
	if err != nil {
		return nil, dbError("read topic events", err)
	}
	var list []*TopicEvent
	if err := engine.All(ctx, cur, &list); err != nil {
		return nil, dbError("read topic events", err)
	}
	for _, ev := range list {
		out[ev.Key] = ev
	}
	return out, nil
}

// TopicEvents returns up to limit events of a subscription numbered from
// since to until (0: no bound), in number order.
func (s *Store) TopicEvents(ctx context.Context, tenant, sub string, since, until int64, limit int) ([]*TopicEvent, error) {
	n := bson.D{{Key: "$gte", Value: since}}
	if until > 0 {
		n = append(n, bson.E{Key: "$lte", Value: until})
	}
	cur, err := s.tenantDB(tenant).Collection(topicEventsCollection).Find(ctx, bson.D{{Key: "sub", Value: sub}, {Key: "n", Value: n}},
		&engine.FindOptions{Sort: bson.D{{Key: "n", Value: 1}}, Limit: int64(limit)})
	if err != nil {
		return nil, dbError("read topic events", err)
	}
	var out []*TopicEvent
	if err := engine.All(ctx, cur, &out); err != nil {
		return nil, dbError("read topic events", err)
	}
	return out, nil
}

// LastTopicEvent is the number of a subscription's latest event (0: none).
func (s *Store) LastTopicEvent(ctx context.Context, tenant, sub string) (int64, error) {
	var ev TopicEvent
	err := engine.FindOneInto(ctx, s.tenantDB(tenant).Collection(topicEventsCollection), bson.D{{Key: "sub", Value: sub}},
		&engine.FindOptions{Sort: bson.D{{Key: "n", Value: -1}}}, &ev)
	if errors.Is(err, engine.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, dbError("read the last topic event", err)
	}
	return ev.Number, nil
}

// topicCursor is how far a subscription's events were delivered.
type topicCursor struct {
	Sub       string `bson:"_id"`
	Delivered int64  `bson:"delivered"`
}

// TopicCursor is the number of the last event of a subscription that was
// delivered (0: none).
func (s *Store) TopicCursor(ctx context.Context, tenant, sub string) (int64, error) {
	var c topicCursor
	err := engine.FindOneInto(ctx, s.tenantDB(tenant).Collection(topicCursorsCollection), bson.D{{Key: "_id", Value: sub}}, nil, &c)
	if errors.Is(err, engine.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, dbError("read topic cursor", err)
	}
	return c.Delivered, nil
}

// SetTopicCursor records that a subscription's events up to delivered
// went out.
func (s *Store) SetTopicCursor(ctx context.Context, tenant, sub string, delivered int64) error {
	_, err := s.tenantDB(tenant).Collection(topicCursorsCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: sub}}, topicCursor{Sub: sub, Delivered: delivered}, true)
	return dbError("record topic cursor", err)
}

// DropTopicEvents removes a subscription's events and cursor.
func (s *Store) DropTopicEvents(ctx context.Context, tenant, sub string) error {
	db := s.tenantDB(tenant)
	if _, err := db.Collection(topicEventsCollection).DeleteMany(ctx, bson.D{{Key: "sub", Value: sub}}); err != nil {
		return dbError("drop topic events", err)
	}
	_, err := db.Collection(topicCursorsCollection).DeleteMany(ctx, bson.D{{Key: "_id", Value: sub}})
	return dbError("drop topic cursor", err)
}

// PruneTopicEvents removes a subscription's events numbered up to through.
func (s *Store) PruneTopicEvents(ctx context.Context, tenant, sub string, through int64) error {
	_, err := s.tenantDB(tenant).Collection(topicEventsCollection).DeleteMany(ctx, bson.D{{Key: "sub", Value: sub}, {Key: "n", Value: bson.D{{Key: "$lte", Value: through}}}})
	return dbError("prune topic events", err)
}
