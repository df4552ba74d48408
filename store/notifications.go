package store

import (
	"context"
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
