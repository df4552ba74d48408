package sqlite

import (
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"fhirstore/store/engine"
)

// Stored documents (format 2). A document is kept as three parts:
//
//   - its _id, in d_C's id column only;
//   - its shared field (Options.SharedField, the store's "resource"), when
//     it has one, in the file's table "_blobs" (id, h, n, z): one row per
//     distinct value, h the first 16 bytes of its SHA-256, n the number of
//     documents holding it, z the value compressed. A resource's current
//     row and its newest history row hold the same resource: it is kept
//     once;
//   - the rest, compressed, in d_C's doc column, the blob's id in its b
//     column.
//
// doc is a tag byte, the positions of _id and of the shared field among
// the document's fields (uvarints, each one more than the position, 0
// when absent), then a frame of the rest's BSON. z is a tag byte, the
// shared value's BSON type, then a frame of its bytes. A frame is an s2
// block compressed with the content of the dictionary below, then the
// CRC-32C of the bytes it holds (s2Tag); s2 decodes a stored part in a
// sixth of zstd's time for a tenth more bytes. Parts written before, zstd
// frames with the dictionary and their own checksum (zstdTag), are read
// as they are. A torn or damaged part fails to decode (engine.ErrCorrupt)
// rather than being read as another document. Reassembled, a document is
// byte for byte the BSON that was inserted.

// Tags of stored parts: how the frame after the header is compressed.
const (
	zstdTag = 0x01 // a zstd frame with dictionary 1, with its checksum
	s2Tag   = 0x02 // an s2 block with dictionary 1's content, then the CRC-32C of what it holds
)

// dictionary is the zstd dictionary (id 1) of stored parts, trained on the
// documents the store writes for the R4 examples and the Synthea sample
// (see TestTrainDictionary): field names, codes and systems that every
// document would otherwise spell out itself. s2 uses its content (the
// last 64 KiB less a byte, s2's most).
//
//go:embed docs.zdict
var dictionary []byte

// codec compresses and decompresses stored parts; it is safe for
// concurrent use.
type codec struct {
	s2  *s2.Dict
	dec *zstd.Decoder // of parts written with zstdTag

	// recent keeps the stored forms of the shared values compressed last:
	// a write stores the same resource twice (its history row, then its
	// current row), compressed once.
	mu     sync.Mutex
	recent map[string][]byte
	order  []string
}

// recentBlobs is how many stored forms of shared values codec keeps.
const recentBlobs = 256

// newCodec readies the dictionary's s2 form and the zstd decoder.
func newCodec() (*codec, error) {
	zd, err := zstd.InspectDictionary(dictionary)
	if err != nil {
		return nil, fmt.Errorf("document dictionary: %w", err)
	}
	content := zd.Content()
	sd := s2.NewDict(content[max(0, len(content)-(s2.MaxDictSize-1)):])
	if sd == nil {
		return nil, errors.New("document dictionary: not an s2 dictionary")
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDicts(dictionary), zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(64<<20))
	if err != nil {
		return nil, fmt.Errorf("document decoder: %w", err)
	}
	return &codec{s2: sd, dec: dec}, nil
}

// close releases the decoder's goroutines.
func (c *codec) close() { c.dec.Close() }

// blob is a shared field's value ready to be stored.
type blob struct {
	hash []byte // 16 bytes
	z    []byte // the stored form
}

// encoded is a document split for storage: doc the stored rest, shared
// its shared field's value (nil when it has none).
type encoded struct {
	doc    []byte
	shared *blob
}

// parts is a document split for storage, uncompressed: rest the BSON
// of its fields but _id and the shared field, at the positions (one more
// than their index, 0 when absent) of those two; shared the shared
// field's value and type.
type parts struct {
	rest             []byte
	idPos, sharedPos int
	shared           []byte
	sharedType       bsoncore.Type
}

