package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"fhirstore/store/engine"
)

// conformanceTypes are the resource types whose writes change what a
// tenant's definitions say: profiles, terminology, search parameters, the
// record of installed guides, and the forms responses are checked against.
var conformanceTypes = map[string]bool{
	"StructureDefinition": true, "ValueSet": true, "CodeSystem": true,
	"SearchParameter": true, "ImplementationGuide": true, "Questionnaire": true,
}

// IsConformanceType reports whether writing a resource of typ changes the
// tenant's definitions (and so its conformance generation).
func IsConformanceType(typ string) bool { return conformanceTypes[typ] }

// conformanceGenID is the settings document holding a tenant's
// conformance generation.
const conformanceGenID = "conformance"

// Definitions reads one tenant's conformance resources by canonical URL:
// the tenant's half of the profile validator's definitions (package
// fhirschema/profile merges it over the core ones). Two Definitions of the
// same store and tenant are equal, so caches keyed by them are shared; the
// zero value holds nothing.
type Definitions struct {
	s      *Store
	tenant string
}

// Definitions returns a reader of the tenant's conformance resources.
func (s *Store) Definitions(tenant string) Definitions {
	return Definitions{s: s, tenant: tenant}
}

// Generation is the tenant's conformance generation: a value shared by
// every server of the database that changes after each write of a
// conformance resource, so that caches keyed by it are never stale. One
// read of one settings document.
func (d Definitions) Generation(ctx context.Context) (uint64, error) {
	if d.s == nil {
		return 0, nil
	}
	m, _ := ctx.Value(generationMemoKey{}).(*generationMemo)
	if m == nil {
		return d.s.ConformanceGeneration(ctx, d.tenant)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if gen, ok := m.gens[d.tenant]; ok {
		return gen, nil
	}
	gen, err := d.s.ConformanceGeneration(ctx, d.tenant)
	if err == nil {
		m.gens[d.tenant] = gen
	}
	return gen, err
}

// generationMemo keeps the conformance generations read while one write's
// resources are checked: they are checked against the same definitions,
// and a generation changes only once a write commits. A Bundle of 500
// entries reads the settings document once rather than 500 times.
type generationMemo struct {
	mu   sync.Mutex
	gens map[string]uint64
}

type generationMemoKey struct{}

// withGenerationMemo returns ctx under which Definitions.Generation reads
// each tenant's generation once.
func withGenerationMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, generationMemoKey{}, &generationMemo{gens: map[string]uint64{}})
}

// Resource returns the tenant's current resource of type typ whose
// canonical URL is url ("url" or "url|version"), decoded with numbers as
// json.Number; nil, nil when there is none. Without a version the most
// recently written one answers. Callers must not modify what it returns:
// it is shared through the cache.
func (d Definitions) Resource(ctx context.Context, typ, url string) (map[string]any, error) {
	if d.s == nil || !conformanceTypes[typ] {
		return nil, nil
	}
	gen, err := d.Generation(ctx)
	if err != nil {
		return nil, err
	}
	c := d.s.definitionCache(d.tenant)
	key := typ + " " + url
	if r, ok := c.get(gen, key); ok {
		return r, nil
	}
	r, err := d.s.canonicalResource(ctx, d.tenant, typ, url)
	if err != nil {
		return nil, err
	}
	c.put(gen, key, r)
	return r, nil
}

// Profiles lists the URLs of the tenant's profiles of resources by the
// type they constrain (StructureDefinitions of kind resource and
// derivation constraint), each list sorted.
func (d Definitions) Profiles(ctx context.Context) (map[string][]string, error) {
	if d.s == nil {
		return nil, nil
	}
	gen, err := d.Generation(ctx)
	if err != nil {
		return nil, err
	}
	c := d.s.definitionCache(d.tenant)
	if p, ok := c.getProfiles(gen); ok {
		return p, nil
	}
	p, err := d.s.resourceProfiles(ctx, d.tenant)
	if err != nil {
		return nil, err
	}
	c.putProfiles(gen, p)
	return p, nil
}

// ConformanceGeneration reads the tenant's conformance generation,
// recording a fresh one when the tenant has none yet (a new tenant, or one
// whose conformance resources predate generations).
func (s *Store) ConformanceGeneration(ctx context.Context, tenant string) (uint64, error) {
	coll := s.tenantDB(tenant).Collection(settingsCollection)
	for range 3 {
		var doc struct {
			Gen int64 `bson:"gen"`
		}
		raw, err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: conformanceGenID}}, nil)
		err = engine.Decode(raw, err, &doc)
		if err == nil {
			return uint64(doc.Gen), nil
		}
		if !errors.Is(err, engine.ErrNoDocuments) {
			return 0, dbError("read the conformance generation of "+tenant, err)
		}
		err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: conformanceGenID}, {Key: "gen", Value: newGeneration()}})
		if err != nil && !engine.IsDuplicateKey(err) {
			return 0, dbError("record the conformance generation of "+tenant, err)
		}
	}
	return 0, fmt.Errorf("read the conformance generation of %s: it keeps changing", tenant)
}

// newGeneration draws a generation. Random rather than counted: FerretDB's
// $inc is not atomic, and any change is all a reader needs to see; drawn
// from 63 bits, generations of different tenants do not meet either.
func newGeneration() int64 { return rand.Int64N(1<<62) + 1 }

