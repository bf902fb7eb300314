package dedup

import (
	"bytes"
	"testing"
)

// FuzzDecodeValue: the record codec the embedded database stores accepts
// exactly the 16-byte encodings, and what it decodes re-encodes to the same
// bytes, so a record read back is the record written.
func FuzzDecodeValue(f *testing.F) {
	f.Add(EncodeValue(Value{Index: 0, Timestamp: 0}))
	f.Add(EncodeValue(Value{Index: 1<<40 - 1, Timestamp: 1763769600000}))
	f.Add([]byte{})
	f.Add(make([]byte, ValueSize-1))
	f.Add(make([]byte, ValueSize+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, ok := DecodeValue(b)
		if ok != (len(b) == ValueSize) {
			t.Fatalf("DecodeValue(%d bytes) ok = %v", len(b), ok)
		}
		if !ok {
			if v != (Value{}) {
				t.Fatalf("a refused record decoded to %+v", v)
			}
			return
		}
		if got := EncodeValue(v); !bytes.Equal(got, b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, v, got)
		}
	})
}
