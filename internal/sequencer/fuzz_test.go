package sequencer

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
)

// FuzzDecodeBundle checks the staging bundle decoder, which reads objects
// back from storage (untrusted) when a process finishes an interrupted
// round. The fuzzed bytes are a bundle's contents after its magic line;
// when sealed is true the fuzz target adds the magic and a correct
// checksum, so mutations reach the parser instead of all failing the
// checksum. The committed corpus holds a bundle of real navigli2025h2 tiles.
//
// Properties: decodeBundle never panics or allocates beyond its input;
// a bundle it accepts names only keys under tile/, and re-encoding what it
// decoded decodes to the same objects.
func FuzzDecodeBundle(f *testing.F) {
	body := func(objects []object) []byte {
		b := encodeBundle(objects)
		return b[len(stagingMagic) : len(b)-sha256.Size]
	}
	f.Add(body(nil), true)
	f.Add(body([]object{{key: "tile/0/000", data: bytes.Repeat([]byte{1}, 64)}, {key: "tile/data/000.p/3", data: []byte("gz")}}), true)
	f.Add(body([]object{{key: "checkpoint", data: []byte("x")}}), true)
	f.Add(body([]object{{key: "tile/0/000", data: []byte("x")}}), false)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, true)
	f.Fuzz(func(t *testing.T, in []byte, sealed bool) {
		b := in
		if sealed {
			b = append([]byte(stagingMagic), in...)
			sum := sha256.Sum256(b)
			b = append(b, sum[:]...)
		}
		objects, err := decodeBundle(b)
		if err != nil {
			return
		}
		size := 0
		for _, o := range objects {
			if !strings.HasPrefix(o.key, "tile/") {
				t.Fatalf("decodeBundle accepted key %q, which is not a tile", o.key)
			}
			size += len(o.key) + len(o.data)
		}
		if size > len(b) {
			t.Fatalf("decoded %d bytes of objects from a %d-byte bundle", size, len(b))
		}
		again, err := decodeBundle(encodeBundle(objects))
		if err != nil || len(again) != len(objects) {
			t.Fatalf("re-encoded bundle does not decode: %d objects, %v", len(again), err)
		}
		for i := range objects {
			if again[i].key != objects[i].key || !bytes.Equal(again[i].data, objects[i].data) {
				t.Fatalf("object %d changed in a re-encoding round trip", i)
			}
		}
	})
}
