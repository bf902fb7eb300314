package sequencer

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// FuzzDecodeBundle checks the staging bundle decoder, which reads objects
// back from storage (untrusted) when a process finishes an interrupted
// round. The fuzzed bytes are a bundle's contents after its magic line;
// when sealed is true the fuzz target adds the magic and a correct
// checksum, so mutations reach the parser instead of all failing the
// checksum. The committed corpus holds a bundle of real navigli2025h2 tiles.
//
// Properties: decodeBundle never panics or allocates beyond its input;
// a bundle it accepts names only tile paths, and re-encoding what it
// decoded decodes to the same parent and objects.
func FuzzDecodeBundle(f *testing.F) {
	body := func(objects []object) []byte {
		b := encodeBundle([]byte("parent\n"), objects)
		return b[len(stagingMagic) : len(b)-sha256.Size]
	}
	f.Add(body(nil), true)
	f.Add(body([]object{{key: "tile/0/000", data: bytes.Repeat([]byte{1}, 64)}, {key: "tile/data/000.p/3", data: []byte("gz")}}), true)
	f.Add(body([]object{{key: "checkpoint", data: []byte("x")}}), true)
	f.Add(body([]object{{key: "tile/../checkpoint", data: []byte("x")}}), true)
	f.Add(body([]object{{key: "tile/0/000/x", data: []byte("x")}}), true)
	f.Add(body([]object{{key: "tile/0/000", data: []byte("x")}}), false)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, true)
	f.Fuzz(func(t *testing.T, in []byte, sealed bool) {
		b := in
		if sealed {
			b = append([]byte(stagingMagic), in...)
			sum := sha256.Sum256(b)
			b = append(b, sum[:]...)
		}
		bd, err := decodeBundle(b)
		if err != nil {
			return
		}
		size := len(bd.parent)
		for _, o := range bd.objects {
			if _, err := tile.ParsePath(o.key); err != nil {
				t.Fatalf("decodeBundle accepted key %q, which is not a tile path", o.key)
			}
			size += len(o.key) + len(o.data)
		}
		if size > len(b) {
			t.Fatalf("decoded %d bytes of objects from a %d-byte bundle", size, len(b))
		}
		again, err := decodeBundle(encodeBundle(bd.parent, bd.objects))
		if err != nil || len(again.objects) != len(bd.objects) || !bytes.Equal(again.parent, bd.parent) {
			t.Fatalf("re-encoded bundle does not decode the same: %v", err)
		}
		for i := range bd.objects {
			if again.objects[i].key != bd.objects[i].key || !bytes.Equal(again.objects[i].data, bd.objects[i].data) {
				t.Fatalf("object %d changed in a re-encoding round trip", i)
			}
		}
	})
}
