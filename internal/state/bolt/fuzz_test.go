package bolt

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/state/dedup"
)

// FuzzReadJournal: whatever bytes follow a journal's header (a damaged
// disk, or someone with write access to the directory), reading it never
// panics; and a journal of frames written by appendFrame, with a torn copy
// of one more frame at its end, reads back exactly those frames' records,
// as the newest journal, without being taken for damaged.
func FuzzReadJournal(f *testing.F) {
	one := appendFrame(nil, sha256.Sum256([]byte("log")), []dedup.Record{testRecord(1, true), testRecord(2, false)})
	f.Add(one, 0)
	f.Add(append(one, one...), 5)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0}, 0)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, 3)
	f.Fuzz(func(t *testing.T, tail []byte, n int) {
		d := &DB{id: [16]byte{1}}
		dir := t.TempDir()
		hdr := append([]byte(journalMagic), d.id[:]...)
		for _, newest := range []bool{false, true} {
			p := filepath.Join(dir, "arbitrary")
			if err := os.WriteFile(p, append(hdr, tail...), 0o600); err != nil {
				t.Fatal(err)
			}
			d.readJournal(journalFile{path: p, seq: 1}, newest)
		}

		// Records made from the input, one frame per 8 bytes of it.
		var journal []byte
		var want []dedup.Record
		id := sha256.Sum256(tail)
		for i := 0; i+8 <= len(tail) && i < 8*64; i += 8 {
			r := testRecord(int(binary.BigEndian.Uint64(tail[i:])), tail[i]&1 == 0)
			want = append(want, r)
			journal = appendFrame(journal, id, []dedup.Record{r})
		}
		// The torn frame's record has a key no testRecord has.
		tornRecord := dedup.Record{Key: dedup.KeyFor(true, id, []byte("torn")), Value: dedup.Value{Index: 1, Timestamp: 2}}
		extra := appendFrame(nil, id, []dedup.Record{tornRecord})
		torn := extra[:max(0, min(len(extra)-1, n))]
		p := filepath.Join(dir, "written")
		if err := os.WriteFile(p, append(append(hdr, journal...), torn...), 0o600); err != nil {
			t.Fatal(err)
		}
		tr, damaged, err := d.readJournal(journalFile{path: p, seq: 1}, true)
		if err != nil || damaged != nil {
			t.Fatalf("a written journal with %d torn bytes at its end: damaged %v, err %v", len(torn), damaged, err)
		}
		lt := tr.logs[id]
		for _, r := range want {
			// Equal keys come from equal indexes, so have equal values.
			if v, ok := lt.keys[r.Key]; !ok || v != r.Value {
				t.Fatalf("record %+v read back as %+v, %v", r.Value, v, ok)
			}
		}
		if _, ok := tr.get(id, tornRecord.Key); ok {
			t.Fatal("the torn frame's record was read")
		}
	})
}