// conformanceChanged records a new generation after a write of a
// conformance resource of tenant: every server reading the generation
// afterwards drops what it cached. It runs after the current row is
// written, so no reader can cache the old row under the new generation.
func (s *Store) conformanceChanged(ctx context.Context, tenant, typ string) {
	if !conformanceTypes[typ] {
		return
	}
	s.definitionCache(tenant).reset()
	_, err := s.tenantDB(tenant).Collection(settingsCollection).ReplaceOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: conformanceGenID}},
		bson.D{{Key: "_id", Value: conformanceGenID}, {Key: "gen", Value: newGeneration()}}, true)
	if err != nil {
		s.log.Warn("record the conformance generation", zap.String("tenant", tenant), zap.String("type", typ), zap.Error(err))
	}
}

// canonicalResource reads the current resource of typ whose url (and
// version, when url carries "|version") match; nil when there is none.
func (s *Store) canonicalResource(ctx context.Context, tenant, typ, canonical string) (map[string]any, error) {
	url, version, _ := strings.Cut(canonical, "|")
	docs, err := s.currentByURL(ctx, tenant, typ, url)
	if err != nil {
		return nil, err
	}
	for i := len(docs) - 1; i >= 0; i-- { // newest first
		r, err := decodeDefinition(typ, docs[i])
		if err != nil {
			return nil, err
		}
		if r == nil || r["url"] != url {
			continue
		}
		if v, _ := r["version"].(string); version == "" || v == version {
			return r, nil
		}
	}
	return nil, nil
}

// currentByURL reads the current rows of typ indexed under url, oldest
// write first.
func (s *Store) currentByURL(ctx context.Context, tenant, typ, url string) ([]*storedDoc, error) {
	coll := s.tenantDB(tenant).Collection(typ)
	opts := &engine.FindOptions{Sort: bson.D{{Key: "lastUpdated", Value: 1}, {Key: "_id", Value: 1}}, Projection: bson.D{{Key: "idx", Value: 0}, {Key: "sort", Value: 0}}}
	cur, err := coll.Find(ctx, bson.D{{Key: "idx.url", Value: url}}, opts)
	if err != nil {
		return nil, dbError("find "+typ+" by url", err)
	}
	var docs []*storedDoc
	if err := engine.All(ctx, cur, &docs); err != nil {
		return nil, dbError("find "+typ+" by url", err)
	}
	return docs, nil
}

// decodeDefinition renders a current row as a generic resource; nil for a
// deleted one.
func decodeDefinition(typ string, d *storedDoc) (map[string]any, error) {
	res, err := d.toResource(typ)
	if err != nil || res.Deleted {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(res.JSON))
	dec.UseNumber()
	var r map[string]any
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decode %s/%s: %w", typ, d.ID, err)
	}
	return r, nil
}

// resourceProfiles reads every current StructureDefinition of the tenant
// and keeps the profiles of resources.
func (s *Store) resourceProfiles(ctx context.Context, tenant string) (map[string][]string, error) {
	coll := s.tenantDB(tenant).Collection("StructureDefinition")
	opts := &engine.FindOptions{Projection: bson.D{{Key: "idx", Value: 0}, {Key: "sort", Value: 0}}}
	cur, err := coll.Find(ctx, bson.D{}, opts)
	if err != nil {
		return nil, dbError("list the profiles of "+tenant, err)
	}
	defer cur.Close(ctx)
	out := map[string][]string{}
	for cur.Next(ctx) {
		var d storedDoc
		if err := bson.Unmarshal(cur.Current(), &d); err != nil {
			return nil, fmt.Errorf("list the profiles of %s: %w", tenant, err)
		}
		var sd struct {
			URL        string `bson:"url"`
			Type       string `bson:"type"`
			Kind       string `bson:"kind"`
			Derivation string `bson:"derivation"`
		}
		if d.Deleted || len(d.Resource) == 0 || bson.Unmarshal(d.Resource, &sd) != nil {
			continue
		}
		if sd.Kind == "resource" && sd.Derivation == "constraint" && sd.URL != "" && !slices.Contains(out[sd.Type], sd.URL) {
			out[sd.Type] = append(out[sd.Type], sd.URL)
		}
	}
	if err := cur.Err(); err != nil {
		return nil, dbError("list the profiles of "+tenant, err)
	}
	for _, urls := range out {
		sort.Strings(urls)
	}
	return out, nil
}

// definitionCache holds what one tenant's definitions answered under one
// generation.
type definitionCache struct {
	mu       sync.Mutex
	gen      uint64
	byKey    map[string]map[string]any
	profiles map[string][]string
}

// maxCachedDefinitions bounds one tenant's cached look-ups; past it the
// cache starts over.
const maxCachedDefinitions = 4096

// definitionCache returns the tenant's cache.
func (s *Store) definitionCache(tenant string) *definitionCache {
	if c, ok := s.definitions.Load(tenant); ok {
		return c.(*definitionCache)
	}
	c, _ := s.definitions.LoadOrStore(tenant, &definitionCache{})
	return c.(*definitionCache)
}

// at moves the cache to gen, dropping what it held under another.
func (c *definitionCache) at(gen uint64) {
	if c.gen != gen || c.byKey == nil {
		c.gen, c.byKey, c.profiles = gen, map[string]map[string]any{}, nil
	}
}

func (c *definitionCache) get(gen uint64, key string) (map[string]any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.byKey == nil {
		return nil, false
	}
	r, ok := c.byKey[key]
	return r, ok
}

func (c *definitionCache) put(gen uint64, key string, r map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at(gen)
	if len(c.byKey) >= maxCachedDefinitions {
		c.byKey = map[string]map[string]any{}
	}
	c.byKey[key] = r
}

func (c *definitionCache) getProfiles(gen uint64) (map[string][]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.profiles, c.gen == gen && c.profiles != nil
}

func (c *definitionCache) putProfiles(gen uint64, p map[string][]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at(gen)
	c.profiles = p
}

// reset drops everything: this process wrote a conformance resource.
func (c *definitionCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen, c.byKey, c.profiles = 0, nil, nil
}
