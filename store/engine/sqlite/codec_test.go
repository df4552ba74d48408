package sqlite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
	"go.mongodb.org/mongo-driver/v2/bson"

	"fhirstore/store/engine"
)

// TestPartsWrittenWithZstdAreRead checks that a document whose parts were
// compressed with zstd (the codec before s2) is read back byte for byte,
// next to one written now.
func TestPartsWrittenWithZstdAreRead(t *testing.T) {
	cd, err := newCodec()
	if err != nil {
		t.Fatal(err)
	}
	defer cd.close()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderDict(dictionary), zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20 {
		raw, err := bson.Marshal(observation(i, r))
		if err != nil {
			t.Fatal(err)
		}
		p, err := cd.split(raw, "resource")
		if err != nil {
			t.Fatal(err)
		}
		doc := binary.AppendUvarint(binary.AppendUvarint([]byte{zstdTag}, uint64(p.idPos)), uint64(p.sharedPos))
		old := storedParts{id: bson.Raw(raw).Lookup("_id").StringValue(), doc: enc.EncodeAll(p.rest, doc), value: enc.EncodeAll(p.shared, []byte{zstdTag, byte(p.sharedType)})}
		got, err := cd.decode(old, "resource", false, nil)
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("document %d written with zstd: %v, same bytes %v", i, err, bytes.Equal(got, raw))
		}
		now, err := cd.encode(raw, "resource")
		if err != nil {
			t.Fatal(err)
		}
		if now.doc[0] != s2Tag || now.shared.z[0] != s2Tag {
			t.Fatalf("document %d is written with tags %x and %x, want s2", i, now.doc[0], now.shared.z[0])
		}
		got, err = cd.decode(storedParts{id: old.id, doc: now.doc, value: now.shared.z}, "resource", false, nil)
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("document %d written with s2: %v", i, err)
		}
		// A flipped byte of the s2 block or of its checksum is damage.
		for _, at := range []int{len(now.doc) - 1, len(now.doc) - 6} {
			bad := bytes.Clone(now.doc)
			bad[at] ^= 0x20
			if _, err := cd.decode(storedParts{id: old.id, doc: bad, value: now.shared.z}, "resource", false, nil); !errors.Is(err, engine.ErrCorrupt) {
				t.Fatalf("document %d with byte %d flipped: %v, want engine.ErrCorrupt", i, at, err)
			}
		}
	}
}
