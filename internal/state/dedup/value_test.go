package dedup

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// TestValueEncoding pins the byte format of a dedup value, which existing
// databases hold (the embedded database's records, runs and journal): the
// leaf index, then the timestamp, each 8 bytes big-endian. A change to the
// encoding would make every stored record read as another entry.
func TestValueEncoding(t *testing.T) {
	v := Value{Index: 0x0102030405060708, Timestamp: 0x1112131415161718}
	const want = "0102030405060708" + "1112131415161718"
	if got := hex.EncodeToString(EncodeValue(v)); got != want {
		t.Fatalf("EncodeValue = %s, want %s", got, want)
	}
	// AppendValue writes after what b holds, in place when b has room.
	var rec [4 + ValueSize]byte
	copy(rec[:], "head")
	out := AppendValue(rec[:4], v)
	if &out[0] != &rec[0] || string(rec[:4]) != "head" || hex.EncodeToString(rec[4:]) != want {
		t.Fatalf("AppendValue into a record with room: %x", rec)
	}
	if got, ok := DecodeValue(EncodeValue(v)); !ok || got != v {
		t.Fatalf("DecodeValue(EncodeValue(%+v)) = %+v, %v", v, got, ok)
	}
	for _, n := range []int{0, 8, ValueSize - 1, ValueSize + 1, 2 * ValueSize} {
		if got, ok := DecodeValue(bytes.Repeat([]byte{0xff}, n)); ok || got != (Value{}) {
			t.Errorf("DecodeValue of %d bytes = %+v, %v; want a refusal", n, got, ok)
		}
	}
}