// split separates raw (a valid BSON document) into its parts; shared is
// the name of the shared field ("" for none).
func (c *codec) split(raw []byte, shared string) (*parts, error) {
	idx, rest := bsoncore.AppendDocumentStart(make([]byte, 0, len(raw)))
	var p parts
	pos := 0
	err := eachElement(raw, func(key string, v bsoncore.Value) error {
		pos++
		switch {
		case key == "_id" && p.idPos == 0 && v.Type == bsoncore.TypeString:
			p.idPos = pos
		case key == shared && shared != "" && p.sharedPos == 0:
			p.sharedPos, p.shared, p.sharedType = pos, v.Data, v.Type
		default:
			rest = bsoncore.AppendValueElement(rest, key, v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	p.rest, _ = bsoncore.AppendDocumentEnd(rest, idx)
	return &p, nil
}

// encode splits raw (a valid BSON document) into its stored parts; shared
// is the name of the shared field ("" for none).
func (c *codec) encode(raw []byte, shared string) (*encoded, error) {
	p, err := c.split(raw, shared)
	if err != nil {
		return nil, err
	}
	var out encoded
	if p.sharedPos > 0 {
		out.shared = c.encodeBlob(p.sharedType, p.shared)
	}
	doc := []byte{s2Tag}
	doc = binary.AppendUvarint(doc, uint64(p.idPos))
	doc = binary.AppendUvarint(doc, uint64(p.sharedPos))
	out.doc = c.compress(doc, p.rest)
	return &out, nil
}

// encodeBlob is the stored form of a shared value of type t.
func (c *codec) encodeBlob(t bsoncore.Type, data []byte) *blob {
	h := sha256.New()
	h.Write([]byte{byte(t)})
	h.Write(data)
	b := &blob{hash: h.Sum(nil)[:16]}
	key := string(b.hash)
	c.mu.Lock()
	b.z = c.recent[key]
	c.mu.Unlock()
	if b.z != nil {
		return b
	}
	b.z = c.compress([]byte{s2Tag, byte(t)}, data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recent == nil {
		c.recent = make(map[string][]byte, recentBlobs)
	}
	if _, ok := c.recent[key]; !ok {
		if len(c.order) == recentBlobs {
			delete(c.recent, c.order[0])
			c.order = c.order[1:]
		}
		c.recent[key] = b.z
		c.order = append(c.order, key)
	}
	return b
}

// storedParts are a document's parts as read from its row: what decode
// reassembles.
type storedParts struct {
	id    string
	doc   []byte // d_C.doc
	value []byte // the shared field's stored form (_blobs.z), nil when absent or not read
}

// errNoShared is a stored document whose shared field was not read.
var errNoShared = errors.New("the shared field was not read")

// decode reassembles a document: id, then the rest's fields with the
// shared field (named shared) put back where they were. With the shared
// value nil, a document that had one is returned without it when
// skipShared is set, and fails otherwise.
func (c *codec) decode(p storedParts, shared string, skipShared bool, buf []byte) ([]byte, error) {
	idPos, sharedPos, frame, err := docHeader(p.doc)
	if err != nil {
		return nil, err
	}
	rest, err := c.decompress(p.doc[0], frame, buf)
	if err != nil {
		return nil, err
	}
	return c.reassemble(rest, p, shared, skipShared, idPos, sharedPos)
}

// docHeader reads the header of a stored rest: the positions of _id and
// of the shared field, and the compressed frame after them.
func docHeader(doc []byte) (idPos, sharedPos int, frame []byte, err error) {
	if len(doc) < 3 || doc[0] != zstdTag && doc[0] != s2Tag {
		return 0, 0, nil, fmt.Errorf("%w: unknown stored form", engine.ErrCorrupt)
	}
	id, n := binary.Uvarint(doc[1:])
	if n <= 0 {
		return 0, 0, nil, fmt.Errorf("%w: malformed header", engine.ErrCorrupt)
	}
	sh, m := binary.Uvarint(doc[1+n:])
	if m <= 0 {
		return 0, 0, nil, fmt.Errorf("%w: malformed header", engine.ErrCorrupt)
	}
	return int(id), int(sh), doc[1+n+m:], nil
}

// fastPartBytes is the size under which a part is compressed by s2's fast
// encoder: its "better" one clears 576 KiB of match tables on every call
// (~20 µs), which for a history row's ~150 bytes costs more than all the
// rest; under 512 bytes the fast one stores 0.1% more.
const fastPartBytes = 512

// compress appends to header the stored form of data: an s2 block with
// the dictionary's content, then the CRC-32C of data.
func (c *codec) compress(header, data []byte) []byte {
	var out []byte
	if len(data) < fastPartBytes {
		out = append(header, c.s2.Encode(nil, data)...)
	} else {
		out = append(header, c.s2.EncodeBetter(nil, data)...)
	}
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(data, castagnoli))
}

// decompress decodes a frame stored with tag into buf, checking it.
func (c *codec) decompress(tag byte, frame, buf []byte) ([]byte, error) {
	if tag == zstdTag {
		out, err := c.dec.DecodeAll(frame, buf[:0])
		if err != nil {
			return nil, decodeError(err)
		}
		return out, nil
	}
	if len(frame) < 4 {
		return nil, fmt.Errorf("%w: a torn frame", engine.ErrCorrupt)
	}
	body, sum := frame[:len(frame)-4], binary.LittleEndian.Uint32(frame[len(frame)-4:])
	n, err := s2.DecodedLen(body)
	if err != nil {
		return nil, fmt.Errorf("%w: decompress: %v", engine.ErrCorrupt, err)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	out, err := c.s2.Decode(buf[:n], body)
	if err != nil {
		return nil, fmt.Errorf("%w: decompress: %v", engine.ErrCorrupt, err)
	}
	if crc32.Checksum(out, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", engine.ErrCorrupt)
	}
	return out, nil
}

// castagnoli is the CRC-32C table of stored parts' checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// restOf decompresses the rest of a stored document: its fields but _id
// and the shared field, as BSON.
func (c *codec) restOf(doc []byte, buf []byte) ([]byte, error) {
	_, _, frame, err := docHeader(doc)
	if err != nil {
		return nil, err
	}
	return c.decompress(doc[0], frame, buf)
}

// reassemble puts the document of p together from its decompressed rest.
func (c *codec) reassemble(rest []byte, p storedParts, shared string, skipShared bool, idPos, sharedPos int) ([]byte, error) {
	var err error
	var sharedType byte
	var sharedData []byte
	switch {
	case sharedPos == 0:
	case p.value != nil:
		if sharedType, sharedData, err = c.decodeBlob(p.value); err != nil {
			return nil, err
		}
	case !skipShared:
		return nil, errNoShared
	default:
		sharedPos = 0
	}
	return assemble(rest, p.id, idPos, shared, sharedType, sharedData, sharedPos)
}

// decodeBlob returns the BSON type and bytes of a shared value's stored form.
func (c *codec) decodeBlob(z []byte) (byte, []byte, error) {
	if len(z) < 2 || z[0] != zstdTag && z[0] != s2Tag {
		return 0, nil, fmt.Errorf("%w: unknown stored form of the shared field", engine.ErrCorrupt)
	}
	data, err := c.decompress(z[0], z[2:], nil)
	if err != nil {
		return 0, nil, fmt.Errorf("the shared field: %w", err)
	}
	return z[1], data, nil
}

// decodeError is the error of a frame that does not decompress: damage,
// unless the engine is closed.
func decodeError(err error) error {
	if errors.Is(err, zstd.ErrDecoderClosed) {
		return fmt.Errorf("decompress: %w", errClosed)
	}
	return fmt.Errorf("%w: %w", engine.ErrCorrupt, err)
}

// assemble puts _id (at idPos) and the shared field (at sharedPos; 0:
// neither) back among the fields of rest, checking what it returns.
func assemble(rest []byte, id string, idPos int, shared string, sharedType byte, sharedData []byte, sharedPos int) ([]byte, error) {
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(rest)+len(id)+len(sharedData)+len(shared)+16))
	pos := 0
	put := func() {
		for {
			switch pos + 1 {
			case idPos:
				out = bsoncore.AppendStringElement(out, "_id", id)
			case sharedPos:
				out = bsoncore.AppendHeader(out, bsoncore.Type(sharedType), shared)
				out = append(out, sharedData...)
			default:
				return
			}
			pos++
		}
	}
	put()
	err := eachElement(rest, func(key string, v bsoncore.Value) error {
		out = bsoncore.AppendValueElement(out, key, v)
		pos++
		put()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrCorrupt, err)
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	if err := bsoncore.Document(out).Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrCorrupt, err)
	}
	return out, nil
}

// docError names the document of a failure to read it: a damaged one is
// an *engine.CorruptError.
func docError(db, coll, id string, err error) error {
	if errors.Is(err, engine.ErrCorrupt) {
		return &engine.CorruptError{Database: db, Collection: coll, ID: id, Err: err}
	}
	return fmt.Errorf("document %q of %s.%s: %w", id, db, coll, err)
}
